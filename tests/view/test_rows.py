"""kag/view/rows.py: the index's rows are the records the grading walk makes of the same
files (one reader, one set of rules), and no module of the viewer reads a result file's
grading fields itself."""

from __future__ import annotations

import ast
import json
import os
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

from kag.datasets import load_datasets
from kag.grading.mcq.question_files import question_task, unreadable_reason
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.walk import grade_tree
from kag.results import result_path, write_result
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.rows import Part, ScanContext, scan_chunk
from kag.view.walk import iter_top
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree

VIEW = Path(__file__).resolve().parents[2] / "kag" / "view"


def test_the_index_s_records_are_the_grading_walk_s(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    root = str(tree.resolve())
    ds = load_datasets(datasets)
    run = grade_tree(ds, root, GradeRequest(extract="letter", measures={"records"}), workers=1)
    assert run.records
    index = Index(tmp_path / "index.sqlite", ds, [Tree("", root)], "", "letter")
    try:
        scanned = View(index, scan=True)
        key = lambda r: (r.dataset, r.question, r.setup)
        assert sorted(scanned.records(), key=key) == sorted(run.records, key=key)
        # Read back from the rows alone (no scan), the same records again.
        assert View(Index(tmp_path / "index.sqlite", ds, [Tree("", root)], "", "letter")).records() == (
            scanned.records()
        )
    finally:
        index.close()


# What reads a result file's bytes or its grading fields: kag.results' readers, used by the
# grading walk's FileGrader (the viewer hands it kag.results.simd_fields' reader, never calls it).
READERS = frozenset(
    {
        "grading_fields",
        "parse_grading_fields",
        "simd_grading_fields",
        "simd_result_object",
        "read_result_bytes",
        "read_result_stamped",
    }
)


def test_no_module_of_the_viewer_parses_a_result_file() -> None:
    for module in sorted(VIEW.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                assert all(a.name != "simdjson" for a in node.names), module.name
            elif isinstance(node, ast.ImportFrom):
                assert node.module != "simdjson", module.name
                assert not READERS & {a.name for a in node.names}, module.name


def test_an_open_question_without_a_usable_answer_is_left_out_as_kag_stats_leaves_it(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets.json"
    datasets.write_text(
        json.dumps(
            {
                "geo": {
                    "capital": {
                        "input": "Capital of France?",
                        "output": {"type": "Open", "answers": ["Paris"]},
                    },
                    "blank": {"input": "Say nothing", "output": {"type": "Open", "answers": ["the ."]}},
                }
            }
        )
    )
    tree = tmp_path / "results"
    for question in ("capital", "blank"):
        for setup, reply in (("native", "Paris"), ("kag", "Lyon")):
            write_result(result_path(tree, "geo", question, "", setup), ok_result(reply))
    ds = load_datasets(datasets)
    root = str(tree.resolve())
    expected = grade_tree(ds, root, workers=1)
    index = Index(tmp_path / "index.sqlite", ds, [Tree("", root)], "", None)
    try:
        for view in (
            View(index, scan=True),
            View(Index(tmp_path / "index.sqlite", ds, [Tree("", root)], "", None)),
        ):
            run = view.snapshot.run
            assert run.scorable_open_questions == expected.scorable_open_questions == 1
            assert run.ignored_files == expected.ignored_files == 2
            assert run.tallies == expected.tallies
    finally:
        index.close()


def _scanned_part(tmp_path: Path) -> Part:
    """The part a worker makes of every question folder of the test tree, as a first build."""
    datasets, tree = make_tree(tmp_path)
    root = str(tree.resolve())
    ctx = ScanContext(load_datasets(datasets), None, "", str(tmp_path / "index.sqlite"))
    jobs = [(e.path, rel, d, q, None, 0) for rel, d, q, e in iter_top(root) if q]
    return scan_chunk(ctx, (root, True, jobs))


def test_a_part_sent_from_a_worker_holds_the_rows_it_made(tmp_path: Path) -> None:
    part = _scanned_part(tmp_path)
    part.rows.append(
        (*part.rows[0][:7], 2**70, -(2**70), "a lone surrogate \udcff", "\x00", *part.rows[0][12:])
    )
    sent = ForkingPickler.loads(ForkingPickler.dumps(part))
    assert len(part.rows) > 10
    assert sent == part
    assert [[type(v) for v in row] for row in sent.rows] == [[type(v) for v in row] for row in part.rows]


class Text(str):
    """A value marshal cannot write (a subclass of str)."""


def test_a_part_whose_rows_marshal_cannot_write_is_sent_as_it_is(tmp_path: Path) -> None:
    part = _scanned_part(tmp_path)
    part.rows.append((Text("a text of another type"), *part.rows[0][1:]))
    sent = ForkingPickler.loads(ForkingPickler.dumps(part))
    assert sent == part
    assert type(sent.rows[-1][0]) is Text


def test_a_file_opened_in_its_listed_folder_is_graded_as_by_its_path(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    folder = tree / "med" / "q0"
    (folder / "planted.json").symlink_to(folder / "kag.json")
    (folder / "notjson.json").write_bytes(b"{not json")
    ds = load_datasets(datasets)
    ctx = ScanContext(ds, None, "", str(tmp_path / "index.sqlite"))
    grader = ctx.grader(str(tree))
    task = question_task(ds.get("med", "q0"), str(folder), "med", "q0")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in ("kag.json", "native.json", "planted.json", "notjson.json"):
            path = str(folder / name)
            by_path, in_folder = (
                grader.grade(task, path, name[:-5]),
                grader.grade(task, path, name[:-5], (fd, name)),
            )
            assert in_folder.record == by_path.record
            assert (in_folder.stat is None) == (by_path.stat is None)
            if by_path.stat is not None:
                assert in_folder.stat is not None
                assert (in_folder.stat.st_size, in_folder.stat.st_mtime_ns) == (
                    by_path.stat.st_size,
                    by_path.stat.st_mtime_ns,
                )
            if by_path.failure is not None:  # the reason a row keeps
                assert in_folder.failure is not None
                assert unreadable_reason(in_folder.failure) == unreadable_reason(by_path.failure)
            assert (name in ("planted.json", "notjson.json")) == (by_path.record is None)
    finally:
        os.close(fd)
