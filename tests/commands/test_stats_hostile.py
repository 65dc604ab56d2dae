"""`kag stats` and `kag stats find` on hostile result trees: huge files, names that are not
UTF-8, control characters in names and responses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.results import result_path
from kag.results.io import MAX_RESULT_BYTES
from tests.conftest import REPO
from tests.conftest import write_ok as ok

runner = CliRunner()
GIB = 1 << 30


# ---------------------------------------------------------------- a result file past the size cap


@pytest.fixture
def huge_tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    ok(root / "mcq-form" / "0" / "a.json", "b")
    huge = root / "mcq-form" / "0" / "b.json"
    with huge.open("wb") as f:  # sparse: no disk used
        f.truncate(GIB)
    return root


def _peak_rss_mb(args: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``python -m kag ARGS`` from a fresh interpreter that reports the peak RSS of its child."""
    code = (
        "import resource, subprocess, sys, json; "
        "p = subprocess.run([sys.executable, '-m', 'kag', *sys.argv[1:]], capture_output=True, text=True); "
        "print(json.dumps([p.returncode, p.stdout, p.stderr, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    rc, out, err, peak = json.loads(done.stdout)
    return subprocess.CompletedProcess(args, rc, out, err), peak


def test_stats_refuses_a_file_past_the_cap_from_its_size_alone(huge_tree: Path, repo: Path) -> None:
    datasets = str(repo / "examples/dataset/datasets.json")
    result, peak = _peak_rss_mb(["stats", "-d", datasets, "-r", str(huge_tree), "--format", "json"])
    assert result.returncode == 0, result.stderr
    huge = huge_tree / "mcq-form" / "0" / "b.json"
    assert result.stderr == (
        f"kag: warning: {huge}: unreadable result file: 1,073,741,824 bytes, "
        "over the 64 MiB size cap for a result file\n"
        "kag: warning: few graded files: a 1 (ACC 95% CI 20.7–100.0%); "
        "an accuracy from under 30 files is too uncertain to rank on\n"
    )
    doc = json.loads(result.stdout)
    assert doc["unreadable_files"] == 1
    assert [s["setup"] for s in doc["setups"]] == ["a"]
    assert peak < 400, f"peak RSS {peak:.0f} MB: the file was read"


def test_find_refuses_a_file_past_the_cap_from_its_size_alone(huge_tree: Path) -> None:
    result, peak = _peak_rss_mb(
        ["stats", "find", "b", "-r", str(huge_tree), "--format", "json", "--jobs", "1"]
    )
    assert result.returncode == 0, result.stderr
    huge = huge_tree / "mcq-form" / "0" / "b.json"
    assert result.stderr == (
        f"kag: warning: {huge}: unreadable result file, skipped: 1,073,741,824 bytes, "
        "over the 64 MiB size cap for a result file\n"
    )
    doc = json.loads(result.stdout)
    assert (doc["unreadable_files"], doc["total"], doc["matches"]) == (1, 2, 1)
    assert peak < 400, f"peak RSS {peak:.0f} MB: the file was read"


def test_a_file_at_the_cap_is_still_read(tmp_path: Path, repo: Path) -> None:
    # Exactly MAX_RESULT_BYTES of valid JSON (a response padded with spaces) is graded.
    root = tmp_path / "results"
    path = result_path(root, "mcq-form", "0", "", "a")
    path.parent.mkdir(parents=True)
    head = b'{"ok": {"result": "b"}}'
    path.write_bytes(head + b" " * (MAX_RESULT_BYTES - len(head)))
    datasets = str(repo / "examples/dataset/datasets.json")
    result = runner.invoke(app, ["stats", "-d", datasets, "-r", str(root), "--format", "json"])
    assert result.exit_code == 0 and "unreadable" not in result.stderr
    assert json.loads(result.stdout)["setups"][0]["overall"]["correct"] == 1
    found = runner.invoke(app, ["stats", "find", "^b$", "-r", str(root), "-l", "--jobs", "1"])
    assert (found.exit_code, found.stdout) == (0, f"{path}\n")
    assert "warning" not in found.stderr


# ---------------------------------------------------------------- paths that are not UTF-8


@pytest.fixture
def undecodable_tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    ok(root / "mcq-form" / "0" / "a.json", "b")
    bad_folder = os.fsdecode(os.fsencode(root) + b"/bad\xffset")
    ok(Path(bad_folder) / "0" / "a.json", "b")
    ok(Path(bad_folder) / "1" / "a.json", "b")
    ok(Path(os.fsdecode(os.fsencode(root) + b"/mcq-form/0/b\xfe.json")), "b")
    return root


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_find_json_skips_paths_that_are_not_utf8_with_one_warning_each(
    undecodable_tree: Path, jobs: str
) -> None:
    result = runner.invoke(
        app, ["stats", "find", "b", "-r", str(undecodable_tree), "--format", "json", "--jobs", jobs]
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    good = str(undecodable_tree / "mcq-form" / "0" / "a.json")
    assert (doc["matches"], doc["total"], doc["paths"]) == (1, 1, [good])
    assert result.stderr.splitlines() == [
        f"kag: warning: {undecodable_tree}/bad\\xffset: skipped: its name is not valid UTF-8",
        f"kag: warning: {undecodable_tree}/mcq-form/0/b\\xfe.json: skipped: its name is not valid UTF-8",
    ]


def test_find_jsonl_and_text_skip_paths_that_are_not_utf8(undecodable_tree: Path) -> None:
    jsonl = runner.invoke(app, ["stats", "find", "b", "-r", str(undecodable_tree), "--format", "jsonl"])
    assert jsonl.exit_code == 0, jsonl.stderr
    assert [json.loads(line)["path"] for line in jsonl.stdout.splitlines()] == [
        str(undecodable_tree / "mcq-form" / "0" / "a.json")
    ]
    text = runner.invoke(app, ["stats", "find", "b", "-r", str(undecodable_tree)])
    assert (text.exit_code, text.stdout) == (0, "mcq-form/0/a.json:0: [b]\n")
    assert "\\xff" in text.stderr and "1 file(s) matched out of 1." in text.stderr


# ---------------------------------------------------------------- control characters

EVIL_SETUP = "ev\x1b]0;pwned\x07il"  # sets the terminal's title
EVIL_DATASET = "d\x1b[2Jx"  # clears the screen
EVIL_QUESTION = "q\x9b1"  # a C1 control
EVIL_RESPONSE = "b\x1b[31m red"


@pytest.fixture
def evil(tmp_path: Path) -> tuple[Path, Path]:
    mcq = {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "b"}
    datasets = tmp_path / "datasets.json"
    datasets.write_text(json.dumps({EVIL_DATASET: {EVIL_QUESTION: {"input": "?", "output": mcq}}}))
    root = tmp_path / "results"
    ok(result_path(root, EVIL_DATASET, EVIL_QUESTION, "", EVIL_SETUP), EVIL_RESPONSE)
    ok(result_path(root, EVIL_DATASET, EVIL_QUESTION, "", "plain"), "b")
    (root / EVIL_DATASET / EVIL_QUESTION / "bro\x1bken.json").write_bytes(b"{")
    return datasets, root


def _no_controls(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\x9b"), repr(text)


def test_stats_text_and_markdown_escape_names_and_json_keeps_them(evil: tuple[Path, Path]) -> None:
    datasets, root = evil
    base = ["stats", "-d", str(datasets), "-r", str(root)]
    text = runner.invoke(app, base)
    assert text.exit_code == 0, text.stderr
    _no_controls(text.stdout + text.stderr)
    lines = text.stdout.splitlines()
    escaped = "ev\\x1b]0;pwned\\x07il"
    # plain (right) ranks first; names are padded to the escaped setup's width
    assert lines[3].startswith("plain" + " " * (len(escaped) - 5) + "  ")
    assert lines[5].startswith(f"{escaped}  ")
    assert lines[6].startswith("  └ d\\x1b[2Jx" + " " * (len(escaped) - 4 - 11) + "  ")
    assert text.stderr.startswith(f"kag: warning: {root}/d\\x1b[2Jx/q\\x9b1/bro\\x1bken.json: unreadable")
    markdown = runner.invoke(app, [*base, "--format", "markdown"])
    _no_controls(markdown.stdout)
    assert "| **ev\\\\x1b]0;pwned\\\\x07il** |" in markdown.stdout
    doc = json.loads(runner.invoke(app, [*base, "--format", "json"]).stdout)
    assert {s["setup"] for s in doc["setups"]} == {EVIL_SETUP, "plain"}
    assert list(doc["setups"][0]["per_dataset"]) == [EVIL_DATASET]


def test_find_text_escapes_and_machine_outputs_keep_exact_paths(evil: tuple[Path, Path]) -> None:
    _, root = evil
    hit = root / EVIL_DATASET / EVIL_QUESTION / f"{EVIL_SETUP}.json"
    text = runner.invoke(app, ["stats", "find", "red", "-r", str(root), "-C", "6"])
    assert text.exit_code == 0
    assert text.stdout == "d\\x1b[2Jx/q\\x9b1/ev\\x1b]0;pwned\\x07il.json:7: …\\x1b[31m [red]\n"
    _no_controls(text.stdout + text.stderr)
    counts = runner.invoke(app, ["stats", "find", "red", "-r", str(root), "-c"])
    assert counts.stdout.splitlines() == ["bro\\x1bken:0", "ev\\x1b]0;pwned\\x07il:1", "plain:0"]
    listed = runner.invoke(app, ["stats", "find", "red", "-r", str(root), "-l"])
    assert listed.stdout == f"{hit}\n"
    jsonl = runner.invoke(app, ["stats", "find", "red", "-r", str(root), "--format", "jsonl"])
    record = json.loads(jsonl.stdout)
    assert (record["path"], record["setup"], record["context"]) == (str(hit), EVIL_SETUP, EVIL_RESPONSE)


def test_find_null_separates_exact_paths_for_xargs(evil: tuple[Path, Path]) -> None:
    _, root = evil
    newline = root / "d" / "0" / "new\nline.json"
    ok(newline, "b")
    done = subprocess.run(
        [sys.executable, "-m", "kag", "stats", "find", "^b", "-r", str(root), "-0"],
        check=False,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    paths = done.stdout.split(b"\0")
    assert paths[-1] == b""
    expected = [
        newline,
        root / EVIL_DATASET / EVIL_QUESTION / f"{EVIL_SETUP}.json",
        root / EVIL_DATASET / EVIL_QUESTION / "plain.json",
    ]
    assert [os.fsdecode(p) for p in paths[:-1]] == sorted(str(p) for p in expected)
    cat = subprocess.run(["xargs", "-0", "cat"], input=done.stdout, check=True, capture_output=True)
    assert cat.stdout.count(b'"ok"') == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "json"], "--null prints paths"),
        (["-c"], "--null prints paths"),
    ],
)
def test_find_null_with_other_outputs_is_a_usage_error(
    evil: tuple[Path, Path], args: list[str], message: str
) -> None:
    _, root = evil
    result = runner.invoke(app, ["stats", "find", "b", "-r", str(root), "-0", *args])
    assert result.exit_code == 2 and message in result.stderr


