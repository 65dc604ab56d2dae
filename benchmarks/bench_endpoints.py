"""Throughput of `kag benchmark` with one provider spread over several model servers.

    python benchmarks/bench_endpoints.py [--tasks 800] [--parallel 32] [--servers 4]
                                         [--limit 8] [--latency 0.1]

Anchor: ``ideal = tasks * latency / min(parallel, servers * limit)``, the wall time if every
slot of every server were busy all the time (800 * 0.1 / 32 = 2.5 s by default). The
servers (aiohttp.web, each working on at most ``limit`` requests at a time, the rest
queueing, every reply after ``latency`` s) run in their own process; the client is the
provider's pattern: one aiohttp session with keep-alive, one ``asyncio.timeout`` per
request, each task one ``call_with_retries`` around ``EndpointPool.run``. The URL list
holds one dead URL (nothing listens there) besides the live ones.

The headline run is the real ``kag benchmark`` code path in this process: a configuration
whose provider ``url`` lists the five URLs, ``plan_benchmark`` (fingerprints, file checks)
then ``run_benchmark`` (prompt rendering, the OpenAI client with its ``EndpointPool``, the
retry policy, result files written atomically with fsync); planning is outside the timed
part, as in ``bench_throughput.py``. Then the pool alone (no files) for comparison. Reported: wall time,
its ratio to the ideal (target <= 1.3) and to a floor (the same client with each slot
pinned to one live server and no pool: what this machine allows), the attempts the tasks needed (target: one each,
the dead URL costs no task), and requests and failures per endpoint. A second run without
the dead URL shows what it costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_RATIO = 1.3


# ---------------------------------------------------------------- the servers (own process)


async def _serve(count: int, limit: int, latency: float) -> None:
    from aiohttp import web

    runners = []
    ports = []
    for _ in range(count):
        slots = asyncio.Semaphore(limit)

        async def chat(request: web.Request, slots: asyncio.Semaphore = slots) -> web.Response:
            body = await request.json()
            async with slots:
                await asyncio.sleep(latency)
            reply = {"choices": [{"message": {"content": body["messages"][0]["content"]}}]}
            return web.Response(body=orjson.dumps(reply), content_type="application/json")

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
        runners.append(runner)
        ports.append(runner.addresses[0][1])
    print(" ".join(str(p) for p in ports), flush=True)
    await asyncio.Event().wait()


def start_servers(count: int, limit: int, latency: float) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(count), "--limit", str(limit), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    ports = process.stdout.readline().split()
    if len(ports) != count:
        process.kill()
        raise SystemExit(f"the servers did not start (got {ports!r})")
    return process, [f"http://127.0.0.1:{port}/v1" for port in ports]


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


# ---------------------------------------------------------------- the client


async def _drive(
    urls: list[str], tasks: int, parallel: int, timeout: float, pinned: bool
) -> tuple[float, int, Any]:
    import aiohttp

    from kag.generation.endpoints import EndpointFailure, EndpointPool
    from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries

    pool = EndpointPool(urls, label="provider 'bench'")
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=parallel, limit_per_host=0, keepalive_timeout=4.0),
        headers={"content-type": "application/json"},
        timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None),
        trust_env=False,
    )

    def request(i: int) -> Any:
        body = orjson.dumps(
            {"model": "m", "temperature": 0.0, "messages": [{"role": "user", "content": f"question {i}"}]}
        )

        async def send(base: str) -> str:
            url = f"{base}/chat/completions"
            try:
                async with asyncio.timeout(timeout):
                    async with session.post(url, data=body, allow_redirects=False) as response:
                        content = await response.read()
            except TimeoutError:
                raise EndpointFailure(f"no complete reply from {url} within {timeout:g} s") from None
            except (aiohttp.ClientConnectorError, aiohttp.ClientConnectionResetError) as exc:
                raise EndpointFailure(f"cannot connect to {url}: {exc}") from None
            except (aiohttp.ClientError, OSError) as exc:
                raise EndpointFailure(f"connection to {url} failed: {exc}", resend=False) from None
            if response.status >= 400:
                raise ProviderError(f"HTTP {response.status} from {url}", transient=response.status >= 500)
            return str(orjson.loads(content)["choices"][0]["message"]["content"])

        return send

    pending = iter(range(tasks))
    attempts = 0

    async def worker(slot: int) -> None:
        nonlocal attempts
        for i in pending:
            send = request(i)
            if pinned:  # the floor: this slot's own server, no pool
                call = lambda send=send: send(urls[slot % len(urls)])
            else:
                call = lambda send=send: pool.run(send)
            text, used = await call_with_retries(call, RetryPolicy())
            assert text == f"question {i}"
            attempts += used

    started = time.perf_counter()
    await asyncio.gather(*(worker(slot) for slot in range(parallel)))
    wall = time.perf_counter() - started
    await session.close()
    return wall, attempts, pool.stats()


def run_once(urls: list[str], tasks: int, parallel: int, pinned: bool = False) -> tuple[float, int, Any]:
    return asyncio.run(_drive(urls, tasks, parallel, 60.0, pinned))


class _Attempts:
    """A runner reporter that adds up the attempts of the finished tasks."""

    def __init__(self) -> None:
        self.attempts = 0

    def task_done(self, outcome: Any) -> None:
        self.attempts += outcome.attempts

    def retrying(self, notice: Any) -> None:
        pass


def run_kag(urls: list[str], tasks: int, parallel: int, root: Path) -> tuple[float, int, int, Any]:
    """``kag benchmark`` over ``tasks`` questions: (wall, ok tasks, attempts, endpoint stats)."""
    from kag.datasets import load_datasets
    from kag.generation.config import load_benchmark, load_config
    from kag.generation.generator import RunOptions
    from kag.generation.plan import PlanOptions, plan_benchmark
    from kag.generation.runner import run_benchmark

    listed = ", ".join(f'"{url}"' for url in urls)
    (root / "config.toml").write_text(f'[providers.fake]\ntype = "OpenAI"\nkey = ""\nurl = [{listed}]\n')
    (root / "prompt.md").write_text("Question: {{INPUT}}\nAnswer.\n")
    (root / "bench.toml").write_text(
        "[s]\nprovider = 'fake'\nmodel = 'm'\ntemperature = 0.0\n"
        "system_prompt = '''{{ file('prompt.md') }}'''\n"
    )
    questions = {
        str(i): {"input": f"question {i}", "output": {"type": "MCQ", "options": {"a": "y"}, "answer": "a"}}
        for i in range(tasks)
    }
    (root / "datasets.json").write_bytes(orjson.dumps({"bench": questions}))
    config = load_config(root / "config.toml")
    bench = load_benchmark(root / "bench.toml", config)
    data = load_datasets(root / "datasets.json")
    plan = plan_benchmark(config, bench, data, PlanOptions(output=root / "out"))
    reporter = _Attempts()
    options = RunOptions(parallel=parallel, timeout=60.0)
    started = time.perf_counter()
    summary = run_benchmark(plan, config, options, reporter, handle_sigint=False)
    wall = time.perf_counter() - started
    return wall, summary.ok, reporter.attempts, summary.endpoints.get("fake", ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=800)
    parser.add_argument("--parallel", type=int, default=32)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.limit, args.latency))
        return
    server, live = start_servers(args.servers, args.limit, args.latency)
    try:
        ideal = args.tasks * args.latency / min(args.parallel, args.servers * args.limit)
        print(
            f"{args.tasks} tasks at parallel {args.parallel}, {args.servers} servers x {args.limit} slots, "
            f"latency {args.latency * 1000:.0f} ms: ideal {ideal:.2f} s"
        )
        floor, _, _ = run_once(live, args.tasks, args.parallel, pinned=True)
        print(
            f"floor (each slot pinned to one live server, no pool): wall {floor:.2f} s = "
            f"{floor / ideal:.2f} x ideal"
        )
        with_dead = live[:2] + [dead_url()] + live[2:]
        with tempfile.TemporaryDirectory(prefix="kag-bench-endpoints-") as folder:
            wall, ok, attempts, stats = run_kag(with_dead, args.tasks, args.parallel, Path(folder))
        ratio = wall / ideal
        verdict = "ok" if ratio <= TARGET_RATIO and ok == attempts == args.tasks else "BELOW TARGET"
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"kag benchmark, one dead URL in the list: wall {wall:.2f} s = {ratio:.2f} x ideal "
            f"(target <= {TARGET_RATIO}), ({wall / floor:.2f} x floor), {ok} ok, attempts {attempts} "
            f"for {args.tasks} tasks: {verdict}   [load average {load}, cpus {os.cpu_count()}]"
        )
        for s in stats:
            print(f"    {s.url:<32} requests {s.requests:>4}  failures {s.failures:>3}")
        failed = verdict != "ok"
        for title, urls in (
            ("pool alone, with one dead URL", with_dead),
            ("pool alone, live URLs only", live),
        ):
            wall, attempts, stats = run_once(urls, args.tasks, args.parallel)
            ratio = wall / ideal
            verdict = "ok" if ratio <= TARGET_RATIO and attempts == args.tasks else "BELOW TARGET"
            print(
                f"{title}: wall {wall:.2f} s = {ratio:.2f} x ideal (target <= {TARGET_RATIO}), "
                f"({wall / floor:.2f} x floor), attempts {attempts} for {args.tasks} tasks: {verdict}"
            )
            for s in stats:
                print(f"    {s.url:<32} requests {s.requests:>4}  failures {s.failures:>3}")
            failed = failed or verdict != "ok"
        sys.exit(1 if failed else 0)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
