"""`kag stats` from the command line: the bundled example, formats, filters, gates, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.results import ErrorResult, OkResult, OkStats, Timing, result_path, write_result

runner = CliRunner()


@pytest.fixture
def example(repo: Path) -> list[str]:
    return [
        "--datasets",
        str(repo / "examples/dataset/datasets.json"),
        "--results",
        str(repo / "examples/results"),
    ]


def stats(*args: str):
    return runner.invoke(app, ["stats", *args])


EXPECTED_TEXT = """\
Datasets: 2 | Scorable questions: 4 | Skipped files: 3 | Ignored files: 3

SETUP                   ACC%    PREC%    COVER%     OK  WRONG   ERR  TOT    GEN(s)     CTX_LEN    RET(s)  VERTICE  RELATION  PROPERTY
qwen35-9b-kag          75.00    75.00    100.00      3      1     0    4     7.812     585.000     0.175    10.50     14.75     30.75
  └ mcq-form          100.00   100.00    100.00      2      0     0    2     7.562     605.500     0.155    10.50     14.50     35.50
  └ pubmedqa           50.00    50.00    100.00      1      1     0    2     8.062     564.500     0.195    10.50     15.00     26.00
smollm2-135m-native    75.00    75.00    100.00      3      1     0    4     1.812     505.750
  └ mcq-form           50.00    50.00    100.00      1      1     0    2     1.562     504.500
  └ pubmedqa          100.00   100.00    100.00      2      0     0    2     2.062     507.000
qwen35-9b-native       25.00    33.33     75.00      1      2     1    4     1.542     497.333
  └ mcq-form           50.00    50.00    100.00      1      1     0    2     1.562     504.500
  └ pubmedqa            0.00     0.00     50.00      0      1     1    2     1.500     483.000

