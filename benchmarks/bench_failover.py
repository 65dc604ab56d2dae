"""Failover of `kag benchmark` when one of a provider's servers misbehaves.

    python benchmarks/bench_failover.py [--tasks 40] [--parallel 4] [--latency 0.1]

For each misbehaving server of ``tests/fakeserver.py`` (HTTP 500 for ever, a reply that is
not HTTP, a body that is not JSON, 429 with ``Retry-After: 600``, an endless body, a port
where nothing listens), the real ``kag benchmark`` (in this process, default retries and
backoff) runs ``--tasks`` tasks at ``--parallel`` with ``url = [bad, healthy]``, the healthy
server answering after ``--latency`` s. Reported: tasks in error (target 0) and the wall
time's ratio to ``url = [healthy]`` alone (target <= 1.5). Then every URL dead: the wall
time of ``url = [dead, dead]`` against ``url = [dead]`` (target: about the same).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.bench_helpers import bench_args, invoke, make_project
from tests.fakeserver import FakeServer

BAD = ["500", "garbage", "badjson", "429:600", "endless", "refused"]


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def run(urls: list[str], tasks: int, parallel: int, extra: tuple[str, ...] = ()) -> tuple[float, int, int]:
    """Wall time, tasks in error and the exit code of one run over ``urls``."""
    with tempfile.TemporaryDirectory() as folder:
        root = make_project(Path(folder), n=tasks // 2)
        listed = ", ".join(f'"{u}/v1"' for u in urls)
        ollama = ", ".join(f'"{u}"' for u in urls)
        (root / "config.toml").write_text(
            f'[providers.oa]\ntype = "OpenAI"\nurl = [{listed}]\nkey = "k"\n\n'
            f'[providers.ol]\ntype = "Ollama"\nurl = [{ollama}]\n'
        )
        argv = [a for a in bench_args(root, "-p", str(parallel), *extra) if a != "--backoff"]
        argv.remove("0")  # the default backoff, as a user runs it
        began = time.perf_counter()
        result = invoke(argv)
        seconds = time.perf_counter() - began
        errors = sum(1 for p in (root / "out").rglob("*.json") if b'"error"' in p.read_bytes()[:20])
        return seconds, errors, result.exit_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with FakeServer(reply="b") as healthy, FakeServer(reply="b") as bad:
        healthy.state.latency = args.latency
        run([healthy.url], args.tasks, args.parallel)  # warm-up: imports, first connections
        alone, errors, _ = run([healthy.url], args.tasks, args.parallel)
        print(
            f"url=[healthy]            {args.tasks} tasks -p {args.parallel}: {alone:6.2f} s, {errors} error(s)"
        )
        for behaviour in BAD:
            url = dead_url() if behaviour == "refused" else bad.url
            bad.set_faults({}, default=behaviour)
            seconds, errors, code = run([url, healthy.url], args.tasks, args.parallel)
            print(
                f"url=[{behaviour:8}, healthy]: {seconds:6.2f} s = {seconds / alone:4.2f}x alone,"
                f" {errors} error(s) (target 0, <= 1.5x), exit {code}"
            )
    tasks = 2 * args.tasks
    extra = ("--retries", "1", "--max-connection-failures", "0")
    one, _, _ = run([dead_url()], tasks, args.parallel, extra)
    two, _, _ = run([dead_url(), dead_url()], tasks, args.parallel, extra)
    print(f"every URL dead, {tasks} tasks, --retries 1: url=[dead] {one:.2f} s, url=[dead, dead] {two:.2f} s")


if __name__ == "__main__":
    main()
