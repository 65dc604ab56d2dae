"""kag: Knowledge-Augmented Generation benchmarking and grading toolkit.

``kag.grade``, ``kag.records``, ``kag.records_frame``, ``kag.compare``, ``kag.flips`` and
``kag.impact`` are the Python API (:mod:`kag.api`), imported on first use so that
``import kag`` and the command line stay fast.
"""

from __future__ import annotations

import logging
from typing import Any

__version__ = "0.1.0"

# A library's loggers print nothing until the application configures logging: without a
# handler, Python's last-resort handler would print kag's warnings on stderr. The command
# line installs its own handler (kag.console.set_verbosity).
logging.getLogger("kag").addHandler(logging.NullHandler())

_API = (
    "grade",
    "records",
    "records_frame",
    "compare",
    "flips",
    "impact",
    "Record",
    "Report",
    "ComparisonReport",
    "FlipsReport",
    "ImpactReport",
)


def __getattr__(name: str) -> Any:
    if name in _API:
        from kag import api

        return getattr(api, name)
    raise AttributeError(f"module 'kag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
