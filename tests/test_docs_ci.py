"""The CI files of docs/ci.md run: every `run:` command of the GitHub Actions workflow and
every `script:` line of the GitLab CI job is executed against a copy of examples/ (the
installation and the artifact download excepted: they need the network), twice: once
without the previous run's rows, once with them. The installation then runs as documented
in a clean folder and a fresh virtual environment, ``KAG_SOURCE`` the path of a wheel built
from this checkout (kag's dependencies are lent from the test environment, so nothing is
downloaded), and the documented grading commands run with the installed kag on the real
Med-KAG tree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

INSTALL = 'pip install "$KAG_SOURCE"'

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
    # Both install kag the one way that works (no package index holds kag-toolkit).
    assert _github_commands(github)[0] == INSTALL and _gitlab_commands(gitlab)[0] == INSTALL
    assert isinstance(github, dict) and isinstance(gitlab, dict)
    source = github["env"]["KAG_SOURCE"]
    assert source == gitlab["kag"]["variables"]["KAG_SOURCE"]
    # a wheel kept in the user's repository, named as `pip wheel` names this checkout's
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE)
    assert version is not None
    assert source == f"dist/kag_toolkit-{version[1]}-py3-none-any.whl"


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


def _wheel(tmp_path: Path) -> Path:
    """A wheel of this checkout, built from a copy of its sources (offline: setuptools and
    build come with the test extra)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "kag", source / "kag", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = out.glob("kag_toolkit-*.whl")
    return wheel


def _clean_venv(tmp_path: Path) -> Path:
    """A fresh virtual environment (with pip) that sees the test environment's packages
    but not kag itself: what pip would download for kag's requirements is already there."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    lent = tmp_path / "lent"
    lent.mkdir()
    ours = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "typer").is_dir()))
    for entry in ours.iterdir():
        if entry.name.startswith(("kag", "__editable__", "_kag")) or entry.suffix == ".pth":
            continue
        (lent / entry.name).symlink_to(entry)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "lent.pth").write_text(f"{lent}\n")
    return venv


def test_the_documented_install_and_grade_run_in_a_clean_folder(tmp_path: Path, med_kag: Path) -> None:
    github, _ = _yaml_blocks()
    assert isinstance(github, dict)
    commands = _github_commands(github)
    source = github["env"]["KAG_SOURCE"]
    venv = _clean_venv(tmp_path)
    work = tmp_path / "job"
    work.mkdir()
    wheel = _wheel(tmp_path)
    assert wheel.name == Path(source).name  # the file the doc names is the one a build writes
    (work / source).parent.mkdir(parents=True)
    shutil.copy2(wheel, work / source)  # kept in the user's repository, as the doc says
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "KAG_SOURCE": source,
        "PIP_NO_INDEX": "1",  # nothing comes from an index: the requirements are all there
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "VIRTUAL_ENV": str(venv),
    }
    env.pop("PYTHONPATH", None)
    paths = {
        "examples/dataset/datasets.json": str(med_kag / "datasets" / "mirage.json"),
        "examples/results": str(med_kag / "results"),
    }

    def run(command: str) -> subprocess.CompletedProcess[str]:
        for doc_path, real in paths.items():
            command = command.replace(doc_path, real)
        done = subprocess.run(
            ["bash", "-e", "-c", command],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done

    assert commands[0] == INSTALL
    run(commands[0])
    where = run("command -v kag; python -c 'import kag; print(kag.__file__)'").stdout.split()
    assert where[0] == str(venv / "bin" / "kag") and where[1].startswith(str(venv))  # not the checkout
    for command in commands[1:]:
        run(command)  # the rows, the graded JUnit file with its --fail-under gate
    assert 'name="kag.gates"' in (work / "kag-junit.xml").read_text()
    (work / "previous").mkdir()
    shutil.copy(work / "kag-rows.jsonl", work / "previous" / "kag-rows.jsonl")
    run(commands[-1])  # against the last run: the same answers, the gate passes
    regressions = (work / "kag-regressions.xml").read_text()
    assert '<testcase classname="kag.gates" name="--fail-if-regressed" />' in regressions
