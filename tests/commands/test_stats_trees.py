"""Several result trees in one report: `-r LABEL=DIR` on `kag stats`, `compare`, `flips`, `impact`.

The trees (``two_trees``), worked out by hand; dataset d1 has questions 0..9 (answer "A")
and an MCQ without answer ("noans"):

- A (run1): s right on 0-7, "B" on 8-9 -> 8/10; t an error on 0, right on 1-9 -> 9/10;
  s also answers "noans" (a skipped file); an unrelated ``notes.txt`` (ignored).
- B (run2): s right on 0-3 and 8-9, "B" on 4-7 -> 6/10; t " a\\n" on 0-8 (right: trimmed,
  ASCII case), no file for 9 -> 9/9; an unreadable ``broken.json`` in d1/3 and a
  ``notes.txt`` (ignored).

run2/s against run1/s, 10 paired: + = 2 (8, 9), - = 4 (4-7); exact McNemar
p = 2 * (C(6,0) + C(6,1) + C(6,2)) / 2^6 = 44/64 = 0.6875.
Summed over the trees: skipped 1, ignored 2, unreadable 1; the datasets file counts once
(1 dataset, 10 scorable questions).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.trees import ResultTree, grade_trees, label_problem
from kag.grading.mcq.walk import grade_tree
from kag.results import ErrorResult, OkResult, result_path, write_result
from tests.commands.test_compare_cli import build_tree
from tests.conftest import REPO

runner = CliRunner()


def _put(root: Path, q: int | str, setup: str, result: OkResult | ErrorResult) -> None:
    write_result(result_path(root, "d1", str(q), "", setup), result)


@pytest.fixture
def two_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The trees of the module docstring under tmp_path (also the working directory)."""
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    data: dict = {"d1": {str(q): {"input": f"q{q}?", "output": mcq} for q in range(10)}}
    data["d1"]["noans"] = {"input": "?", "output": {"type": "MCQ", "options": {"A": "1", "B": "2"}}}
    (tmp_path / "datasets.json").write_bytes(orjson.dumps(data))
    a, b = tmp_path / "A", tmp_path / "B"
    for q in range(10):
        _put(a, q, "s", OkResult("A" if q < 8 else "B"))
        _put(b, q, "s", OkResult("A" if q < 4 or q >= 8 else "B"))
        _put(a, q, "t", ErrorResult("timeout") if q == 0 else OkResult("A"))
        if q != 9:
            _put(b, q, "t", OkResult(" a\n"))
    _put(a, "noans", "s", OkResult("A"))
    (b / "d1" / "3" / "broken.json").write_text("{not json")
    for tree in (a, b):
        (tree / "d1" / "3" / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    return tmp_path


TREES = ["-d", "datasets.json", "-r", "run1=A", "-r", "run2=B"]


def stats(*args: str):  # -> click Result
    return runner.invoke(app, ["stats", *args])


def _rows(stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in stdout.splitlines() if line.startswith("run")}


# ---------------------------------------------------------------- kag stats


def test_stats_text_reports_each_tree_setup_as_label_slash_setup(two_trees: Path) -> None:
    result = stats(*TREES)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(
        "Datasets: 1 | Scorable questions: 10 | Skipped files: 1 | Ignored files: 2 | Unreadable files: 1\n"
    )
    rows = _rows(result.stdout)
    # ACC% PREC% COVER% OK WRONG ERR TOT, ranked by accuracy
    assert list(rows) == ["run2/t", "run1/t", "run1/s", "run2/s"]
    assert rows["run1/s"][:7] == ["80.00", "80.00", "100.00", "8", "2", "0", "10"]
    assert rows["run2/s"][:7] == ["60.00", "60.00", "100.00", "6", "4", "0", "10"]
    assert rows["run1/t"][:7] == ["90.00", "100.00", "90.00", "9", "0", "1", "10"]
    assert rows["run2/t"][:7] == ["100.00", "100.00", "100.00", "9", "0", "0", "9"]
    # the warning names the real file, in its tree
    assert f"{os.path.join('B', 'd1', '3', 'broken.json')}: unreadable result file" in result.stderr


def test_stats_json_counts_files_over_the_trees_and_the_datasets_once(two_trees: Path) -> None:
    result = stats(*TREES, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert (doc["datasets"], doc["scorable_questions"]) == (1, 10)
    assert (doc["skipped_files"], doc["ignored_files"], doc["unreadable_files"]) == (1, 2, 1)
    by = {s["setup"]: s["overall"] for s in doc["setups"]}
    assert {k: (v["correct"], v["incorrect"], v["errors"]) for k, v in by.items()} == {
        "run1/s": (8, 2, 0),
        "run1/t": (9, 0, 1),
        "run2/s": (6, 4, 0),
        "run2/t": (9, 0, 0),
    }


def test_setup_globs_match_the_labelled_name(two_trees: Path) -> None:
    result = stats(*TREES, "--setup", "run2/*", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [s["setup"] for s in orjson.loads(result.stdout)["setups"]] == ["run2/t", "run2/s"]
    bare = stats(*TREES, "--setup", "s")  # the unlabelled name selects nothing
    assert bare.exit_code == 2 and bare.stdout == ""
    assert bare.stderr.startswith("kag: error: --setup s matches no setup in run1=A, run2=B (setups: run1/s,")


def test_one_labelled_tree_gives_the_single_tree_numbers_under_its_label(two_trees: Path) -> None:
    single = orjson.loads(stats("-d", "datasets.json", "-r", "A", "--format", "json").stdout)
    labelled = orjson.loads(stats("-d", "datasets.json", "-r", "x=A", "--format", "json").stdout)
    for block in single["setups"]:
        block["setup"] = "x/" + block["setup"]
    assert labelled == single


def test_a_single_bare_results_dir_keeps_unlabelled_setups(two_trees: Path) -> None:
    result = stats("-d", "datasets.json", "-r", "A", "--format", "json")
    assert [s["setup"] for s in orjson.loads(result.stdout)["setups"]] == ["t", "s"]


def test_an_existing_directory_with_an_equals_sign_is_a_bare_tree(two_trees: Path) -> None:
    (two_trees / "A").rename(two_trees / "run=1")
    result = stats("-d", "datasets.json", "-r", "run=1", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [s["setup"] for s in orjson.loads(result.stdout)["setups"]] == ["t", "s"]
    labelled = stats("-d", "datasets.json", "-r", "x=run=1", "--format", "json")  # first '=' only
    assert [s["setup"] for s in orjson.loads(labelled.stdout)["setups"]] == ["x/t", "x/s"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-r", "A", "-r", "run2=B"], "-r A: a bare DIR cannot go with LABEL=DIR trees; label every tree"),
        (["-r", "A", "-r", "B"], "-r given 2 times without labels: name each tree, -r LABEL=DIR"),
        (["-r", "run1=A", "-r", "run1=B"], "-r run1=B: the label 'run1' is given twice"),
        (["-r", "=B"], "-r =B: not a directory, nor LABEL=DIR: the label is empty"),
        (["-r", "a/b=B"], "-r a/b=B: not a directory, nor LABEL=DIR: a label cannot contain '/'"),
        (["-r", "a*=B"], "-r a*=B: not a directory, nor LABEL=DIR: a label cannot contain whitespace"),
        (["-r", "run1="], "-r run1=: no directory after '='"),
        (["-r", "run1=A", "-r", "run2=nope"], "nope: results directory not found"),
    ],
)
def test_bad_tree_options_are_usage_errors(two_trees: Path, args: list[str], message: str) -> None:
    for command in ([], ["compare"], ["flips", "run1/s", "run2/s"], ["impact"]):
        result = stats(*command, "-d", "datasets.json", *args)
        assert result.exit_code == 2, (command, result.stdout)
        assert result.stdout == ""
        assert result.stderr.startswith(f"kag: error: {message}"), result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_find_and_judge_read_one_tree(two_trees: Path) -> None:
    find = stats("-r", "run1=A", "find", "A")
    assert find.exit_code == 2
    assert find.stderr == (
        "kag: error: kag stats find reads one result tree: give -r DIR, not LABEL=DIR (-r A, not -r run1=A)\n"
    )
    judge = stats("-r", "a=A", "-r", "b=B", "judge", "-d", "datasets.json", "-p", "x", "-m", "y")
    assert judge.exit_code == 2
    assert judge.stderr == (
        "kag: error: kag stats judge reads one result tree: give one -r DIR, not LABEL=DIR (got -r a=A -r b=B)\n"
    )


def test_html_report_names_the_trees_and_labelled_setups(two_trees: Path) -> None:
    result = stats(*TREES, "--format", "html", "-o", "report.html")
    assert result.exit_code == 0, result.stderr
    page = (two_trees / "report.html").read_text()
    assert "run1=A, run2=B" in page
    assert all(name in page for name in ("run1/s", "run1/t", "run2/s", "run2/t"))


def test_fail_if_worse_than_takes_a_labelled_setup(two_trees: Path) -> None:
    result = stats(*TREES, "--fail-if-worse-than", "run1/s", "--format", "json")
    assert result.exit_code == 0, result.stderr  # 2 vs 4 discordant: nothing significant
    unknown = stats(*TREES, "--fail-if-worse-than", "s")
    assert unknown.exit_code == 2
    assert "--fail-if-worse-than s: no graded setup has that name" in unknown.stderr


# ---------------------------------------------------------------- compare, flips, impact


def test_compare_pairs_the_same_setup_of_two_runs_by_question(two_trees: Path) -> None:
    result = stats("compare", *TREES, "--baseline", "run1/s", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert doc["baseline"] == "run1/s"
    by = {c["setup"]: c for c in doc["comparisons"]}
    assert sorted(by) == ["run1/t", "run2/s", "run2/t"]
    s = by["run2/s"]
    assert s["paired_questions"] == 10
    assert (s["setup_correct"], s["baseline_correct"], s["setup_only"], s["baseline_only"]) == (6, 8, 2, 4)
    assert s["mcnemar"]["method"] == "exact"
    assert s["mcnemar"]["p_value"] == pytest.approx(44 / 64)
    assert by["run2/t"]["paired_questions"] == 9  # run2/t has no file for question 9


def test_compare_options_before_the_sub_command(two_trees: Path) -> None:
    before = stats(*TREES, "compare", "--baseline", "run1/s")
    after = stats("compare", *TREES, "--baseline", "run1/s")
    assert before.exit_code == after.exit_code == 0
    assert before.stdout == after.stdout
    assert "run2/s" in after.stdout


def test_compare_names_the_labelled_setups_for_an_unknown_baseline(two_trees: Path) -> None:
    result = stats("compare", *TREES, "--baseline", "s")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "kag: error: setup 's': no such setup; setups in run1=A, run2=B: "
        "run1/s, run1/t, run2/broken, run2/s, run2/t"
    )


def test_flips_lists_the_questions_that_flipped_between_runs(two_trees: Path) -> None:
    result = stats("flips", "run1/s", "run2/s", *TREES, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert [f["question"] for f in doc["a_only"]] == ["4", "5", "6", "7"]
    assert [f["question"] for f in doc["b_only"]] == ["8", "9"]
    assert (doc["a"], doc["b"], doc["paired_questions"], doc["both_correct"]) == ("run1/s", "run2/s", 10, 4)
    assert "4 question(s) only run1/s got right, 2 only run2/s, out of 10 paired." in result.stderr


def test_flips_paths_point_into_each_tree(two_trees: Path) -> None:
    from kag.grading.compare.trees import load_source_answers

    trees = (ResultTree("run1", "A"), ResultTree("run2", "B"))
    answers = load_source_answers(load_datasets("datasets.json"), trees)
    by = {(a.setup, a.question): a for a in answers.answers}
    assert by[("run1/s", "4")].path == os.path.join("A", "d1", "4", "s.json")
    assert by[("run2/s", "4")].path == os.path.join("B", "d1", "4", "s.json")
    assert by[("run2/s", "4")].response == "B"
    assert answers.setups == ["run1/s", "run1/t", "run2/s", "run2/t"]


def test_impact_pairs_a_kag_setup_with_a_native_setup_of_another_run(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    datasets, first = build_tree(tmp_path / "one")
    _, second = build_tree(tmp_path / "two", names=("native",))
    args = ["-d", str(datasets), "-r", f"r1={first}", "-r", f"r2={second}", "--prefix", "pre-"]
    result = stats("impact", "r1/kag", *args, "--native", "r2/native", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    (impact,) = doc["impacts"]
    assert impact["setup"] == "r1/kag" and impact["native"] == "r2/native"
    # kag vs native of test_compare_cli's tree: helped d1 20,21 and d2 5-9 (7), hurt d1 5-19 (15)
    assert (impact["overall"]["helped"], impact["overall"]["hurt"]) == (7, 15)


# ---------------------------------------------------------------- the documented example

DOC = REPO / "docs" / "stats.md"


def test_the_documented_example_prints_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's console block: `qwen` run on Monday and again on Tuesday (right on 0-7, then
    on 0-3 and 8-9), `qwen-kag` on Monday only (right on 0-8)."""
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    data = {"pubmedqa": {str(q): {"input": f"q{q}?", "output": mcq} for q in range(10)}}
    (tmp_path / "datasets.json").write_bytes(orjson.dumps(data))
    for q in range(10):
        for day, right in (("monday", q < 8), ("tuesday", q < 4 or q >= 8)):
            path = result_path(tmp_path / "runs" / day, "pubmedqa", str(q), "", "qwen")
            write_result(path, OkResult("A" if right else "B"))
        path = result_path(tmp_path / "runs" / "monday", "pubmedqa", str(q), "", "qwen-kag")
        write_result(path, OkResult("A" if q < 9 else "B"))
    monkeypatch.chdir(tmp_path)
    block = DOC.read_text().split("```console\n$ kag stats -d datasets.json -r mon=", 1)[1].split("```", 1)[0]
    block = "$ kag stats -d datasets.json -r mon=" + block
    commands = block.split("$ kag ")[1:]
    assert len(commands) == 2
    for command in commands:
        line, _, expected = command.partition("\n")
        result = runner.invoke(app, shlex.split(line))
        assert result.exit_code == 0, result.stderr
        assert result.stdout == expected, result.stdout


# ---------------------------------------------------------------- the library


def test_grade_trees_relabels_and_sums(two_trees: Path) -> None:
    datasets = load_datasets("datasets.json")
    run = grade_trees(
        datasets,
        [ResultTree("run1", "A"), ResultTree("run2", "B")],
        GradeRequest(setups=["*/s"], measures={"records"}),
    )
    assert sorted(run.tallies) == [("run1/s", "d1"), ("run2/s", "d1")]
    assert run.tallies[("run1/s", "d1")].correct == 8
    assert (run.skipped_files, run.ignored_files, run.unreadable_files) == (1, 2, 0)  # broken: not */s
    assert run.records is not None and len(run.records) == 20
    assert [r.setup for r in run.records[:2]] == ["run1/s", "run2/s"]  # question 0 of each
    one = grade_tree(datasets, "A", GradeRequest(setups=["s"], measures={"records"}))
    assert run.tallies[("run1/s", "d1")] == one.tallies[("s", "d1")]


@pytest.mark.parametrize(
    ("label", "ok"), [("run1", True), ("r-1.b_2+x@y:z", True), ("", False), ("a/b", False), ("a b", False)]
)
def test_label_problem(label: str, ok: bool) -> None:
    assert (label_problem(label) is None) is ok