def test_flips_and_compare_text_escape_names_and_responses(evil: tuple[Path, Path]) -> None:
    datasets, root = evil
    base = ["-d", str(datasets), "-r", str(root)]
    flips = runner.invoke(app, ["stats", "flips", "plain", EVIL_SETUP, *base])
    assert flips.exit_code == 0, flips.stderr
    _no_controls(flips.stdout + flips.stderr)
    assert "B = ev\\x1b]0;pwned\\x07il" in flips.stdout.splitlines()
    assert "d\\x1b[2Jx  q\\x9b1    b     OK  b           WRONG  b\\x1b[31m red" in flips.stdout.splitlines()
    assert "only ev\\x1b]0;pwned\\x07il" in flips.stderr
    markdown = runner.invoke(app, ["stats", "flips", "plain", EVIL_SETUP, *base, "--format", "markdown"])
    _no_controls(markdown.stdout)
    assert "| b\\\\x1b[31m red |" in markdown.stdout
    as_json = runner.invoke(app, ["stats", "flips", "plain", EVIL_SETUP, *base, "--format", "json"])
    doc = json.loads(as_json.stdout)
    flip = doc["a_only"][0]
    assert (doc["b"], flip["dataset"], flip["question"]) == (EVIL_SETUP, EVIL_DATASET, EVIL_QUESTION)
    assert flip["b"]["response"] == EVIL_RESPONSE
    compare = runner.invoke(app, ["stats", "compare", *base, "--baseline", "plain"])
    assert compare.exit_code == 0, compare.stderr
    _no_controls(compare.stdout + compare.stderr)
    assert "ev\\x1b]0;pwned\\x07il" in compare.stdout


def test_triplets_text_escapes_relations_from_model_output(tmp_path: Path, repo: Path) -> None:
    gold = repo / "examples" / "triplets" / "gold.jsonl"
    first = json.loads(gold.read_text().splitlines()[0])
    evil = dict(first["triplets"][0], relation="created\x1b]0;pwned\x07by")
    predictions = tmp_path / "pred\x1b[2J.jsonl"
    predictions.write_text(json.dumps({"id": first["id"], "triplets": [evil]}) + "\n")
    result = runner.invoke(app, ["triplets", str(gold), str(predictions)])
    assert result.exit_code == 0, result.stderr
    _no_controls(result.stdout)
    assert "created\\x1b]0;pwned\\x07by" in result.stdout
    assert "pred\\x1b[2J.jsonl" in result.stdout
