"""Result files: the model (:mod:`.model`), its codec (:mod:`.codec`), file I/O
(:mod:`.io`) and the tree walks (:mod:`.tree`). The public names (each module's
``__all__``) are re-exported here."""

from kag.results import codec, io, model, runs, tree
from kag.results.codec import *
from kag.results.io import *
from kag.results.model import *
from kag.results.runs import *
from kag.results.tree import *

__all__ = codec.__all__ + io.__all__ + model.__all__ + runs.__all__ + tree.__all__
