"""The snapshot of the index the pages read: what a grid cell keeps of its file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from kag.datasets import load_datasets
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.snapshot import Builder, cell_rel
from tests.view.helpers import make_tree


def test_a_cell_keeps_its_file_s_name_once_for_every_question_and_its_path_is_made_again(
    tmp_path: Path,
) -> None:
    datasets, tree = make_tree(tmp_path)
    index = Index(tmp_path / "index.sqlite", load_datasets(datasets), [Tree("", str(tree))], "", None)
    for scan in (True, False):  # made as the scan reads, and read back from the index
        view = View(index, scan=scan)
        grid = view.snapshot.grid
        stored = {
            (tree_, rel)
            for tree_, rel in index.db.execute("SELECT tree, rel FROM files WHERE epoch=1 AND kind='graded'")
        }
        assert {(c.tree, cell_rel(key, c)) for key, cells in grid.items() for c in cells.values()} == stored
        # One object for the name of a setup's files, however many questions have one.
        names = {id(cells["native"].rel) for cells in grid.values() if "native" in cells}
        assert len(names) == 1
        assert grid[("med", "q1")]["native"].rel == "native.json"
    index.close()


def test_what_a_first_build_does_meanwhile_is_done_once_after_its_first_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets, tree = make_tree(tmp_path)
    loaded = load_datasets(datasets)
    calls: list[int] = []
    parts: list[int] = []  # the calls made when each part's rows came
    real = Builder.add_first

    def add_first(self: Builder, rows: Iterable[tuple[Any, ...]]) -> None:
        parts.append(len(calls))
        real(self, rows)

    monkeypatch.setattr(Builder, "add_first", add_first)
    index = Index(tmp_path / "index.sqlite", loaded, [Tree("", str(tree))], "", None)
    view = View(index, scan=True, meanwhile=lambda: calls.append(len(parts)))
    assert calls == [1]  # after the first part's rows, once
    assert len(parts) > 1 and parts[1:] == [1] * (len(parts) - 1)
    monkeypatch.undo()
    plain = View(Index(tmp_path / "plain.sqlite", loaded, [Tree("", str(tree))], "", None), scan=True)
    assert view.snapshot.grid == plain.snapshot.grid
    assert view.snapshot.run == plain.snapshot.run
    index.close()
