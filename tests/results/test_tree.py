"""kag.results.tree: the setup of a walked entry."""

from __future__ import annotations

import os
from pathlib import Path

from kag.results import tree
from kag.results.tree import result_file_setup


def _entry(folder: Path, name: str) -> os.DirEntry[str]:
    with os.scandir(folder) as it:
        return next(e for e in it if e.name == name)


def test_a_name_read_once_is_still_checked_for_each_entry(tmp_path: Path) -> None:
    for kind in ("file", "link", "folder"):
        (tmp_path / kind).mkdir()
    (tmp_path / "file" / "run-a.json").write_text("{}")
    (tmp_path / "link" / "run-a.json").symlink_to(tmp_path / "file" / "run-a.json")
    (tmp_path / "folder" / "run-a.json").mkdir()
    assert result_file_setup(_entry(tmp_path / "file", "run-a.json"), "run-") == "a"
    assert result_file_setup(_entry(tmp_path / "link", "run-a.json"), "run-") is None
    assert result_file_setup(_entry(tmp_path / "folder", "run-a.json"), "run-") is None
    assert result_file_setup(_entry(tmp_path / "file", "run-a.json"), "") == "run-a"
    assert result_file_setup(_entry(tmp_path / "file", "run-a.json"), "other-") is None


def test_the_names_read_are_kept_to_a_bound(tmp_path: Path) -> None:
    for i in range(tree._NAMES_KEPT + 10):
        (tmp_path / f"s{i}.json").touch()
    with os.scandir(tmp_path) as it:
        setups = {result_file_setup(entry, "") for entry in it}
    assert len(setups) == tree._NAMES_KEPT + 10
    assert len(tree._NAMES) <= tree._NAMES_KEPT
