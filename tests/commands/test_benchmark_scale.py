"""`kag benchmark` at scale, from the command line against loopback servers: a provider
with several URLs (a dead one, one killed mid-run), `--shard K/N` (the union of the shards
is the unsharded run, no request sent twice, one lock per shard) and `--epochs N`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.generation.shard import shard_number
from kag.results import EPOCHS_FOLDER, OkResult, epoch_result_path, read_result, result_to_json
from tests.bench_helpers import (
    PROMPT,
    bench_args,
    bench_toml,
    fresh,
    invoke,
    server_fixture,
    setup_toml,
    tree_files,
)
from tests.conftest import REPO
from tests.fakeserver import FakeServer

BENCH = bench_toml(setup_toml("s1", "oa", "m1"), setup_toml("s2", "oa", "m2"))

server = server_fixture("a")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer) -> None:
    fresh(server)


def dead_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def make_project(root: Path, urls: list[str], n: int = 6, setups: str = BENCH) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{u}"' for u in urls)
    (root / "config.toml").write_text(f'[providers.oa]\ntype = "OpenAI"\nkey = ""\nurl = [{listed}]\n')
    (root / "bench.toml").write_text(setups)
    (root / "prompt.md").write_text(PROMPT)
    questions = {
        str(i): {
            "input": f"question number {i}",
            "output": {"type": "MCQ", "options": {"a": "y", "b": "n"}, "answer": "a"},
        }
        for i in range(n)
    }
    (root / "datasets.json").write_bytes(orjson.dumps({"mcq": questions}))
    return root


def tree(out: Path) -> dict[str, Any]:
    """Every file below ``out`` (relative path -> its JSON without the timing fields)."""
    found: dict[str, Any] = {}
    for path in tree_files(out, "*"):
        if path.is_file():
            data = result_to_json(read_result(path))
            if "ok" in data:
                data["ok"]["stats"].pop("time", None)
                data["ok"]["stats"].pop("generation_time", None)
            found[str(path.relative_to(out))] = data
    return found


def sent(server: FakeServer) -> Counter[tuple[str, str]]:
    return Counter((r.model or "", r.prompt or "") for r in server.chat_requests())


# ---------------------------------------------------------------- several URLs


def test_a_dead_url_in_the_list_costs_no_task(tmp_path: Path, server: FakeServer) -> None:
    dead = dead_url()
    root = make_project(tmp_path, [dead, f"{server.url}/v1"], n=10)
    # One task whose server cannot be reached would stop the run: the dead URL must not count.
    result = invoke(bench_args(root, "-p", "4", "--retries", "0", "--max-connection-failures", "1"))
    assert result.exit_code == 0, result.stderr
    files = tree(root / "out")
    assert len(files) == 20 and all("ok" in f and f["ok"]["stats"]["attempts"] == 1 for f in files.values())
    assert len(server.chat_requests()) == 20  # every task reached the live server once
    lines = [line for line in result.stderr.splitlines() if line.startswith("kag: provider 'oa': ")]
    assert len(lines) == 2
    assert lines[0].startswith(f"kag: provider 'oa': {dead}: ") and " 0 connection failure(s)" not in lines[0]
    assert lines[1] == f"kag: provider 'oa': {server.url}/v1: 20 request(s), 0 connection failure(s)"
    assert result.stdout == ""


def test_every_task_ends_ok_when_an_endpoint_is_killed_mid_run(tmp_path: Path) -> None:
    with FakeServer(reply="a") as first, FakeServer(reply="a", latency=0.05) as second:
        root = make_project(tmp_path, [f"{first.url}/v1", f"{second.url}/v1"], n=30)
        first.hold()  # the first URL answers nothing: its calls are in flight when it dies

        def kill_first() -> None:
            first.wait_requests(1)  # the run's first call goes to the first URL
            first.stop()

        killer = threading.Thread(target=kill_first)
        killer.start()
        result = invoke(bench_args(root, "-p", "6", "--max-connection-failures", "1"))
        killer.join()
        assert result.exit_code == 0, result.stderr
        files = tree(root / "out")
        assert len(files) == 60 and all("ok" in f for f in files.values())
        assert len(first.chat_requests()) >= 1  # it was killed with calls in flight ...
        assert len(sent(second)) == 60  # ... which the other one answered, with every other task
        assert f"kag: provider 'oa': {second.url}/v1: " in result.stderr


def test_the_run_stops_only_when_every_url_is_unreachable(tmp_path: Path) -> None:
    urls = [dead_url(), dead_url()]
    root = make_project(tmp_path, urls, n=5)
    result = invoke(bench_args(root, "--retries", "0", "--max-connection-failures", "2"))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1].startswith(
        f"kag: error: every URL of provider 'oa' ({urls[0]}, {urls[1]}): unreachable for 2 task(s) in a row;"
    )


def test_a_url_with_a_query_string_is_refused_before_any_request_without_showing_it(tmp_path: Path) -> None:
    # The API path is appended to the URL: a query would land in its middle, and a key
    # written there would show in every message. Refused at load, the value hidden.
    urls = [dead_url(), dead_url() + "?api-key=hunter2"]
    root = make_project(tmp_path, urls, n=5)
    result = invoke(bench_args(root, "--retries", "0"))
    assert result.exit_code == 2
    assert "'url[1]' must not carry a query string or fragment" in result.stderr
    assert "?api-key=***" in result.stderr and "hunter2" not in result.stderr + result.stdout
    assert not (root / "out").exists() or not any(tree_files(root / "out", "*.json"))


# ---------------------------------------------------------------- shards


def test_three_shards_one_after_another_make_the_unsharded_tree(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, [f"{server.url}/v1"], n=12)
    full = invoke(bench_args(root, "-p", "4", out="full"))
    assert full.exit_code == 0, full.stderr
    expected = sent(server)
    assert sum(expected.values()) == 24
    server.reset()
    planned = 0
    for k in (1, 2, 3):
        dry = invoke(bench_args(root, "--shard", f"{k}/3", "--dry-run"))
        assert dry.exit_code == 0, dry.stderr
        shown = int(dry.stdout.splitlines()[-1].split()[0])  # "<n> task(s) to run; ..."
        assert 0 < shown < 24
        planned += shown
        result = invoke(bench_args(root, "-p", "4", "--shard", f"{k}/3"))
        assert result.exit_code == 0, result.stderr
        assert f"kag: benchmark: {shown} task(s) run: {shown} ok" in result.stderr
    assert planned == 24
    assert sent(server) == expected  # the same requests, none twice
    assert tree(root / "out") == tree(root / "full")


def spawn(root: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kag", *bench_args(root, *extra)],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_shard_runs_beside_another_and_refuses_its_twin(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, [f"{server.url}/v1"], n=8)
    # The first shard's calls wait until the test has run the other two commands beside it.
    server.hold(lambda r: shard_number("mcq", (r.prompt or "").split()[3], f"s{r.model[1:]}", 2) == 1)
    first = spawn(root, "--shard", "1/2")
    try:
        server.wait_requests(1)  # it has taken its lock (before its first call) and is running
        twin = invoke(bench_args(root, "--shard", "1/2"))
        other = invoke(bench_args(root, "--shard", "2/2", "-p", "8"))
    finally:
        server.release()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert twin.exit_code == 2 and twin.stdout == ""
    assert twin.stderr.startswith(f"kag: error: {root / 'out'}: another kag benchmark (pid {first.pid}) ")
    assert other.exit_code == 0, other.stderr
    files = tree(root / "out")
    assert len(files) == 16 and all("ok" in f for f in files.values())
    assert sum(sent(server).values()) == 16


def test_shard_must_be_k_of_n(tmp_path: Path) -> None:
    root = make_project(tmp_path, ["http://127.0.0.1:9/v1"])
    result = invoke(bench_args(root, "--shard", "4/3"))
    assert result.exit_code == 2
    assert (
        result.stderr.strip() == "kag: error: --shard: K must be between 1 and N, counting from 1 (got '4/3')"
    )


# ---------------------------------------------------------------- epochs


ONE = bench_toml(setup_toml("s1", "oa", "m1", temperature=0.7))


def test_epochs_store_repeats_beside_an_unchanged_first_epoch(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, [f"{server.url}/v1"], n=4, setups=ONE)
    plain = invoke(bench_args(root, out="plain"))
    assert plain.exit_code == 0, plain.stderr
    server.reset()
    result = invoke(bench_args(root, "--epochs", "3", "-p", "3"))
    assert result.exit_code == 0, result.stderr
    assert "kag: benchmark: 12 task(s) run: 12 ok" in result.stderr
    per_question = Counter(r.prompt for r in server.chat_requests())
    assert len(per_question) == 4 and set(per_question.values()) == {3}
    files = tree(root / "out")
    expected = {f"mcq/{q}/s1.json" for q in "0123"} | {
        f"mcq/{q}/{EPOCHS_FOLDER}/{e}/s1.json" for q in "0123" for e in (2, 3)
    }
    assert set(files) == expected
    assert epoch_result_path(root / "out", "mcq", "0", "", "s1", 3) == root / "out/mcq/0/epochs/3/s1.json"
    # Epoch 1 is the file a run without --epochs writes; the other epochs are the same task.
    plain_files = tree(root / "plain")
    for q in "0123":
        assert files[f"mcq/{q}/s1.json"] == plain_files[f"mcq/{q}/s1.json"]
        assert files[f"mcq/{q}/epochs/2/s1.json"] == plain_files[f"mcq/{q}/s1.json"]


def test_stats_sees_a_many_epoch_tree_as_its_first_epoch(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, [f"{server.url}/v1"], n=4, setups=ONE)
    server.set_faults({"number 1": ["ok", "ok", "400"]})  # epoch 3 of question 1 is an error
    result = invoke(bench_args(root, "--epochs", "3", "--retries", "0"))
    assert result.exit_code == 0, result.stderr
    shutil.copytree(root / "out", root / "first")
    for folder in (root / "first").rglob(EPOCHS_FOLDER):
        shutil.rmtree(folder)
    outputs = []
    for tree_root in ("out", "first"):
        for fmt in ("json", "markdown", "text"):
            stats = invoke(
                ["stats", "-d", str(root / "datasets.json"), "-r", str(root / tree_root), "--format", fmt]
            )
            assert stats.exit_code == 0, stats.stderr
            outputs.append(stats.stdout)
    # Markdown is byte-identical, the text only gains its epochs section after the table,
    # the JSON document only the epochs blocks.
    assert outputs[1] == outputs[4]
    assert outputs[2].startswith(outputs[5]) and outputs[2][len(outputs[5]) :].startswith("\nEpochs (")
    with_epochs, first_only = orjson.loads(outputs[0]), orjson.loads(outputs[3])
    assert "epochs" not in first_only["setups"][0]["overall"]
    block = with_epochs["setups"][0]["overall"].pop("epochs")
    assert with_epochs["setups"][0]["per_dataset"]["mcq"].pop("epochs") == block
    assert with_epochs == first_only
    assert block["n"] == 3 and block["questions"] == 4 and block["incomplete"] == 0
    assert with_epochs["ignored_files"] == 0


def test_continue_runs_exactly_the_missing_epochs(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, [f"{server.url}/v1"], n=3, setups=ONE)
    assert invoke(bench_args(root, "--epochs", "3")).exit_code == 0
    out = root / "out"
    (out / "mcq/1/epochs/2/s1.json").unlink()
    (out / "mcq/2/epochs/3/s1.json").unlink()
    # A write cut short by a crash in an epoch folder (its writer's pid is gone).
    leftover = out / "mcq/0/epochs/3/s1.json.4194303.0123abcd.tmp"
    leftover.write_bytes(b'{"ok": ')
    server.reset()
    dry = invoke(bench_args(root, "--epochs", "3", "--continue", "--dry-run"))
    assert dry.stdout.splitlines()[-2].startswith("2 task(s) to run;")
    result = invoke(bench_args(root, "--epochs", "3", "--continue"))
    assert result.exit_code == 0, result.stderr
    assert "kag: removed 1 leftover .tmp file(s)" in result.stderr
    asked = sorted((r.prompt or "").split("\n")[0] for r in server.chat_requests())
    assert asked == ["Question: question number 1", "Question: question number 2"]
    assert not leftover.exists()
    assert all(isinstance(read_result(p), OkResult) for p in tree_files(out, "*.json"))
    assert len(list(tree_files(out, "*.json"))) == 9
    # --retry-errors covers the later epochs too.
    server.reset()
    (out / "mcq/0/epochs/2/s1.json").write_bytes(b'{"error": "Failed to generate a response"}')
    result = invoke(bench_args(root, "--epochs", "3", "--retry-errors"))
    assert result.exit_code == 0, result.stderr
    assert len(server.chat_requests()) == 1
    assert isinstance(read_result(out / "mcq/0/epochs/2/s1.json"), OkResult)
