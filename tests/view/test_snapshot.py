"""The snapshot of the index the pages read: what a grid cell keeps of its file."""

from __future__ import annotations

from pathlib import Path

from kag.datasets import load_datasets
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.snapshot import cell_rel
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
