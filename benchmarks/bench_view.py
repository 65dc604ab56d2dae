"""Speed and memory of `kag view` on the 100,000-file result tree of make_tree.py.

    python benchmarks/bench_view.py [--tree .bench/tree-100k] [--setups 10] [--questions 10000] [--requests 40]

Anchor: ``kag stats -d datasets.json -r results`` on the same tree (a subprocess, warm
cache, best of two). Measured in this process:

- the first index build (a new index file: every file read, then the pages' snapshot
  built), target <= 1.5x kag stats;
- a rescan with nothing changed (every file stat'ed, none read, the pages' data kept),
  target <= 0.25x kag stats;
- the first overview (the first ``/`` after the build: the tables, while the comparisons
  are computed in their own thread), target <= 1 s, and how long after it the comparisons
  are there;
- the p95 latency of every page and API call, answered by the server on 127.0.0.1
  (``--requests`` calls each, after one warm-up call), target <= 100 ms;
- the resident memory of the process serving them (VmRSS), target <= 300 MB.

A smaller tree (``--questions 1000``) gives the same ratios on a shared machine in minutes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from make_tree import compile_kag, ensure_tree

from kag.datasets import load_datasets
from kag.render.view import ViewApp
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.server import Server

REPO = Path(__file__).resolve().parent.parent


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _stats_secs(tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of the faster of two runs of kag stats."""
    kag = [sys.executable, "-m", "kag"]
    cmd = [*kag, "stats", "-d", str(tree / "datasets.json"), "-r", str(tree / "results")]
    best = (float("inf"), float("inf"))
    for _ in range(2):
        started, cpu = time.perf_counter(), _cpu()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        best = min(best, (time.perf_counter() - started, _cpu() - cpu))
    return best


FIRST: dict[str, float] = {}  # the first call of each address: nothing of it kept yet


def _p95(url: str, n: int) -> float:
    started = time.perf_counter()
    urllib.request.urlopen(url).read()
    FIRST[url] = time.perf_counter() - started
    times = []
    for _ in range(n):
        started = time.perf_counter()
        with urllib.request.urlopen(url) as r:
            r.read()
        times.append(time.perf_counter() - started)
    return statistics.quantiles(times, n=20)[18] if len(times) >= 2 else times[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--setups", type=int, default=10)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    tree = args.tree or REPO / ".bench" / (
        "tree-100k" if args.questions == 10_000 else f"tree-{args.questions}q"
    )
    ensure_tree(tree, args.setups, args.questions)
    compile_kag()
    stats, stats_cpu = _stats_secs(tree)
    datasets = load_datasets(tree / "datasets.json", texts=False)  # as `kag view` loads it (no judge)
    with tempfile.TemporaryDirectory() as tmp:
        started, cpu = time.perf_counter(), _cpu()
        index = Index(
            Path(tmp) / "index.sqlite", datasets, [Tree("", str((tree / "results").resolve()))], "", None
        )
        view = View(index, scan=True)
        build, build_cpu = time.perf_counter() - started, _cpu() - cpu
        started = time.perf_counter()
        view.reload()
        rescan = time.perf_counter() - started
        server = Server(ViewApp(view, "bench"), "127.0.0.1", 0, lambda exc: print(f"error: {exc!r}"))
        server.start()
        setups = view.snapshot.setups
        first = view.snapshot.order[0]
        started = time.perf_counter()
        urllib.request.urlopen(server.url).read()
        first_overview = time.perf_counter() - started
        view.analysis(None).done.wait()
        compared = time.perf_counter() - started
        urls = {
            "/": "",
            "/questions": "questions",
            "/questions?flip": f"questions?flip={setups[0]},{setups[-1]}",
            "/questions?disagree=1&page=3": "questions?disagree=1&page=3",
            "/q/D/Q": f"q/{first[0]}/{first[1]}",
            "/api/setups": "api/setups",
            "/api/questions?outcome=wrong": "api/questions?outcome=wrong&page=2",
            "/api/question/D/Q": f"api/question/{first[0]}/{first[1]}",
        }
        latencies = {name: _p95(server.url + path, args.requests) for name, path in urls.items()}
        # A question's page opened for the first time (its graphs not laid out yet), p95 over others.
        fresh = []
        for dataset, question in view.snapshot.order[1 : 1 + args.requests]:
            started = time.perf_counter()
            with urllib.request.urlopen(f"{server.url}q/{dataset}/{question}") as r:
                r.read()
            fresh.append(time.perf_counter() - started)
        latencies["/q/D/Q, first open"] = statistics.quantiles(fresh, n=20)[18]
        rss = _rss_mb()
        server.close()
        files = index.db.execute("SELECT count(*) FROM files").fetchone()[0]
        index.close()
    print(f"tree: {tree} ({files} files), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"kag stats:            {stats:7.2f} s")
    print(f"kag stats CPU:        {stats_cpu:7.2f} s")
    print(f"first index build:    {build:7.2f} s  ratio {build / stats:.2f}  (target <= 1.5)")
    print(f"first index build CPU:{build_cpu:7.2f} s  ratio {build_cpu / stats_cpu:.2f}")
    print(f"rescan, no change:    {rescan:7.2f} s  ratio {rescan / stats:.2f}  (target <= 0.25)")
    print(f"first overview:       {first_overview:7.2f} s  (target <= 1)")
    print(f"comparisons there:    {compared:7.2f} s  after the first overview's request")
    for name, p95 in latencies.items():
        first = FIRST.get(server.url + urls[name]) if name in urls else None
        once = f"  first call {first * 1000:7.1f} ms" if first is not None else ""
        print(f"p95 {name:32s} {p95 * 1000:7.1f} ms  (target <= 100){once}")
    print(f"server RSS:           {rss:7.0f} MB  (target <= 300)")


if __name__ == "__main__":
    main()
