"""Regex search over the model responses of a result tree (`kag stats find`).

:mod:`.options` (what to search, what it gives), :mod:`.match` (one file), :mod:`.walk`
(the tree in chunks, in this process or in the worker pool), :mod:`.run` (the search and
its tally). The public names (each module's ``__all__``) are re-exported here.
"""

from kag.grading.search import match, options, run, walk
from kag.grading.search.match import *
from kag.grading.search.options import *
from kag.grading.search.run import *
from kag.grading.search.walk import *

# The reader and the walks of kag.results that the search builds on.
from kag.results.codec import parse_response
from kag.results.tree import iter_units, iter_walk, relative_path

__all__ = (
    match.__all__
    + options.__all__
    + run.__all__
    + walk.__all__
    + ["iter_units", "iter_walk", "parse_response", "relative_path"]
)
