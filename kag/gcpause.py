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
def collector_paused(*, keep: bool = False) -> Iterator[None]:
    """Pause CPython's cyclic garbage collector, restoring its state afterwards (also a
    decorator: ``@collector_paused()``).

    ``keep``: what was made lives on (a loaded table, a run's results), so on a normal exit
    every object the collector tracks is handed to its oldest generation without being
    walked (``gc.freeze`` then ``gc.unfreeze``): resuming the collector would otherwise walk
    all of it at once, and again as it ages. Not when the program keeps objects frozen:
    they stay so."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep and gc.get_freeze_count() == 0:
            gc.freeze()  # every generation into the permanent one, the young count back to 0
            gc.unfreeze()  # the permanent one into the oldest
    finally:
        if enabled:
            gc.enable()
