"""kag: Knowledge-Augmented Generation benchmarking and grading toolkit.

``kag.grade``, ``kag.records`` and ``kag.records_frame`` are the Python API (:mod:`kag.api`),
imported on first use so that ``import kag`` and the command line stay fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = ("grade", "records", "records_frame", "Record", "Report")


def __getattr__(name: str) -> Any:
    if name in _API:
        from kag import api

        return getattr(api, name)
    raise AttributeError(f"module 'kag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
