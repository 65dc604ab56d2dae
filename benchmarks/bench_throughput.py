"""Throughput of `kag benchmark`'s runner against a loopback server with a fixed latency.

    python benchmarks/bench_throughput.py [--tasks 2000] [--latency 0.1] [--parallel 1,8,32]

Anchor: the ideal wall time of N tasks at --parallel p against a server that answers every
request after exactly L seconds, ``ideal(p) = N * L / p`` (no client cost at all). The
server is ``tests/fakeserver.py`` in its own process (OpenAI API, keep-alive, asyncio), so
its CPU is not the runner's. Each run is the real pipeline in one process, as
``kag benchmark`` runs it: plan (fingerprints, file checks), render the prompt, one HTTP
request through the provider's shared aiohttp session, write the result file atomically
(fsync, rename) in a fresh output folder. Startup and planning are outside the timed part;
importing aiohttp (~0.25 s, once per process, at the first request) is inside the first
level's run, as it is inside a real ``kag benchmark``.

Reported per p: wall time, tasks/s, the speed-up over p=1 and its share of the ideal
speed-up (target >= 95% at p=32), and the overhead per task,
``(wall - ideal(p)) * p / N`` (the time a slot spends on a task beyond the latency). A
second anchor, the *floor*, is the same N requests at the same p from a bare asyncio
client (keep-alive, nothing parsed or written): what the machine and the server allow.
``vs floor`` is kag's overhead per task beyond it, ``(wall - floor) * p / N``, the
target (<= 2 ms at p=1); on a shared, loaded machine the floor itself drifts above the
ideal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_EFFICIENCY = 0.95
TARGET_OVERHEAD_MS = 2.0


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fakeserver.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        raise SystemExit(f"the fake server did not start (got {port!r})")
    return process, f"http://127.0.0.1:{port}"


def make_project(root: Path, url: str, tasks: int) -> None:
    (root / "config.toml").write_text(f'[providers.fake]\ntype = "OpenAI"\nurl = "{url}/v1"\nkey = "bench"\n')
    (root / "prompt.md").write_text("Question: {{INPUT}}\nChoices:\n{{ CHOICE }}\nAnswer with the key.\n")
    (root / "bench.toml").write_text(
        "[fake-setup]\nprovider = 'fake'\nmodel = 'fake-model'\ntemperature = 0.0\ntokens = 8\n"
        "system_prompt = '''{{ file('prompt.md') }}'''\n"
    )
    questions = {
        str(i): {
            "input": f"Synthetic question number {i}?",
            "output": {"type": "MCQ", "options": {"a": "yes", "b": "no", "c": "maybe"}, "answer": "a"},
        }
        for i in range(tasks)
    }
    (root / "datasets.json").write_bytes(orjson.dumps({"bench": questions}))


async def _raw_client(url: str, tasks: int, parallel: int) -> None:
    """The floor: the same requests from a bare asyncio client (one keep-alive connection
    per slot, no parsing beyond Content-Length, nothing written)."""
    import asyncio

    host, port = url.removeprefix("http://").split(":")
    pending = iter(range(tasks))

    async def slot() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        for i in pending:
            body = orjson.dumps(
                {
                    "model": "fake-model",
                    "temperature": 0.0,
                    "max_tokens": 8,
                    "messages": [{"role": "user", "content": f"Synthetic question number {i}?"}],
                }
            )
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            orjson.loads(await reader.readexactly(length))
        writer.close()

    await asyncio.gather(*(slot() for _ in range(min(parallel, tasks))))


def run_floor(url: str, tasks: int, parallel: int) -> float:
    import asyncio

    started = time.perf_counter()
    asyncio.run(_raw_client(url, tasks, parallel))
    return time.perf_counter() - started


def run_once(root: Path, parallel: int) -> tuple[float, int]:
    from kag.datasets import load_datasets
    from kag.generation.config import load_benchmark, load_config
    from kag.generation.generator import RunOptions
    from kag.generation.plan import PlanOptions, plan_benchmark
    from kag.generation.runner import run_benchmark

    output = root / f"out-{parallel}"
    shutil.rmtree(output, ignore_errors=True)
    config = load_config(root / "config.toml")
    bench = load_benchmark(root / "bench.toml", config)
    data = load_datasets(root / "datasets.json")
    plan = plan_benchmark(config, bench, data, PlanOptions(output=output))
    started = time.perf_counter()
    summary = run_benchmark(plan, config, RunOptions(parallel=parallel, timeout=60.0), handle_sigint=False)
    wall = time.perf_counter() - started
    if summary.ok != len(plan.tasks):
        raise SystemExit(f"--parallel {parallel}: {summary.errors} task(s) failed")
    return wall, summary.ok


def _aiohttp_version() -> str:
    from importlib.metadata import version

    return version("aiohttp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--parallel", default="1,8,32")
    args = parser.parse_args()
    levels = [int(p) for p in args.parallel.split(",")]
    server, url = start_server(args.latency)
    root = Path(tempfile.mkdtemp(prefix="kag-bench-throughput-", dir=os.environ.get("TMPDIR")))
    try:
        make_project(root, url, args.tasks)
        print(
            f"{args.tasks} tasks, server latency {args.latency * 1000:.0f} ms, one setup (OpenAI API), "
            f"cpus={os.cpu_count()}, client: aiohttp {_aiohttp_version()}"
        )
        print(
            f"{'parallel':>8} {'wall s':>8} {'ideal s':>8} {'floor s':>8} {'tasks/s':>8} {'speed-up':>9} "
            f"{'of ideal':>9} {'overhead/task':>14} {'vs floor':>9}"
        )
        walls: dict[int, float] = {}
        failed = False
        floor_overhead = 0.0
        for p in levels:
            floor = run_floor(url, args.tasks, p)
            wall, done = run_once(root, p)
            walls[p] = wall
            ideal = done * args.latency / p
            overhead_ms = (wall - ideal) * p / done * 1000
            beyond_floor_ms = (wall - floor) * p / done * 1000
            base = walls.get(1)
            speedup = f"{base / wall:>9.2f}" if base else f"{'-':>9}"
            share = f"{base / wall / p:>9.1%}" if base else f"{'-':>9}"
            print(
                f"{p:>8} {wall:>8.2f} {ideal:>8.2f} {floor:>8.2f} {done / wall:>8.1f} {speedup} "
                f"{share} {overhead_ms:>11.2f} ms {beyond_floor_ms:>6.2f} ms",
                flush=True,
            )
            if p == 1:
                floor_overhead = beyond_floor_ms
                failed = failed or beyond_floor_ms > TARGET_OVERHEAD_MS
        top = max(levels)
        if 1 in walls and top > 1:
            share = walls[1] / walls[top] / top
            verdict = "ok" if share >= TARGET_EFFICIENCY else "BELOW TARGET"
            print(
                f"speed-up at {top}: {walls[1] / walls[top]:.2f}x = {share:.1%} of ideal "
                f"(target >= {TARGET_EFFICIENCY:.0%}): {verdict}"
            )
            failed = failed or share < TARGET_EFFICIENCY
        if 1 in walls:
            overhead = (walls[1] - args.tasks * args.latency) / args.tasks * 1000
            verdict = "ok" if floor_overhead <= TARGET_OVERHEAD_MS else "ABOVE TARGET"
            print(
                f"overhead per task at --parallel 1: {floor_overhead:.2f} ms beyond the bare client"
                f" (target <= {TARGET_OVERHEAD_MS:.0f} ms): {verdict}; {overhead:.2f} ms beyond the ideal"
            )
        sys.exit(1 if failed else 0)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
