"""benchmarks/bench_scale.py runs end to end on its small tree and reports every figure
(the figures themselves are timings: never asserted here)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_scale.py"


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is the find anchor")
def test_the_quick_run_reports_each_command_against_its_anchor(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    args = ["--quick", "--dir", str(tmp_path / "trees"), "--repeat", "1", "--requests", "2"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "trees" / "tree-quick" / ".complete").exists()
    assert not (tmp_path / "trees" / "tree-quick.lock").exists()
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("bench_scale: ") and "load average" in lines[0]
    assert lines[1].startswith("== quick: 200 files, ")
    labels = [line.split("  ")[0] for line in lines[2:-1]]
    assert labels == [
        "stats",
        "find literal",
        "find alternation",
        "stats RSS",
        "view build",
        "view overview",
        "view p95",
        "view server RSS",
        "view index",
    ]
    for line in lines[2:5]:
        assert " ratio " in line and "(target <= " in line
    assert lines[-1].startswith("load average now ")
    doc = json.loads(report.read_text())["quick"]
    assert doc["tree"]["files"] == 200 and doc["tree"]["bytes"] > 0
    assert doc["stats"]["anchor"] == "cat" and doc["find literal"]["anchor"] == "rg find literal"
    for name in ("stats", "find literal", "find alternation"):
        assert doc[name]["ratio"] > 0 and doc[name]["rss_mb"] > 0
    view = doc["view"]
    assert set(view["p95"]) >= {"/", "/questions", "/q/D/Q", "/api/setups", "/api/question/D/Q"}
    assert doc["datasets"]["rss_mb"] > 0 and view["stats_wall"] > 0
    assert view["peak_rss_mb"] > 0 and view["index_bytes"] > 0 and view["build_ratio"] > 0


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is the find anchor")
def test_only_leaves_the_other_commands_out_of_the_report(tmp_path: Path) -> None:
    args = ["--quick", "--dir", str(tmp_path / "trees"), "--repeat", "1", "--only", "find"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    labels = [line.split("  ")[0] for line in proc.stdout.splitlines()[2:-1]]
    assert labels == ["find literal", "find alternation", "stats RSS"]
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--only", "nothing"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "--only takes stats, find and/or view" in bad.stderr
