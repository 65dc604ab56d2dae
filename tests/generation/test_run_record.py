"""The run record `kag benchmark` writes in ``<results>/.kag/runs/``: every field after a
normal run, ``"finished": null`` after a SIGKILL, and no secret in any spelling."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag import __version__
from kag.generation.secrets import secret_forms
from kag.results import read_run_records, runs_folder
from tests.bench_helpers import (
    FAKE_CONFIG,
    SECRET,
    bench_args,
    fresh,
    make_project,
    server_fixture,
    tree_files,
)
from tests.conftest import REPO
from tests.fakeserver import FakeServer

server = server_fixture("b")

URL_SECRET = "pw-Planted_9e8d7c6b"
# A spare provider whose URL carries a password: it is in the record's endpoints, masked.
CONFIG = (
    FAKE_CONFIG
    + """
[providers.spare]
type = "OpenAI"
url = "http://user:{{ env('URL_SECRET') }}@127.0.0.1:9/v1"
key = ""
"""
)


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key=SECRET)
    monkeypatch.setenv("URL_SECRET", URL_SECRET)


def project(root: Path, n: int = 3) -> Path:
    make_project(root, n=n)
    (root / "config.toml").write_text(CONFIG)
    return root


def run(root: Path, *extra: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "kag", *bench_args(root, *extra)],
        cwd=cwd or root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def spawn(root: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "kag", *bench_args(root, *extra)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def only_record(root: Path) -> dict[str, Any]:
    files = list(runs_folder(root / "out").iterdir())
    assert len(files) == 1, files
    data = orjson.loads(files[0].read_bytes())
    assert isinstance(data, dict)
    return data


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_no_secret(raw: bytes) -> None:
    text = raw.decode().lower()
    for secret in (SECRET, URL_SECRET):
        for form in secret_forms(secret):
            for spelling in (form, form.replace("-", "_"), form.replace("_", "-")):
                assert spelling.lower() not in text, spelling


def test_a_normal_run_records_every_field(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path)
    done = run(root, "--epochs", "2", "--shard", "1/1")
    assert done.returncode == 0, done.stderr
    files = list(runs_folder(root / "out").iterdir())
    assert len(files) == 1
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{6}\.json", files[0].name), files[0].name
    record = only_record(root)
    assert record["kag_version"] == __version__
    assert record["argv"][1:] == bench_args(root, "--epochs", "2", "--shard", "1/1")
    assert record["config"]["path"] == str(root / "config.toml")
    assert record["config"]["sha256"] == sha256(root / "config.toml")
    rendered = record["config"]["rendered"]
    assert server.url in rendered and 'key = "***"' in rendered and "http://***@127.0.0.1:9/v1" in rendered
    assert record["config"]["rendered_sha256"] == hashlib.sha256(rendered.encode()).hexdigest()
    assert record["benchmark"]["sha256"] == sha256(root / "bench.toml")
    assert "Answer with the key." in record["benchmark"]["rendered"]  # file('prompt.md') rendered
    assert record["datasets_file"] == {
        "path": str(root / "datasets.json"),
        "sha256": sha256(root / "datasets.json"),
    }
    assert record["setups"] == ["s1", "s2"]
    assert record["datasets"] == ["mcq"]
    assert record["questions"] == {"mcq": 3}
    assert record["epochs"] == 2 and record["shard"] == "1/1"
    assert record["started"].endswith("Z") and record["finished"].endswith("Z")
    assert record["started"] <= record["finished"]
    assert record["tasks"] == {"planned": 12, "skipped": 0, "ok": 12, "error": 0, "kept": 0, "not_run": 0}
    assert record["interrupted"] is False
    assert record["python"].count(".") == 2 and record["platform"]
    assert record["endpoints"] == {
        "oa": [f"{server.url}/v1"],
        "ol": [server.url],
        "spare": ["http://***@127.0.0.1:9/v1"],
    }
    assert "git" not in record  # tmp_path is in no repository
    assert_no_secret(files[0].read_bytes())


def test_errors_and_a_second_run_get_their_own_record(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path, n=3)
    server.set_faults({"number 0\n": ["404", "404"]})
    assert run(root).returncode == 0
    first = only_record(root)
    assert first["tasks"] == {"planned": 6, "skipped": 0, "ok": 4, "error": 2, "kept": 0, "not_run": 0}
    server.set_faults({})
    assert run(root, "--retry-errors").returncode == 0
    records = read_run_records(root / "out")
    assert len(records) == 2 and records[0].data == first
    assert records[1].data["tasks"] == {
        "planned": 2,
        "skipped": 4,
        "ok": 2,
        "error": 0,
        "kept": 0,
        "not_run": 0,
    }
    assert records[1].finished is not None and records[0].name < records[1].name


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]


def commit_all(root: Path) -> str:
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("out/\n")
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "project"], cwd=root, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    return head.stdout.strip()


def plant_commands(root: Path, marker: Path) -> None:
    """Every command a repository's own configuration can make `git status` run (the
    fsmonitor, a clean filter its attributes select, hooks), each creating ``marker``."""
    script = root / "planted.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    (root / ".gitattributes").write_text("*.md filter=planted\n")
    with (root / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {script}\n\thooksPath = {root}\n"
            f'[filter "planted"]\n\tclean = {script}\n\tprocess = {script}\n'
            f"[diff]\n\texternal = {script}\n"
        )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_git_commit_and_dirty_flag_of_the_benchmark_files_repository(
    tmp_path: Path, server: FakeServer
) -> None:
    root = project(tmp_path / "p")
    commit = commit_all(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run(root, cwd=elsewhere).returncode == 0
    assert only_record(root)["git"] == {"commit": commit, "dirty": False}
    (root / "prompt.md").write_text("changed {{INPUT}}\n")
    shutil.rmtree(root / "out")
    assert run(root, cwd=elsewhere).returncode == 0
    assert only_record(root)["git"] == {"commit": commit, "dirty": True}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_no_command_a_repositorys_configuration_names_runs(tmp_path: Path, server: FakeServer) -> None:
    """The current folder is a received archive whose .git names commands: none runs, and
    its state is not recorded. The benchmark file's own repository names the same ones: its
    state is read all the same, and none runs either."""
    marker = tmp_path / "ran"
    received = tmp_path / "received"
    received.mkdir()
    commit_all(received)
    plant_commands(received, marker)
    outside = project(tmp_path / "outside")
    assert run(outside, cwd=received).returncode == 0
    assert "git" not in only_record(outside)
    assert not marker.exists()

    root = project(tmp_path / "p")
    commit = commit_all(root)
    plant_commands(root, marker)
    (root / "prompt.md").write_text("changed {{INPUT}}\n")  # selected by the planted filter
    assert run(root, cwd=root).returncode == 0
    assert only_record(root)["git"] == {"commit": commit, "dirty": True}
    assert not marker.exists()


def test_sigkill_mid_run_leaves_a_record_not_finished(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path, n=20)
    server.hold(lambda r: int((r.prompt or "").split()[3]) >= 3)  # "Question: question number N"
    process = spawn(root, "-p", "4")
    try:
        # The record is written before the first task; then wait for the results of questions
        # 0-2 (the later questions' calls are held by the server: the run cannot end).
        while len(tree_files(root / "out", "*.json")) < 6 if (root / "out").exists() else True:
            if process.poll() is not None:
                raise AssertionError(f"the benchmark ended early: {process.communicate()}")
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    record = only_record(root)
    assert record["finished"] is None
    assert record["tasks"]["planned"] == 40 and record["tasks"]["not_run"] == 40
    assert_no_secret(next(runs_folder(root / "out").iterdir()).read_bytes())


def test_a_link_planted_at_the_records_folder_is_not_followed(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path / "p")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "out").mkdir()
    os.symlink(outside, root / "out" / ".kag")
    done = run(root)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert ".kag" in done.stderr
    assert list(outside.rglob("*")) == []
    assert not server.chat_requests()  # refused before any task


def test_records_of_runs_started_within_one_second_sort_oldest_first(tmp_path: Path) -> None:
    """The record's name holds the start time to the microsecond: the random id never decides
    which of two runs started in the same second comes first."""
    from datetime import UTC, datetime

    from kag.generation.run_record import RunRecorder
    from kag.generation.secrets import Redactor

    root = tmp_path / "out"
    root.mkdir()
    second = datetime(2026, 12, 2, 2, 45, 11, tzinfo=UTC)
    for micro, n in ((999_000, 2), (1_000, 1), (500_000, 3)):
        RunRecorder(root, {"n": n}, Redactor.of(()), second.replace(microsecond=micro)).write()
    records = read_run_records(root)
    assert [r.data["n"] for r in records] == [1, 3, 2]
    assert [r.name[:23] for r in records] == [
        "20261202T024511.001000Z",
        "20261202T024511.500000Z",
        "20261202T024511.999000Z",
    ]


@pytest.mark.parametrize(
    "spelling",
    [
        # TOML escapes: the value is the key, the text holds none of its spellings.
        '"' + SECRET[:3] + "\\u" + f"{ord(SECRET[3]):04x}" + SECRET[4:] + '"',
        '"""' + SECRET[:8] + "\\\n    " + SECRET[8:] + '"""',
        '"' + "".join(f"\\U{ord(c):08X}" for c in SECRET) + '"',
        '"' + "".join(f"\\x{ord(c):02x}" for c in SECRET) + '"',  # TOML 1.1, as kag reads it
    ],
)
def test_a_key_written_with_toml_escapes_is_redacted(
    tmp_path: Path, server: FakeServer, spelling: str
) -> None:
    """Redaction works on the values TOML reads: the text alone never holds the key."""
    import tomli as tomllib

    root = project(tmp_path)
    config = (root / "config.toml").read_text().replace("\"{{ env('FAKE_KEY') }}\"", spelling)
    assert (
        tomllib.loads(config.replace("{{ env('FAKE_URL') }}", "x").replace("{{ env('URL_SECRET') }}", "y"))[
            "providers"
        ]["oa"]["key"]
        == SECRET
    )
    (root / "config.toml").write_text(config)
    done = run(root)
    assert done.returncode == 0, done.stderr
    record = only_record(root)
    assert 'key = "***"' in record["config"]["rendered"]
    assert_no_secret(next(runs_folder(root / "out").iterdir()).read_bytes())
    assert tomllib.loads(record["config"]["rendered"])["providers"]["oa"]["key"] == "***"


def test_a_continue_with_nothing_to_run_writes_no_record(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path)
    assert run(root).returncode == 0
    first = only_record(root)
    again = run(root, "--continue")
    assert again.returncode == 0, again.stderr
    assert "0 task(s) to run" in again.stderr
    assert [r.data for r in read_run_records(root / "out")] == [first]


def test_the_commit_of_a_packed_branch_and_of_a_detached_head(tmp_path: Path) -> None:
    """HEAD is read from .git itself: a branch in packed-refs, and a detached HEAD."""
    from kag.generation.git_state import git_state

    root = tmp_path / "p"
    root.mkdir()
    (root / "bench.toml").write_text("")
    commit = commit_all(root)
    subprocess.run(["git", "pack-refs", "--all"], cwd=root, check=True)
    assert not list((root / ".git" / "refs" / "heads").iterdir())
    assert git_state(root / "bench.toml") == {"commit": commit, "dirty": False}
    subprocess.run(["git", "checkout", "-q", "--detach"], cwd=root, check=True)
    assert git_state(root / "bench.toml") == {"commit": commit, "dirty": False}
    (root / "new.txt").write_text("x")
    assert git_state(root / "bench.toml") == {"commit": commit, "dirty": True}
    assert git_state(tmp_path / "elsewhere.toml") is None
