"""The measures of a report block, one module each, registered in :mod:`.registry`.

Importing this package registers every measure, in the order below, which is the order of
a block's states: :mod:`.accuracy`, :mod:`.interval`, :mod:`.timing`,
:mod:`.context_length`, :mod:`.retrieval`, :mod:`.extracted`, :mod:`.open`,
:mod:`.usage`, :mod:`.epochs`, :mod:`.pass_at`, :mod:`.evidence`; then every other module
of the package, in name order, so that a measure added later is its module alone.

A measure module imports only :mod:`.registry`, :mod:`.declarations` (the types of its JSON
keys, columns and epoch reducers) and the records it reads, never the walk that runs it or
the renderers that draw it; the compatible order of the keys and columns across measures
is :mod:`.layout`'s.
"""

# isort: off
# Registration order is the order of a block's counters: not alphabetical.
from kag.grading.measures import accuracy
from kag.grading.measures import interval
from kag.grading.measures import timing
from kag.grading.measures import context_length
from kag.grading.measures import retrieval
from kag.grading.measures import extracted
from kag.grading.measures import open
from kag.grading.measures import usage
from kag.grading.measures import epochs
from kag.grading.measures import pass_at
from kag.grading.measures import evidence

# isort: on
import importlib
import pkgutil

from kag.grading.measures.registry import (
    Measure,
    kept_parts,
    measure,
    merge_by_setup,
    merge_first,
    needs,
    optional_names,
    reducers,
    register,
    registered,
    run_fields,
)

# The modules that declare no measure; importing any other module registers its measure.
_PARTS = frozenset({"registry", "declarations", "layout"})
for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _PARTS:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "Measure",
    "accuracy",
    "context_length",
    "epochs",
    "evidence",
    "extracted",
    "interval",
    "kept_parts",
    "measure",
    "merge_by_setup",
    "merge_first",
    "needs",
    "open",
    "optional_names",
    "pass_at",
    "reducers",
    "register",
    "registered",
    "retrieval",
    "run_fields",
    "timing",
    "usage",
]
