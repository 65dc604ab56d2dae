"""kag from Python: grade a result tree, read it one graded file at a time, compare its setups.

The functions here are what ``kag stats`` and ``kag stats compare``/``flips``/``impact`` run,
without the terminal: they print nothing, never exit, and raise
:class:`kag.errors.KagError` subclasses (``InputError`` for a file that cannot be read,
``UsageError`` for an argument that cannot be used), whose message names the file, the key
or the argument. ``kag.grade``, ``kag.records``, ``kag.records_frame``, ``kag.compare``,
``kag.flips`` and ``kag.impact`` are these functions (see docs/python.md):
:mod:`kag.api.stats` grades, :mod:`kag.api.compare` pairs the setups.
"""

from kag.api.compare import ComparisonReport, FlipsReport, ImpactReport, compare, flips, impact
from kag.api.stats import Record, Report, grade, records, records_frame

__all__ = [
    "ComparisonReport",
    "FlipsReport",
    "ImpactReport",
    "Record",
    "Report",
    "compare",
    "flips",
    "grade",
    "impact",
    "records",
    "records_frame",
]