ACC% = correct / scored, PREC% = correct / committed, COVER% = committed / scored
GEN(s)/RET(s) = mean generation/retrieval time per question, in seconds
CTX_LEN = average context length
"""


# Every setup of the bundled example is graded on 4 files: their ranks say little.
EXAMPLE_SMALL = (
    "kag: warning: few graded files: qwen35-9b-kag 4 (ACC 95% CI 30.1–95.4%); "
    "smollm2-135m-native 4 (ACC 95% CI 30.1–95.4%); qwen35-9b-native 4 (ACC 95% CI 4.6–69.9%); "
    "an accuracy from under 30 files is too uncertain to rank on\n"
)


def test_example_text(example: list[str]):
    result = stats(*example)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == EXPECTED_TEXT
    assert result.stderr == EXAMPLE_SMALL


def test_example_json_numbers_by_hand(example: list[str], repo: Path):
    result = stats(*example, "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["datasets"], doc["scorable_questions"], doc["skipped_files"]) == (2, 4, 3)
    assert (doc["unreadable_files"], doc["ignored_files"]) == (0, 3)  # mcq-form/3 is free-form
    setups = {s["setup"]: s for s in doc["setups"]}
    assert [s["setup"] for s in doc["setups"]] == ["qwen35-9b-kag", "smollm2-135m-native", "qwen35-9b-native"]
    kag = setups["qwen35-9b-kag"]["overall"]
    counts = ("correct", "incorrect", "errors", "abstentions", "non_option_answers")
    assert tuple(kag[c] for c in counts) == (
        3, 1, 0, 1, 0,
    )  # fmt: skip
    # generation times of the 4 scored files: 7 s, 8.125 s, 7.5 s, 8.625 s (examples/make_results.py)
    assert kag["total_generation_secs"] == 31.25 and kag["avg_generation_secs"] == 7.8125
    # subgraphs of mcq-form/0, /1, pubmedqa/12377809, /15943725: 12+9+21+0 vertices
    r = kag["retrieval"]
    assert (r["samples"], r["vertices"], r["relationships"], r["properties"]) == (4, 42, 59, 123)
    assert r["avg_vertices"] == 10.5
    # CTX_LEN: mean UTF-8 length of the prompts of the scored files, computed from the files
    prompts = [
        json.loads((repo / "examples/results" / rel / "qwen35-9b-kag.json").read_text())["ok"]["stats"][
            "prompt"
        ]
        for rel in ("mcq-form/0", "mcq-form/1", "pubmedqa/12377809", "pubmedqa/15943725")
    ]
    assert kag["avg_context_length"] == sum(len(p.encode()) for p in prompts) / 4
    native = setups["qwen35-9b-native"]["overall"]
    assert (native["correct"], native["incorrect"], native["errors"], native["non_option_answers"]) == (
        1,
        2,
        1,
        1,
    )
    assert native["precision"] == 1 / 3 and native["coverage"] == 0.75 and native["retrieval"] is None
    assert setups["qwen35-9b-native"]["per_dataset"]["pubmedqa"]["errors"] == 1


def test_example_markdown(example: list[str]):
    result = stats(*example, "--format", "markdown")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[2].startswith("| Setup | ACC% | ACC 95% CI |")
    rows = [line for line in lines if line.startswith("| **")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| **qwen35-9b-kag**", "| **smollm2-135m-native**", "| **qwen35-9b-native**",
    ]  # fmt: skip
    assert "\x1b" not in result.stdout


def test_filters_from_the_command_line(example: list[str]):
    natives = json.loads(stats(*example, "--setup", "*-native", "--format", "json").stdout)
    assert [s["setup"] for s in natives["setups"]] == ["smollm2-135m-native", "qwen35-9b-native"]
    assert natives["skipped_files"] == 2
    two = json.loads(
        stats(*example, "--setup", "qwen35-9b-kag", "--setup", "smollm2-*", "--format", "json").stdout
    )
    assert len(two["setups"]) == 2
    pubmed = json.loads(stats(*example, "--dataset", "pub*", "--format", "json").stdout)
    assert (pubmed["datasets"], pubmed["scorable_questions"], pubmed["skipped_files"]) == (1, 2, 0)
    assert all(list(s["per_dataset"]) == ["pubmedqa"] for s in pubmed["setups"])
    assert next(s["setup"] for s in pubmed["setups"]) == "smollm2-135m-native"  # 2/2 on pubmedqa


def test_fail_under_prints_the_report_then_exits_1_naming_the_setups(example: list[str]):
    result = stats(*example, "--fail-under", "50")
    assert result.exit_code == 1
    assert result.stdout == EXPECTED_TEXT
    assert result.stderr == (
        EXAMPLE_SMALL + "kag: error: --fail-under 50: ACC% below 50 for qwen35-9b-native (25.00%)\n"
    )
    assert stats(*example, "--fail-under", "25").exit_code == 0
    assert stats(*example, "--fail-under", "75.01").stderr.count("(75.00%)") == 2


@pytest.mark.parametrize("value", ["-1", "100.5", "nan"])
def test_fail_under_out_of_range_is_a_usage_error(example: list[str], value: str):
    result = stats(*example, "--fail-under", value)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "between 0 and 100" in result.stderr and "Traceback" not in result.stderr


def test_fail_under_with_nothing_graded_fails(example: list[str], tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = stats(example[0], example[1], "--results", str(empty), "--fail-under", "10")
    assert result.exit_code == 1
    assert "No scorable results were found." in result.stdout
    assert "no setup was graded" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "kag: error: missing option '--datasets' / '-d'"),
        (
            ["-d", "x.json", "--format", "yaml"],
            "kag: error: --format must be one of text, json, markdown, html, junit, csv, jsonl (got 'yaml')",
        ),
        (
            ["-d", "/nonexistent/datasets.json"],
            "kag: error: /nonexistent/datasets.json: datasets file not found",
        ),
    ],
)
def test_usage_errors(args: list[str], message: str):
    result = stats(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert len(result.stderr.splitlines()) == 1


def test_missing_results_directory(example: list[str], tmp_path: Path):
    result = stats(example[0], example[1], "-r", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {tmp_path / 'nope'}: results directory not found\n"


def test_broken_datasets_file_names_each_problem(tmp_path: Path):
    bad = tmp_path / "datasets.json"
    bad.write_text(
        json.dumps(
            {
                "ds": {
                    "1": {"input": "q", "output": {"type": "MCQ", "options": {"a": "x"}, "answer": "z"}},
                    "a/b": {"input": "q"},
                },
                "..": {},
            }
        )
    )
    result = stats("-d", str(bad), "-r", str(tmp_path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"kag: error: {bad}: 3 problem(s) in the datasets file:")
    assert "ds/1: 'output.answer' 'z' is not one of the option keys ['a']" in result.stderr
    assert "ds: question id 'a/b' contains '/'" in result.stderr
    assert "dataset name '..' is '..'" in result.stderr
    assert "Traceback" not in result.stderr
    not_json = tmp_path / "broken.json"
    not_json.write_text("{")
    result = stats("-d", str(not_json), "-r", str(tmp_path))
    assert result.exit_code == 2 and f"{not_json}: not valid JSON" in result.stderr


@pytest.fixture
def small_tree(tmp_path: Path, repo: Path) -> Path:
    root = tmp_path / "results"
    write_result(result_path(root, "mcq-form", "0", "p-", "a"), OkResult("b", OkStats(time=Timing(1, 0))))
    write_result(result_path(root, "mcq-form", "1", "p-", "a"), ErrorResult("boom"))
    (root / "mcq-form" / "1" / "p-b.json").write_bytes(b'{"ok": {"result": "c"')  # truncated
    (root / "mcq-form" / "1" / "p-c.json.tmp").write_bytes(b"{")  # in progress
    (root / "mcq-form" / "0" / "notes.md").write_text("ignored")
    return root


def test_unreadable_files_warn_by_name_and_do_not_stop_the_run(small_tree: Path, repo: Path):
    datasets = str(repo / "examples/dataset/datasets.json")
    result = stats("-d", datasets, "-r", str(small_tree), "--prefix", "p-", "--format", "json")
    assert result.exit_code == 0
    bad = small_tree / "mcq-form" / "1" / "p-b.json"
    assert result.stderr.startswith(f"kag: warning: {bad}: unreadable result file: not valid JSON")
    # .tmp and notes.md are silent without -v; the second line is the small-sample warning
    assert result.stderr.splitlines()[1:] == [
        (
            "kag: warning: few graded files: a 2 (ACC 95% CI 9.5–90.5%); "
            "an accuracy from under 30 files is too uncertain to rank on"
        )
    ]
    doc = json.loads(result.stdout)
    assert (doc["unreadable_files"], doc["ignored_files"]) == (1, 1)
    assert [s["setup"] for s in doc["setups"]] == ["a"]
    assert doc["setups"][0]["overall"]["total"] == 2


def test_verbose_logs_ignored_files_and_each_grade(small_tree: Path, repo: Path):
    datasets = str(repo / "examples/dataset/datasets.json")
    quiet = stats("-d", datasets, "-r", str(small_tree), "--prefix", "p-")
    verbose = stats("-v", "-d", datasets, "-r", str(small_tree), "--prefix", "p-")
    very = runner.invoke(app, ["-v", "stats", "-v", "-d", datasets, "-r", str(small_tree), "--prefix", "p-"])
    assert quiet.stdout == verbose.stdout == very.stdout
    notes = small_tree / "mcq-form" / "0" / "notes.md"
    assert f"kag: info: {notes}: ignored (not a 'p-…json' result file)" in verbose.stderr
    assert "graded as" not in verbose.stderr
    assert "kag: debug: [mcq-form/0] setup 'a' graded as OK" in very.stderr
    assert "p-c.json.tmp: in-progress write (.tmp), not graded" in very.stderr
    assert "notes.md" not in quiet.stderr


def test_stats_never_writes_into_the_tree(small_tree: Path, repo: Path):
    before = sorted((p.relative_to(small_tree), p.stat().st_mtime_ns) for p in small_tree.rglob("*"))
    stats("-d", str(repo / "examples/dataset/datasets.json"), "-r", str(small_tree), "--prefix", "p-")
    after = sorted((p.relative_to(small_tree), p.stat().st_mtime_ns) for p in small_tree.rglob("*"))
    assert before == after


def test_find_still_runs_under_stats_without_datasets(small_tree: Path):
    result = runner.invoke(app, ["stats", "-r", str(small_tree), "--prefix", "p-", "find", "--help"])
    assert result.exit_code == 0
    assert "missing option" not in result.stderr
    help_text = stats("--help").stdout
    assert "find" in help_text and "--fail-under" in help_text and "--dataset" in help_text


def test_help_does_not_import_the_grading_code():
    code = (
        "import sys, kag.cli; "
        "print(sorted(m for m in ('kag.grading.mcq', 'kag.render.stats', 'orjson') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "kag.grading.mcq" not in out and "kag.render.stats" not in out


# ---------------------------------------------------------------- filters that match nothing

EXAMPLE_SETUPS = "qwen35-9b-kag, qwen35-9b-native, smollm2-135m-native"


def test_a_setup_filter_that_matches_nothing_is_a_usage_error(example: list[str]):
    result = stats(*example, "--setup", "nope")
    assert result.exit_code == 2
    assert result.stdout == ""  # no empty report for a step summary to swallow
    assert result.stderr == (
        f"kag: error: --setup nope matches no setup in {example[3]} (setups: {EXAMPLE_SETUPS})\n"
    )


def test_one_unmatched_setup_filter_among_good_ones_still_fails_every_gate(example: list[str]):
    # A typo next to a correct glob must not let --fail-under pass on the others alone.
    result = stats(*example, "--setup", "qwen*", "--setup", "nope", "--setup", "x?", "--fail-under", "10")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"kag: error: --setup nope, --setup x? match no setup in {example[3]} (setups: {EXAMPLE_SETUPS})\n"
    )
    gate = stats(
        *example, "--setup", "qwen35-9b-kag", "--setup", "nope", "--fail-if-worse-than", "qwen35-9b-kag"
    )
    assert gate.exit_code == 2 and gate.stdout == ""
    assert gate.stderr.startswith("kag: error: --setup nope matches no setup in ")
    assert stats(*example, "--setup", "qwen*", "--fail-under", "10").exit_code == 0  # the good glob alone


def test_a_dataset_filter_that_matches_nothing_names_the_datasets_file(example: list[str]):
    result = stats(*example, "--dataset", "nope", "--dataset", "pub*", "--format", "json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"kag: error: --dataset nope matches no dataset in {example[1]} (datasets: mcq-form, pubmedqa)\n"
    )


def test_an_html_report_is_not_written_for_an_unmatched_filter(example: list[str], tmp_path: Path):
    out = tmp_path / "report.html"
    result = stats(*example, "--setup", "nope", "--format", "html", "--output", str(out))
    assert result.exit_code == 2
    assert "--setup nope matches no setup" in result.stderr
    assert not out.exists()


@pytest.fixture
def split_tree(tmp_path: Path) -> Path:
    """Setup `a` only in mcq-form, `b` only in pubmedqa, `free` only on the free-form question."""
    root = tmp_path / "results"
    write_result(result_path(root, "mcq-form", "0", "", "a"), OkResult("b", OkStats()))
    write_result(result_path(root, "pubmedqa", "12377809", "", "b"), OkResult("A", OkStats()))
    write_result(result_path(root, "mcq-form", "3", "", "free"), OkResult("anything", OkStats()))
    return root


def test_setup_filter_is_checked_within_the_dataset_filter(split_tree: Path, repo: Path):
    datasets = str(repo / "examples/dataset/datasets.json")
    result = stats("-d", datasets, "-r", str(split_tree), "--setup", "b", "--dataset", "mcq*")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"kag: error: --setup b matches no setup in {split_tree} with --dataset mcq* (setups: a, free)\n"
    )
    both = stats(
        "-d", datasets, "-r", str(split_tree), "--setup", "b", "--dataset", "pub*", "--format", "json"
    )
    assert both.exit_code == 0 and both.stderr.startswith("kag: warning: few graded files: b 1 ")
    assert [s["setup"] for s in json.loads(both.stdout)["setups"]] == ["b"]


def test_a_setup_in_the_tree_without_graded_files_is_not_a_typo(split_tree: Path, repo: Path):
    # `free` only answered a free-form question: the filter is right, there is just nothing to grade.
    datasets = str(repo / "examples/dataset/datasets.json")
    result = stats("-d", datasets, "-r", str(split_tree), "--setup", "free")
    assert result.exit_code == 0
    assert result.stderr == (
        f"kag: warning: no result file was graded in {split_tree} (1 ignored, 0 unreadable; "
        "kag -v stats lists them)\n"
    )
    assert "No scorable results were found." in result.stdout
    gated = stats("-d", datasets, "-r", str(split_tree), "--setup", "free", "--fail-under", "10")
    assert gated.exit_code == 1  # the existing rule: nothing graded fails the gate
    assert gated.stderr.endswith("\nkag: error: --fail-under 10: no setup was graded\n")


def test_a_long_list_of_setups_is_cut(tmp_path: Path, repo: Path):
    root = tmp_path / "results"
    for i in range(23):
        write_result(result_path(root, "mcq-form", "0", "", f"s{i:02d}"), OkResult("b", OkStats()))
    result = stats("-d", str(repo / "examples/dataset/datasets.json"), "-r", str(root), "--setup", "nope")
    assert result.exit_code == 2
    shown = ", ".join(f"s{i:02d}" for i in range(20))
    assert (
        result.stderr
        == f"kag: error: --setup nope matches no setup in {root} (setups: {shown}, … (3 more))\n"
    )


def _on_terminal(args: list[str], cwd: Path) -> tuple[int, bytes, str]:
    """Run ``python -m kag ARGS`` with stdout on a real pseudo-terminal; (exit code, what the
    terminal received, stderr)."""
    import os
    import pty
    import threading

    master, slave = pty.openpty()
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kag", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
            timeout=300,
            check=False,
        )
    finally:
        os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, bytes(received), proc.stderr.decode()


@pytest.mark.parametrize("command", [["stats"], ["stats", "compare"]])
def test_html_on_a_terminal_asks_for_an_output_file(command: list[str], repo: Path, tmp_path: Path) -> None:
    args = [*command, "-d", "examples/dataset/datasets.json", "-r", "examples/results", "--format", "html"]
    code, seen, stderr = _on_terminal(args, repo)
    assert code == 2, stderr
    assert seen == b""  # no markup on the terminal
    assert "--format html writes a whole HTML page: give -o FILE" in stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    # With -o the page is written, the terminal stays clean.
    code, seen, stderr = _on_terminal([*args, "-o", str(tmp_path / "page.html")], repo)
    assert code == 0, stderr
    assert b"<html" not in seen and (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    # A pipe still gets the page on stdout.
    piped = subprocess.run(
        [sys.executable, "-m", "kag", *args], cwd=repo, capture_output=True, timeout=300, check=False
    )
    assert piped.returncode == 0 and piped.stdout.startswith(b"<!DOCTYPE html>")


# ---------------------------------------------------------------- what a run computes


def test_every_format_has_one_plan_line_with_its_own_renderer() -> None:
    from kag.commands._plans import COMPARE_PLANS, STATS_PLANS
    from kag.commands.stats import FORMATS
    from kag.render.formats import ReportFormat, StatsFormat

    assert set(STATS_PLANS) == set(StatsFormat) and sorted(FORMATS) == sorted(f.value for f in StatsFormat)
    assert len({id(line.draw) for line in STATS_PLANS.values()}) == len(StatsFormat)
    assert set(COMPARE_PLANS) == set(ReportFormat)
    assert [f for f, line in STATS_PLANS.items() if line.page] == [StatsFormat.HTML]
    assert [f for f, line in COMPARE_PLANS.items() if line.page] == [ReportFormat.HTML]


@pytest.mark.parametrize(
    ("fmt", "gate", "priced", "needs"),
    [
        ("text", False, False, {"epochs"}),
        ("json", False, False, {"epochs", "evidence"}),
        ("markdown", False, False, {"evidence"}),
        ("markdown", False, True, {"records", "evidence"}),
        ("html", False, False, {"records", "analysis", "evidence"}),
        ("junit", False, False, {"records", "evidence"}),
        ("csv", False, False, {"records"}),
        ("text", True, False, {"epochs", "records", "analysis"}),
        ("jsonl", True, True, {"records", "analysis"}),
    ],
)
def test_the_plan_is_derived_from_the_options(fmt: str, gate: bool, priced: bool, needs: set[str]) -> None:
    from kag.commands.stats import StatsPlan
    from kag.grading.mcq.request import GradeRequest
    from kag.render.formats import StatsFormat

    plan = StatsPlan.of(StatsFormat(fmt), regression_gate=gate, priced=priced)
    assert plan.needs == needs
    assert plan.analysed == ("analysis" in needs)
    request = plan.grading("p-", ("s*",), ("d*",), "letter", has_evidence=True)
    assert request == GradeRequest(
        "p-", ("s*",), ("d*",), extract="letter", measures=frozenset(needs - {"analysis"})
    )
    # Evidence is measured against the datasets file's evidence names: none listed, none asked.
    bare = plan.grading("", (), (), None, has_evidence=False)
    assert bare.measures == needs - {"analysis", "evidence"} and bare.extract is None
    assert plan.page == (fmt == "html")
