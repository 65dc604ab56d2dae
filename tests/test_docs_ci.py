"""The CI files of docs/ci.md run: every `run:` command of the GitHub Actions workflow and
every `script:` line of the GitLab CI job is executed against a copy of examples/ (the
installation and the artifact download excepted: they need the network), twice: once
without the previous run's rows, once with them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

DOC = REPO / "docs" / "ci.md"
NETWORK = ("pip install", "curl ")


def _yaml_blocks() -> list[object]:
    yaml = pytest.importorskip("yaml")
    text = DOC.read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]


def _github_commands(doc: object) -> list[str]:
    assert isinstance(doc, dict)
    steps = doc["jobs"]["grade"]["steps"]
    return [s["run"] for s in steps if "run" in s]


def _gitlab_commands(doc: object) -> list[str]:
    assert isinstance(doc, dict)
    return list(doc["kag"]["script"])


def _run(commands: list[str], cwd: Path, env: dict[str, str]) -> None:
    kag_bin = Path(sys.executable).parent
    full = {**os.environ, **env, "PATH": f"{kag_bin}{os.pathsep}{os.environ['PATH']}"}
    for command in commands:
        if command.lstrip().startswith(NETWORK):
            continue
        done = subprocess.run(
            ["bash", "-e", "-c", command], check=False, cwd=cwd, env=full, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{command}\n{done.stderr}"


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "job"
    work.mkdir()
    shutil.copytree(REPO / "examples", work / "examples")
    return work


def test_the_doc_has_both_ci_files() -> None:
    github, gitlab = _yaml_blocks()
    assert len(_github_commands(github)) == 4 and len(_gitlab_commands(gitlab)) == 5


def test_github_workflow_commands_run(tmp_path: Path) -> None:
    github, _ = _yaml_blocks()
    work = _workdir(tmp_path)
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    commands = _github_commands(github)
    _run(commands, work, env)
    assert (work / "kag-junit.xml").is_file() and not (work / "kag-regressions.xml").exists()
    (work / "previous").mkdir()
    shutil.copy(work / "kag-rows.jsonl", work / "previous" / "kag-rows.jsonl")
    _run(commands, work, env)
    assert 'name="kag.gates"' in (work / "kag-regressions.xml").read_text()
    text = summary.read_text()
    # each `kag stats` appends (two per run), then the comparison with the last run
    assert text.count("## kag stats\n") == 4 and text.count("## kag stats compare\n") == 1


def test_gitlab_job_commands_run(tmp_path: Path) -> None:
    _, gitlab = _yaml_blocks()
    work = _workdir(tmp_path)
    env = {"GITHUB_ACTIONS": "", "GITHUB_STEP_SUMMARY": ""}
    commands = _gitlab_commands(gitlab)
    _run(commands, work, env)
    shutil.copy(work / "kag-rows.jsonl", work / "previous.jsonl")
    _run(commands, work, env)
    text = (work / "kag-summary.md").read_text()
    assert "## kag stats compare" in text and "## kag stats\n" in text
    assert (work / "kag-junit.xml").read_text().startswith('<?xml version="1.0"')
