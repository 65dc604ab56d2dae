"""docs/benchmark.md's Slurm array recipe (`kag benchmark --shard auto` in `sbatch --array`),
run as written on a real one-node Slurm cluster against the loopback model server: the
array fills the tree of an unsharded run; a cancelled task requeued with `--continue` runs
exactly the rest; the same array twice at once, or an array of another size, runs no task
twice; a shard whose requests fail leaves error files that a resubmission with
`--retry-errors` heals."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.generation.shard import shard_number
from kag.results import OkResult, read_result, result_path
from tests.bench_helpers import PROMPT, bench_toml, setup_toml
from tests.conftest import REPO
from tests.fakeserver import FakeServer
from tests.slurm.cluster import Cluster, Task
from tests.slurm.conftest import NOTES

pytestmark = pytest.mark.slurm

KAG = REPO / ".venv" / "bin" / "kag"
SHARDS = 4
QUESTIONS = 24
DATASET = "mcq"
BOTH = ("s1", "s2")  # 2 x 24 tasks: 12 a shard on average
# The fault tests make the server fail a question's requests by its text, which is the same
# for every setup: with one setup, a question's requests all belong to one shard.
ONE = ("s1",)


def docs_recipe() -> str:
    """The Slurm array script of docs/benchmark.md, as the page shows it."""
    page = (REPO / "docs" / "benchmark.md").read_text()
    blocks = re.findall(r"```sh\n(#!/bin/bash\n#SBATCH --array=.*?)```", page, re.DOTALL)
    assert len(blocks) == 1, "docs/benchmark.md shows one Slurm array script"
    assert "`sbatch benchmark.sh`" in page
    return blocks[0]


def marker(question: int) -> str:
    return f"Question {question:03d}:"


def make_project(root: Path, url: str, setups: tuple[str, ...]) -> Path:
    """config.toml (one provider at ``url``), bench.toml (``setups``, model m<i>), the
    datasets file and the docs' script as benchmark.sh, in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(f'[providers.vllm]\ntype = "OpenAI"\nkey = ""\nurl = "{url}/v1"\n')
    (root / "bench.toml").write_text(bench_toml(*(setup_toml(s, "vllm", model(s)) for s in setups)))
    (root / "prompt.md").write_text(PROMPT)
    questions = {
        str(i): {
            "input": f"{marker(i)} is {i} even?",
            "output": {"type": "MCQ", "options": {"a": "yes", "b": "no"}, "answer": "ab"[i % 2]},
        }
        for i in range(QUESTIONS)
    }
    (root / "datasets.json").write_bytes(orjson.dumps({DATASET: questions}))
    script = root / "benchmark.sh"
    script.write_text(docs_recipe())
    script.chmod(0o755)
    return root


def job_env() -> dict[str, str]:
    """The environment sbatch passes to the jobs: the worktree's kag first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JOB_COMPLETION"))}
    env["PATH"] = f"{KAG.parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["HF_HUB_OFFLINE"] = "1"
    return env


def shard_of(setup: str, question: int) -> int:
    return shard_number(DATASET, str(question), setup, SHARDS)


def slice_of(setups: tuple[str, ...], k: int) -> set[tuple[str, int]]:
    """The tasks (setup, question) of shard k."""
    return {(s, q) for s in setups for q in range(QUESTIONS) if shard_of(s, q) == k}


def model(setup: str) -> str:
    return f"m{setup[1:]}"


def sent(server: FakeServer) -> Counter[tuple[str, str]]:
    """(model, question marker) of every chat request the server received."""
    found = [
        (r.model or "", re.search(r"Question [0-9]{3}:", r.prompt or "")) for r in server.chat_requests()
    ]
    return Counter((name, m[0] if m else "") for name, m in found)


def requests(tasks: Iterable[tuple[str, int]]) -> Counter[tuple[str, str]]:
    """What ``sent`` counts when each task asked once."""
    return Counter((model(s), marker(q)) for s, q in tasks)


def every(setups: tuple[str, ...]) -> set[tuple[str, int]]:
    return {(s, q) for s in setups for q in range(QUESTIONS)}


def stats(root: Path, tree: str) -> Any:
    """`kag stats --format json` of ``root / tree``, timings left out (they differ per run)."""
    done = subprocess.run(
        [str(KAG), "stats", "-d", "datasets.json", "-r", tree, "--format", "json"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return _without_times(orjson.loads(done.stdout))


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if "time" not in k and "secs" not in k}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def task_files(root: Path, setups: tuple[str, ...]) -> dict[tuple[str, int], str]:
    """Each task's result in ``root / "results"``: "ok", "error" or "missing"."""
    out = root / "results"
    found = {}
    for setup in setups:
        for question in range(QUESTIONS):
            path = result_path(out, DATASET, str(question), "", setup)
            found[setup, question] = (
                ("ok" if isinstance(read_result(path), OkResult) else "error") if path.exists() else "missing"
            )
    return found


