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


@pytest.mark.parametrize("with_open", [False, True])
def test_the_open_questions_are_counted_and_their_empty_gold_set_aside_as_the_plain_formulas_say(
    tmp_path: Path, with_open: bool
) -> None:
    import json

    from kag.grading.open_grading import usable_open_gold

    datasets, tree = make_tree(tmp_path)
    doc = json.loads(datasets.read_text())
    if with_open:  # an accepted answer that normalizes to nothing, and a question left with none
        doc["med"]["o1"] = {"input": "?", "output": {"type": "Open", "answers": ["the", "Paris"]}}
        doc["med"]["o2"] = {"input": "?", "output": {"type": "Open", "answers": ["a"]}}
        doc["med"]["o3"] = {"input": "?", "output": {"type": "Open", "answers": ["Rome"]}}
        datasets.write_text(json.dumps(doc))
    for texts in (False, True):
        loaded = load_datasets(datasets, texts=texts)
        index = Index(tmp_path / f"index-{texts}.sqlite", loaded, [Tree("", str(tree))], "", None)
        assert index.graded == usable_open_gold(loaded)[0]
        run = View(index, scan=True).snapshot.run
        opened = sum(1 for q in index.graded.iter_questions() if q.open is not None)
        assert run.scorable_open_questions == (opened if opened else None)
        assert opened == (2 if with_open else 0)
        index.close()


@pytest.mark.parametrize("labels", [[""], ["base"], ["a", "b"]])
def test_the_cells_of_a_first_build_s_graded_rows_are_those_the_plain_loop_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labels: list[str]
) -> None:
    import json

    datasets, tree = make_tree(tmp_path)
    doc = json.loads(datasets.read_text())
    del doc["med"]["q0"]["evidence"]  # a grid cell is then all a graded row gives
    datasets.write_text(json.dumps(doc))
    index = Index(
        tmp_path / "index.sqlite",
        load_datasets(datasets),
        [Tree(label, str(tree)) for label in labels],
        "",
        None,
    )
    rows: list[tuple[Any, ...]] = []
    index.scan(rows.extend)
    graded = [row for row in rows if row[6] == "graded" and row[5] == 1]
    # Files kept by their whole path: in a folder of the question's, and a name that is
    # not its folder's (escaped bytes), as a cell of the question all the same.
    below, escaped = list(graded[0]), list(graded[1])
    below[1], below[4] = f"{below[2]}/{below[3]}/sub/x.json", "x"
    escaped[1], escaped[4] = f"{escaped[2]}/{escaped[3]}\\xff/y.json", "y"
    # Graded parts (one question's rows split between two), then a part of every kind of
    # row and the later epochs (the plain loop from there on).
    # The same question in another dataset, right after it.
    last = graded[-1][3]
    twin = [
        (row[0], f"other/{row[1].split('/', 1)[1]}", "other", *row[3:]) for row in graded if row[3] == last
    ]
    parts = [graded[:5], [*graded[5:], *twin, tuple(below), tuple(escaped)], rows]
    fast_calls: list[int] = []
    add_graded = Builder._add_graded

    def counted(self: Builder, rows: list[tuple[Any, ...]]) -> None:
        fast_calls.append(len(rows))
        add_graded(self, rows)

    monkeypatch.setattr(Builder, "_add_graded", counted)
    fast, plain = Builder(index, False), Builder(index, False)
    plain._plain = False
    for part in parts:
        fast.add_part(list(part))
        plain.add_part(list(part))
    assert fast_calls == ([] if len(labels) > 1 else [5, len(graded) - 5 + len(twin) + 2])
    assert ("other", last) in fast.grid
    assert fast.grid == plain.grid
    assert (fast.epochs, fast.later, fast.firsts) == (plain.epochs, plain.later, plain.firsts)
    assert (fast.skipped, fast.ignored, fast.unreadable) == (plain.skipped, plain.ignored, plain.unreadable)
    assert fast.run() == plain.run()
    assert {cell_rel(key, cell) for key, cells in fast.grid.items() for cell in cells.values()} >= {
        below[1],
        escaped[1],
    }
    # One object for the name of a setup's files, however many questions have one.
    names = {
        id(cell.rel) for cells in fast.grid.values() for cell in cells.values() if cell.rel == "native.json"
    }
    assert len(names) == 1
    index.close()
