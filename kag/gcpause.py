"""The cyclic garbage collector paused while a burst of objects that hold no cycle is made.

Reference counting frees such objects; the collector, started by allocation counts, would
still walk every object made so far again and again (with 100,000 questions, three
quarters of a datasets file's load; 1.7x on ``benchmarks/bench_triplets.py``; 2-3% of a
find worker's time on small files).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector, restoring its state afterwards (also a
    decorator: ``@collector_paused()``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
