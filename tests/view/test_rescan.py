"""A reload shows every change a rescan finds, and the same tree given under two labels
shows both, as `kag stats` does: the overview, the grid and the API equal `kag stats
--format json` after a rescan that only finds new ignored entries, and on a tree given twice."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.render.view import overview
from kag.results import result_path, write_result
from kag.view.index import Index, Tree
from kag.view.query import View
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree, open_view, serving

runner = CliRunner()


def _stats(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["stats", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def _free_form(datasets: Path) -> None:
    data = json.loads(datasets.read_text())
    data["med"]["free"] = {"input": "Tell me"}
    datasets.write_text(json.dumps(data))


def _folder_for_a_file(tree: Path) -> None:
    path = result_path(tree, "med", "q2", "", "native")
    path.unlink()
    path.mkdir()


CHANGES: dict[str, Callable[[Path], None]] = {
    "a file at the dataset level": lambda tree: (tree / "stray.txt").write_text("x") and None,
    "a file at the question level": lambda tree: (tree / "med" / "stray.txt").write_text("x") and None,
    "a file without the prefix": lambda tree: (tree / "med" / "q1" / "notes.txt").write_text("x") and None,
    "a folder in a question folder": lambda tree: (tree / "med" / "q1" / "sub").mkdir(),
    "a question the datasets file lacks": lambda tree: write_result(
        result_path(tree, "med", "q99", "", "native"), ok_result("A")
    ),
    "a folder where a result file was": _folder_for_a_file,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_reload_that_finds_only_ignored_entries_shows_them(tmp_path: Path, change: str) -> None:
    datasets, tree = make_tree(tmp_path)
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    before = overview(view, None)["stats"]
    assert before == _stats("-d", str(datasets), "-r", str(tree))
    CHANGES[change](tree)
    expected = _stats("-d", str(datasets), "-r", str(tree))
    assert expected != before
    view.reload()
    assert overview(view, None)["stats"] == expected


def test_a_reload_that_finds_a_free_form_question_s_file_shows_it(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    _free_form(datasets)
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    write_result(result_path(tree, "med", "free", "", "kag"), ok_result("words"))
    expected = _stats("-d", str(datasets), "-r", str(tree))
    assert expected["ignored_files"] == overview(view, None)["stats"]["ignored_files"] + 1  # type: ignore[operator]
    view.reload()
    assert overview(view, None)["stats"] == expected


def test_a_reload_that_finds_nothing_keeps_the_snapshot(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    snapshot = view.snapshot
    stats = view.reload()
    assert view.snapshot is snapshot and stats.read == stats.removed == stats.written == 0


def _twice(tmp_path: Path) -> tuple[Path, Path, View]:
    datasets, tree = make_tree(tmp_path)
    trees = [Tree("a", str(tree.resolve())), Tree("b", str(tree.resolve()))]
    index = Index(tmp_path / "index.sqlite", load_datasets(datasets), trees, "", None)
    return datasets, tree, View(index, scan=True)


def test_a_tree_given_under_two_labels_shows_both_as_kag_stats(tmp_path: Path) -> None:
    datasets, tree, view = _twice(tmp_path)
    expected = _stats("-d", str(datasets), "-r", f"a={tree}", "-r", f"b={tree}")
    got = overview(view, None)["stats"]
    assert got == expected
    assert {s["setup"] for s in got["setups"]} == {"a/native", "b/native", "a/kag", "b/kag"}
    # Read back from the index (a second view of it) as well as made while the scan read.
    again = View(Index(tmp_path / "index.sqlite", view.datasets, view.index.trees, "", None), scan=True)
    assert overview(again, None)["stats"] == expected
    # A rescan after a change: both labels follow it.
    write_result(result_path(tree, "med", "q7", "", "native"), ok_result("A"))
    view.reload()
    assert overview(view, None)["stats"] == _stats("-d", str(datasets), "-r", f"a={tree}", "-r", f"b={tree}")


def test_a_tree_given_under_two_labels_fills_both_columns(tmp_path: Path) -> None:
    _, _, view = _twice(tmp_path)
    grid = view.questions({"setup": ["a/kag", "b/kag"]})
    assert grid["total"] == 8
    for row in grid["rows"]:
        a, b = row["cells"]["a/kag"], row["cells"]["b/kag"]
        assert a is not None and a == b
    assert view.questions({"flip": ["a/kag,b/kag"]})["total"] == 0
    assert (
        view.questions({"flip": ["a/native,b/kag"]})["total"]
        == view.questions({"flip": ["a/native,a/kag"]})["total"]
        > 0
    )
    detail = view.question("med", "q1")
    assert detail is not None
    names = [s["setup"] for s in detail["setups"]]
    assert names == ["a/kag", "a/native", "b/kag", "b/native"]
    by = {s["setup"]: s for s in detail["setups"]}
    assert by["a/kag"]["path"] == by["b/kag"]["path"] and by["a/kag"]["response"] == by["b/kag"]["response"]
    assert by["a/native"]["epochs"] == by["b/native"]["epochs"] == [1, 2]
    compared = view.comparisons("a/kag")
    assert compared is not None


def test_the_api_of_a_tree_given_under_two_labels_names_both(tmp_path: Path) -> None:
    import urllib.request

    datasets, tree, view = _twice(tmp_path)
    expected = _stats("-d", str(datasets), "-r", f"a={tree}", "-r", f"b={tree}")
    with serving(view) as url:
        with urllib.request.urlopen(url + "api/setups") as reply:
            setups = orjson.loads(reply.read())
        with urllib.request.urlopen(url + "api/questions?setup=a/native&setup=b/native") as reply:
            grid = orjson.loads(reply.read())
    assert setups["stats"] == expected
    assert grid["total"] == 8 and all(r["cells"]["a/native"] == r["cells"]["b/native"] for r in grid["rows"])


def test_removing_the_tree_s_second_label_drops_only_its_setups(tmp_path: Path) -> None:
    datasets, tree, view = _twice(tmp_path)
    view.index.close()
    index = Index(tmp_path / "index.sqlite", view.datasets, [Tree("a", str(tree.resolve()))], "", None)
    one = View(index, scan=True)
    assert overview(one, None)["stats"] == _stats("-d", str(datasets), "-r", f"a={tree}")
    shutil.rmtree(tree / "med" / "q1")
    one.reload()
    assert overview(one, None)["stats"] == _stats("-d", str(datasets), "-r", f"a={tree}")
