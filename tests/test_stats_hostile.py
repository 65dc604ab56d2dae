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
from kag.grading.mcq import MAX_RESULT_BYTES
from kag.results import OkResult, OkStats, Timing, result_path, write_result

runner = CliRunner()
GIB = 1 << 30


def ok(path: Path, text: str) -> None:
    write_result(path, OkResult(text, OkStats(prompt="p", time=Timing(1, 0))))


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
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
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
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["setups"][0]["overall"]["correct"] == 1
    found = runner.invoke(app, ["stats", "find", "^b$", "-r", str(root), "-l", "--jobs", "1"])
    assert (found.exit_code, found.stdout) == (0, f"{path}\n")
    assert "warning" not in found.stderr
