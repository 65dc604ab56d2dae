"""The datasets-file commands users copy from the Rust tool's README run verbatim, through a
shell, on a copy of the bundled example tree (``./results`` next to ``examples/``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

TABLE = """kag stats \\
  --datasets examples/dataset/dataset.sample.json \\
  --results ./results
"""
JSON_REPORT = """kag stats \\
  --datasets examples/dataset/dataset.sample.json \\
  --results ./results \\
  --prefix run1- \\
  --format json > report.json
"""


@pytest.fixture
def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder holding a copy of ``examples/``, and a ``kag`` on PATH that runs this checkout."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "kag"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kag "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "KAG_WIDTH": "200",
    }
    return tmp_path, env


def shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def setups(document: dict) -> dict[str, tuple[int, int, int, int]]:  # type: ignore[type-arg]
    return {
        s["setup"]: (
            s["overall"]["correct"],
            s["overall"]["incorrect"],
            s["overall"]["errors"],
            s["overall"]["total"],
        )
        for s in document["setups"]
    }


def test_the_table_command_runs_verbatim(workdir: tuple[Path, dict[str, str]]) -> None:
    cwd, env = workdir
    shutil.copytree(cwd / "examples" / "results", cwd / "results")
    result = shell(TABLE, cwd, env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0] == "Datasets: 2 | Scorable questions: 4 | Skipped files: 3 | Ignored files: 3"
    )  # the free-form question's files
    rows = {line.split()[0]: line.split()[1:9] for line in lines if line and not line[0].isspace()}
    assert rows["qwen35-9b-kag"] == ["75.00", "75.00", "100.00", "3", "1", "0", "4", "7.812"]
    assert rows["qwen35-9b-native"][:7] == ["25.00", "33.33", "75.00", "1", "2", "1", "4"]
    assert rows["smollm2-135m-native"][:7] == ["75.00", "75.00", "100.00", "3", "1", "0", "4"]


def test_the_prefixed_json_command_runs_verbatim(workdir: tuple[Path, dict[str, str]]) -> None:
    cwd, env = workdir
    # The same run as the bundled tree, written by a benchmark run with --prefix run1-.
    for source in (cwd / "examples" / "results").rglob("*.json"):
        target = (
            cwd / "results" / source.parent.relative_to(cwd / "examples" / "results") / f"run1-{source.name}"
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    result = shell(JSON_REPORT, cwd, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # the report went to the file
    document = json.loads((cwd / "report.json").read_text())
    assert (
        document["datasets"] == 2 and document["scorable_questions"] == 4 and document["skipped_files"] == 3
    )
    assert setups(document) == {
        "qwen35-9b-kag": (3, 1, 0, 4),
        "smollm2-135m-native": (3, 1, 0, 4),
        "qwen35-9b-native": (1, 2, 1, 4),
    }
    kag = next(s for s in document["setups"] if s["setup"] == "qwen35-9b-kag")
    assert kag["overall"]["accuracy"] == 0.75 and kag["per_dataset"]["mcq-form"]["accuracy"] == 1.0
