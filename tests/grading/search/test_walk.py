"""kag.grading.search.walk: what the walk of a search keeps as it goes."""

from __future__ import annotations

import os
import tracemalloc
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.grading.search import list_search_files, search
from kag.grading.search.options import SearchOptions
from kag.grading.search.walk import _Entries
from tests.conftest import write_ok


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


_NAMES = st.sampled_from(
    ["d", "e", ".h", "q", "1", "s.json", "run-a.json", "run-b.json", "x.json.tmp", "run-.json"]
)


@given(
    st.lists(st.lists(_NAMES, min_size=1, max_size=5), min_size=1, max_size=14),
    st.sampled_from(["", "run-"]),
    st.sampled_from([(), ("a",), ("*b", "s")]),
    st.sampled_from([(), ("d",), ("e", ".h")]),
    st.booleans(),
)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_search_covers_exactly_the_listed_files(
    tmp_path_factory: pytest.TempPathFactory,
    paths: list[list[str]],
    prefix: str,
    setups: tuple[str, ...],
    datasets: tuple[str, ...],
    hidden: bool,
) -> None:
    """A question folder of files is searched from one listing; a folder in it, a link or
    another name hands the unit to the deep walk: either way the search covers the files
    list_search_files names, with their setups, in its order."""
    root = tmp_path_factory.mktemp("w")
    for parts in paths:
        target = root.joinpath(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_ok(target, "x")
        except OSError:  # a name already used as a file (or folder) on this path
            continue
    first = root.joinpath(*paths[0])
    if first.parent != root and first.parent.is_dir():
        os.symlink(first.parent, first.parent / "link")  # followed by neither walk
        os.symlink(root / "nowhere", first.parent / "run-l.json")
    options = SearchOptions("x", prefix=prefix, setups=setups, datasets=datasets, hidden=hidden)
    listed = list_search_files(root, options)
    for jobs in (1, 2):
        result = search(root, options, jobs=jobs)
        assert result.paths == tuple(f.path for f in listed)
        assert {s: c.total for s, c in result.per_setup.items()} == dict(Counter(f.setup for f in listed))
