"""Paired comparisons of setups on the questions both answered.

Per-file records first (:class:`~kag.grading.record.GradedFile`, one per graded result file),
aggregation after:

- :func:`mcnemar` - is the accuracy of two setups on the same questions different?
- :func:`paired_bootstrap_diff` - a seeded percentile CI of the accuracy difference.
- :func:`holm` - step-down adjustment of the p-values of several comparisons.
- :func:`compare_setups` - every setup against one baseline: the three above together.
- :func:`flips` - the questions one setup gets right and the other does not, both ways.
- :func:`retrieval_impact` - accuracy of a KAG setup by retrieved-subgraph size, and the
  questions retrieval helped or hurt against the same model without retrieval.

"Correct" means the outcome OK; WRONG and ERR are both "not correct", as in ACC = OK/TOT,
so a setup that errors where the other answers right loses that question.

Grading is :mod:`kag.grading.mcq`'s (the one rule of `kag stats`): :func:`load_source_answers`
runs :func:`kag.grading.mcq.grade_tree` with its per-file records kept and turns them
into the records the comparisons pair (:func:`answers_from_run`); the statistics below are pure
functions of those records. The public names (each module's ``__all__``) are re-exported
here.
"""

from importlib import import_module

from kag.grading.compare import analysis, paired, records, setups, trees
from kag.grading.compare.analysis import *
from kag.grading.compare.flips import *
from kag.grading.compare.paired import *
from kag.grading.compare.records import *
from kag.grading.compare.setups import *
from kag.grading.compare.trees import *

# The module by its full name: the package attribute `flips` is the function once re-exported.
_flips = import_module("kag.grading.compare.flips")
__all__ = (
    analysis.__all__ + _flips.__all__ + paired.__all__ + records.__all__ + setups.__all__ + trees.__all__
)
