"""kag.grading.search.walk: what the walk of a search keeps as it goes."""

from __future__ import annotations

import os
import tracemalloc

from kag.grading.search.options import SearchOptions
from kag.grading.search.walk import _Entries


def test_the_entries_keep_nothing_per_folder_walked() -> None:
    """A million files are 100,000 question folders: nothing may be kept per folder."""
    root = os.path.join(os.sep, "tree")
    entries = _Entries(root, SearchOptions("x"))
    paths = [
        os.path.join(root, "d", f"{10_000_000 + q}", f"s{s}.json") for q in range(5000) for s in range(3)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for path in paths:
            entries(path)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 20_000, kept
    last = entries(paths[-1])
    assert last == (paths[-1], "d", "10004999", "s2")


def test_the_entries_name_each_files_dataset_question_and_setup_with_the_filters() -> None:
    root = os.path.join(os.sep, "tree")
    entries = _Entries(root, SearchOptions("x", prefix="run-", setups=("a*",), datasets=("keep",)))
    assert entries(os.path.join(root, "keep", "1", "run-ab.json")) == (
        os.path.join(root, "keep", "1", "run-ab.json"),
        "keep",
        "1",
        "ab",
    )
    assert entries(os.path.join(root, "keep", "1", "run-b.json")) is None
    assert entries(os.path.join(root, "drop", "1", "run-ab.json")) is None
    assert entries(os.path.join(root, "keep", "2", "run-ab.json")) is not None
