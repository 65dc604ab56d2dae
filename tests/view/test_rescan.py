"""A reload shows every change a rescan finds: the overview equals `kag stats --format
json` after a rescan that only finds new ignored entries."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.render.view import overview
from kag.results import result_path, write_result
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree, open_view

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