def all_ok(root: Path, setups: tuple[str, ...]) -> bool:
    """Whether every task's result is an answer, and nothing else is in the tree: no
    temporary file, no lock left (run records aside)."""
    out = root / "results"
    others = [p for p in out.rglob("*") if p.is_file() and ".kag" not in p.relative_to(out).parts]
    return set(task_files(root, setups).values()) == {"ok"} and len(others) == len(setups) * QUESTIONS


def job_output(root: Path, job: str, task: str) -> str:
    return (root / f"slurm-{job}_{task}.out").read_text(errors="replace")


def states(tasks: dict[str, Task]) -> dict[str, tuple[str, str]]:
    return {k: (t.state, t.exit_code) for k, t in tasks.items()}


ALL_DONE = {str(k): ("COMPLETED", "0:0") for k in range(1, SHARDS + 1)}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer(reply="a") as fake:
        yield fake


@pytest.fixture
def fresh_server(server: FakeServer) -> FakeServer:
    server.reset()
    server.set_faults({}, default="ok")
    return server


@pytest.fixture(scope="module")
def unsharded(
    tmp_path_factory: pytest.TempPathFactory, server: FakeServer
) -> Callable[[tuple[str, ...]], Any]:
    """`kag stats --format json` of the same run without --shard, in one process (the
    recipe's command line without it), once per set of setups."""
    made: dict[tuple[str, ...], Any] = {}

    def reference(setups: tuple[str, ...]) -> Any:
        if setups in made:
            return made[setups]
        server.reset()
        server.set_faults({}, default="ok")
        root = make_project(tmp_path_factory.mktemp("unsharded"), server.url, setups)
        started = time.monotonic()
        done = subprocess.run(
            [str(KAG), "benchmark", "-c", "config.toml", "-b", "bench.toml", "-d", "datasets.json"]
            + ["-o", "results", "-p", "32", "--continue"],
            cwd=root,
            env=job_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        assert sent(server) == requests(every(setups))
        NOTES.append(f"slurm: {len(setups) * QUESTIONS} tasks unsharded, in one process: {took:.2f} s")
        made[setups] = stats(root, "results")
        server.reset()
        return made[setups]

    return reference


def test_the_docs_array_fills_the_tree_of_an_unsharded_run(
    cluster: Cluster, fresh_server: FakeServer, unsharded: Callable[[tuple[str, ...]], Any], tmp_path: Path
) -> None:
    reference = unsharded(BOTH)
    root = make_project(tmp_path, fresh_server.url, BOTH)
    started = time.monotonic()
    job = cluster.sbatch(root / "benchmark.sh", cwd=root, env=job_env())
    tasks = cluster.wait(job, count=SHARDS)
    took = time.monotonic() - started
    NOTES.append(
        f"slurm: the docs' {SHARDS}-task array, from sbatch to the last task's end: {took:.2f} s"
        f" (load average {os.getloadavg()[0]:.1f})"
    )
    assert states(tasks) == ALL_DONE, [job_output(root, job, k) for k in tasks]
    assert sent(fresh_server) == requests(every(BOTH))  # every task asked once, none twice
    assert all_ok(root, BOTH)
    assert stats(root, "results") == reference
    for k in range(1, SHARDS + 1):
        said = f"kag: benchmark: --shard auto: shard {k}/{SHARDS} (Slurm array task {k} of 1-{SHARDS})\n"
        assert said in job_output(root, job, str(k))
    # One run record per array task, listed by `kag stats runs`, each with its slice's counts.
    listed = subprocess.run(
        [str(KAG), "stats", "runs", "-r", "results", "--format", "json"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    runs = orjson.loads(listed.stdout)
    runs = runs["runs"] if isinstance(runs, dict) else runs
    assert sorted(r["shard"] for r in runs) == [f"{k}/{SHARDS}" for k in range(1, SHARDS + 1)]
    for record in runs:
        k = int(record["shard"].split("/")[0])
        assert record["finished"] is not None
        assert record["tasks"]["ok"] == len(slice_of(BOTH, k)) and record["tasks"]["error"] == 0


def wait_for(condition: Callable[[], bool], what: Callable[[], object], timeout: float = 300) -> None:
    """Until ``condition()`` holds (an event the test watches: requests at the server,
    files in the tree); AssertionError showing ``what()`` past ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def test_a_cancelled_task_requeued_runs_exactly_the_rest(
    cluster: Cluster, fresh_server: FakeServer, unsharded: Callable[[tuple[str, ...]], Any], tmp_path: Path
) -> None:
    server = fresh_server
    reference = unsharded(ONE)
    root = make_project(tmp_path, server.url, ONE)
    third = sorted(slice_of(ONE, 3))
    assert len(third) >= 2
    # Half of shard 3 hangs at the server until the test has cancelled the task.
    hung = set(third[::2])
    server.set_faults({marker(q): ["hang"] for _, q in hung})
    job = cluster.sbatch(root / "benchmark.sh", cwd=root, env=job_env())
    # Cancel task 3 once its hung requests are at the server and the rest of its slice is
    # written: what is missing then is exactly the hung tasks.
    wait_for(
        lambda: (
            all(sent(server)[t] for t in requests(hung))
            and all(task_files(root, ONE)[t] == "ok" for t in third if t not in hung)
        ),
        lambda: (sent(server), task_files(root, ONE)),
    )
    cluster.command("scancel", f"{job}_3")
    tasks = cluster.wait(job, count=SHARDS)
    assert states(tasks) == {**ALL_DONE, "3": ("CANCELLED", "0:15")}
    files = task_files(root, ONE)
    assert {t for t, v in files.items() if v != "ok"} == hung
    assert {files[t] for t in hung} == {"missing"}
    server.reset()
    server.set_faults({}, default="ok")
    # A part of the array submitted on its own cannot tell its slice: refused, nothing sent.
    alone = cluster.sbatch(root / "benchmark.sh", options=["--array=3"], cwd=root, env=job_env())
    assert states(cluster.wait(alone, count=1)) == {"3": ("FAILED", "2:0")}
    said = "kag: error: --shard auto: the Slurm array starts at id 3, not at 0 or 1"
    assert said in job_output(root, alone, "3")
    assert sent(server) == Counter()
    # Requeued, the task keeps its place in the array (shard 3/4) and runs only the rest.
    cluster.command("scontrol", "requeue", f"{job}_3")
    cluster.command("scontrol", "update", f"jobid={job}_3", "StartTime=now")
    assert states(cluster.wait(job, count=SHARDS)) == ALL_DONE
    assert sent(server) == requests(hung)
    assert all_ok(root, ONE)
    assert stats(root, "results") == reference


def test_arrays_on_one_tree_at_once_run_no_task_twice(
    cluster: Cluster, fresh_server: FakeServer, unsharded: Callable[[tuple[str, ...]], Any], tmp_path: Path
) -> None:
    server = fresh_server
    reference = unsharded(BOTH)
    root = make_project(tmp_path, server.url, BOTH)
    server.set_faults({}, default="hold")  # no answer until the second array has run
    first = cluster.sbatch(root / "benchmark.sh", cwd=root, env=job_env())
    wait_for(lambda: sent(server) == requests(every(BOTH)), lambda: sent(server))
    second = cluster.sbatch(root / "benchmark.sh", cwd=root, env=job_env())
    twins = cluster.wait(second, count=SHARDS)
    assert states(twins) == {str(k): ("FAILED", "2:0") for k in range(1, SHARDS + 1)}
    assert {t.state for t in cluster.tasks(first).values()} == {"RUNNING"}
    for k in range(1, SHARDS + 1):
        out = job_output(root, second, str(k))
        assert f"--shard auto: shard {k}/{SHARDS} " in out and "another kag benchmark (pid " in out
    # An array of another size cuts the tasks into other slices: refused too.
    halves = cluster.sbatch(root / "benchmark.sh", options=["--array=1-2"], cwd=root, env=job_env())
    assert states(cluster.wait(halves, count=2)) == {"1": ("FAILED", "2:0"), "2": ("FAILED", "2:0")}
    for k in (1, 2):
        out = job_output(root, halves, str(k))
        assert f"with --shard {k}/2 some tasks would run twice" in out
    server.release()
    assert states(cluster.wait(first, count=SHARDS)) == ALL_DONE
    assert sent(server) == requests(every(BOTH))
    assert all_ok(root, BOTH)
    assert stats(root, "results") == reference


def test_a_shard_that_cannot_reach_the_server_is_healed_by_retry_errors(
    cluster: Cluster, fresh_server: FakeServer, unsharded: Callable[[tuple[str, ...]], Any], tmp_path: Path
) -> None:
    server = fresh_server
    reference = unsharded(ONE)
    root = make_project(tmp_path, server.url, ONE)
    cut = slice_of(ONE, 2)
    assert cut
    # Every request of shard 2 loses its connection (a TCP reset), every retry too.
    server.set_faults({marker(q): ["reset"] for _, q in cut})
    job = cluster.sbatch(root / "benchmark.sh", cwd=root, env=job_env())
    # A run where no task got an answer fails (exit 2), so Slurm shows that task FAILED.
    assert states(cluster.wait(job, count=SHARDS)) == {**ALL_DONE, "2": ("FAILED", "2:0")}
    assert f"kag: error: no task got an answer ({len(cut)} failed)" in job_output(root, job, "2")
    files = task_files(root, ONE)
    assert {t for t, v in files.items() if v != "ok"} == cut
    assert {files[t] for t in cut} == {"error"}
    server.reset()
    server.set_faults({}, default="ok")
    again = cluster.sbatch(root / "benchmark.sh", arguments=["--retry-errors"], cwd=root, env=job_env())
    assert states(cluster.wait(again, count=SHARDS)) == ALL_DONE
    assert sent(server) == requests(cut)  # the other shards sent nothing
    assert all_ok(root, ONE)
    assert stats(root, "results") == reference
