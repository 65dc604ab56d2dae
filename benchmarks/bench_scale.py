"""Speed and memory of `kag stats`, `kag stats find` and `kag view` on trees of many small
result files (100,000 and 1,000,000), each against an anchor measured in the same run.

    python benchmarks/bench_scale.py [--dir .bench/scale] [--sizes 100k,1m] [--repeat 3]
                                     [--requests 40] [--only stats,find,view] [--quick]
                                     [--json FILE]

The trees come from ``benchmarks/make_tree.py``'s generator with small KAG files: 10
setups x 10,000 questions (100k files, about 650 MB on disk) and 10 x 100,000 (1M files,
about 6.5 GB); native files about 0.9 KB, KAG files about 6 KB (a 24-line median subgraph,
repeated in the prompt, and a 64-d query embedding). Each is generated once, under
``DIR/tree-100k`` and ``DIR/tree-1m``, and reused; a ``DIR/tree-….lock`` directory (atomic
mkdir, holding the owner's pid) makes a second process wait for the first one's tree, and
``.complete`` inside the tree marks it finished. ``--quick`` uses a 200-file tree
``DIR/tree-quick`` instead (a smoke test of this script: its figures mean nothing).

Every command runs as a subprocess, as a user calls it, its max RSS read from ``wait4``
(the largest process of the run: the command itself or one of its workers). Linux counts
in it the process a command was forked from, up to its exec: the commands are started by
a small process of their own (about 11 MB, the floor of every RSS figure), never by this
script, whose memory would otherwise show through. Caches are
warm (one unmeasured ``cat`` of the whole tree first); then ``--repeat`` rounds, each
running every command once, back to back, so a burst of load hits all of them. A ratio is
the median over the rounds of kag's wall time over its anchor's in the same round.

- ``kag stats -d datasets.json -r results --format json`` against ``cat`` of every file
  (``find results -name '*.json' -print0 | xargs -0 cat > /dev/null``); target <= 1.1x,
  and RSS at 1M <= 1.2x RSS at 100k;
- ``kag stats find PATTERN -r results -l`` for an exact answer (``^b$``, against rg's
  literal ``-F '"result": "b"'``) and an alternation (``B|C``, the same pattern for rg)
  against ``rg -l --no-config --no-ignore -g '*.json' PATTERN results``
  (ripgrep scans the raw JSON, kag parses each file and matches the trimmed response);
  target <= 2.0x;
- the max RSS of loading the datasets file alone as ``kag stats`` loads it
  (``kag.datasets.load_datasets(path, texts=False)``, in a process of its own): the part of
  ``kag stats``' memory that is the per-question table of the questions' keys, which grows
  with the number of questions;
- ``kag view -d datasets.json -r results --no-open --port 0 --index FILE``, once per size and
  round: the index build (from start to the address printed) against the mean of a ``kag
  stats`` run just before it and one just after, the median of the rounds' ratios, target <=
  1.5x; and, the worst round's: the first overview (the first ``/``), target <= 1 s; the first
  ``/api/setups`` (it waits for the comparisons); the p95 of each page and API call
  (``--requests`` calls each after one warm-up call), target <= 100 ms; the server's
  resident memory while it serves (VmRSS) and its peak (VmHWM), target <= 300 MB at
  100k and <= 600 MB at 1M; the index with its write-ahead log as a share of the tree's
  bytes (apparent size; its disk usage in brackets), target <= 10%;
- with both sizes, the time growth from 100k to 1M of each command (median wall at 1M
  over median wall at 100k), target <= 11x.

``--only`` measures some of the three commands (``stats``, ``find``, ``view``; all by default):
the others' lines are left out of the report. ``--json FILE`` also writes the figures as a
JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_tree import compile_kag, ensure_tree

REPO = Path(__file__).resolve().parent.parent
SETUPS = 10
QUESTIONS = {"quick": 20, "100k": 10_000, "1m": 100_000}
SMALL_FILES = {"graph_lines": 24, "dims": 64}  # a KAG file of about 6 KB
#: kag's pattern (matched against the trimmed response) and rg's arguments (against the raw
#: JSON) for the same files: an exact answer, and an alternation.
FIND_CASES: dict[str, tuple[str, list[str]]] = {
    "find literal": ("^b$", ["-F", '"result": "b"']),
    "find alternation": ("B|C", ["B|C"]),
}
TARGETS = {"stats": 1.1, "find": 2.0, "view build": 1.5, "overview": 1.0, "p95": 0.1, "index": 0.10}
RSS_TARGET_MB = {"100k": 300, "1m": 600}
GROWTH_TARGET = 11.0
RSS_GROWTH_TARGET = 1.2


@dataclass(frozen=True)
class Run:
    """One run of a command: wall and CPU seconds, max RSS (MB), exit code, stdout."""

    wall: float
    cpu: float
    rss_mb: float
    code: int
    stdout: bytes


# Every measured command is started by this small process, started first: a child's max
# RSS (wait4) counts the memory of the process it was forked from, up to its exec, so a
# command started by this script itself would show at least this script's own peak.
_SPAWNER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    command, cwd, out, err = json.loads(line)
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps([wall, cpu, usage.ru_maxrss, proc.returncode]), flush=True)
"""
_spawner: subprocess.Popen[str] | None = None


def start_spawner() -> None:
    global _spawner
    _spawner = subprocess.Popen(
        [sys.executable, "-S", "-c", _SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def run(command: list[str], cwd: Path) -> Run:
    """Run ``command`` to its end; its resources from ``wait4`` (children included)."""
    if _spawner is None:
        start_spawner()
    assert _spawner is not None and _spawner.stdin is not None and _spawner.stdout is not None
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        _spawner.stdin.write(json.dumps([command, str(cwd), str(out), str(err)]) + "\n")
        _spawner.stdin.flush()
        wall, cpu, rss_kb, code = json.loads(_spawner.stdout.readline())
        if code not in (0, 1):
            sys.exit(f"bench: {' '.join(command)} failed ({code}): {err.read_text()[-500:]}")
        return Run(wall, cpu, rss_kb / 1024, code, out.read_bytes())


def tree_bytes(tree: Path) -> tuple[int, int]:
    """(apparent bytes, disk usage) of the result files, counted once and kept in ``.bytes``."""
    cache = tree / ".bytes"
    if cache.exists():
        apparent, disk = cache.read_text().split()
        return int(apparent), int(disk)
    apparent = disk = 0
    stack = [str(tree / "results")]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    info = entry.stat(follow_symlinks=False)
                    apparent += info.st_size
                    disk += info.st_blocks * 512
    part = cache.with_name(f".bytes.{os.getpid()}")
    part.write_text(f"{apparent} {disk}\n")
    part.replace(cache)
    return apparent, disk


# ---------------------------------------------------------------- kag view as a user runs it


def _get(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
    return time.perf_counter() - started, body


def _proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found


def _index_bytes(index: Path) -> int:
    return sum(p.stat().st_size for p in index.parent.glob(index.name + "*"))


def _reap(pid: int, patience: float = 60.0) -> int:
    """Wait for ``pid`` (killed after ``patience`` seconds): its status."""
    deadline = time.monotonic() + patience
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.05)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def measure_view(tree: Path, requests: int) -> dict[str, Any]:
    """The view of ``tree`` served by ``kag view`` in a process of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index.sqlite"
        command = [sys.executable, "-m", "kag", "view", "-d", "datasets.json", "-r", "results"]
        command += ["--no-open", "--port", "0", "--index", str(index)]
        err = open(Path(tmp) / "stderr", "wb")  # noqa: SIM115 - closed below, after the process
        started = time.perf_counter()
        # Ctrl-C stops it, as a user stops it: SIGINT at its default even when this script
        # runs in the background (where a shell starts it ignored, and children inherit that).
        proc = subprocess.Popen(
            command,
            cwd=tree,
            stdout=subprocess.PIPE,
            stderr=err,
            preexec_fn=_default_sigint,  # noqa: PLW1509 - no thread here
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().decode().strip()
            build = time.perf_counter() - started
            if not url.startswith("http"):
                proc.wait()
                sys.exit(f"bench: kag view failed: {(Path(tmp) / 'stderr').read_text()[-500:]}")
            overview, _ = _get(url)
            compared, _ = _get(url + "api/setups")
            grid = json.loads(_get(url + "api/questions")[1])
            setups, first = grid["setups"], grid["rows"][0]
            question = f"{first['dataset']}/{first['question']}"
            paths = {
                "/": "",
                "/questions": "questions",
                "/questions?flip": f"questions?flip={setups[0]},{setups[-1]}",
                "/questions?disagree=1&page=3": "questions?disagree=1&page=3",
                "/q/D/Q": f"q/{question}",
                "/api/setups": "api/setups",
                "/api/questions?outcome=wrong": "api/questions?outcome=wrong&page=2",
                "/api/question/D/Q": f"api/question/{question}",
            }
            p95 = {}
            for name, path in paths.items():
                _get(url + path)  # warm-up: whatever the server keeps of it
                times = sorted(_get(url + path)[0] for _ in range(requests))
                p95[name] = statistics.quantiles(times, n=20)[18] if len(times) >= 2 else times[0]
            memory = _proc_status(proc.pid)
            index_size = _index_bytes(index)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.returncode = os.waitstatus_to_exitcode(_reap(proc.pid))
            err.close()
        return {
            "build": build,
            "first_overview": overview,
            "first_api_setups": compared,
            "p95": p95,
            "rss_mb": memory.get("VmRSS", float("nan")),
            # Its own high-water mark: wait4's would count this script's memory too.
            "peak_rss_mb": memory.get("VmHWM", float("nan")),
            "index_bytes": index_size,
            "index_bytes_closed": _index_bytes(index),
        }


# ---------------------------------------------------------------- one size


def measure_size(tree: Path, repeat: int, requests: int, rg: str, only: set[str]) -> dict[str, object]:
    """Every figure of one tree (of the commands in ``only``): kag's runs and their
    anchors', round by round."""
    kag = [sys.executable, "-m", "kag"]
    rg_args = ["--no-config", "--no-ignore", "-g", "*.json"]
    stats = [*kag, "stats", "-d", "datasets.json", "-r", "results", "--format", "json"]
    cat = ["sh", "-c", "find results -type f -name '*.json' -print0 | xargs -0 cat > /dev/null"]
    commands: dict[str, list[str]] = {"stats": stats, "cat": cat} if "stats" in only else {}
    anchors = {"stats": "cat"} if "stats" in only else {}
    for name, (pattern, rg_pattern) in FIND_CASES.items() if "find" in only else ():
        commands[name] = [*kag, "stats", "find", pattern, "-r", "results", "-l"]
        commands[f"rg {name}"] = [rg, "-l", *rg_args, *rg_pattern, "results"]
        anchors[name] = f"rg {name}"
    run(cat, tree)  # warm-up: the page cache
    runs: dict[str, list[Run]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            runs[name].append(run(command, tree))
    figures: dict[str, object] = {}
    for name, anchor in anchors.items():
        mine, theirs = runs[name], runs[anchor]
        missing = _unlisted(mine[0].stdout, theirs[0].stdout) if name in FIND_CASES else 0
        if missing:
            sys.exit(f"bench: kag {name} listed {missing} file(s) that rg did not")
        figures[name] = {
            "wall": statistics.median(r.wall for r in mine),
            "cpu": statistics.median(r.cpu for r in mine),
            "rss_mb": max(r.rss_mb for r in mine),
            "anchor": anchor,
            "anchor_wall": statistics.median(r.wall for r in theirs),
            "anchor_rss_mb": max(r.rss_mb for r in theirs),
            "ratio": statistics.median(m.wall / t.wall for m, t in zip(mine, theirs, strict=True)),
            "matched": len(mine[0].stdout.splitlines()) if name in FIND_CASES else None,
        }
    # The datasets file alone, loaded as kag stats loads it: the per-question table under its memory.
    load = [
        sys.executable,
        "-c",
        "from kag.datasets import load_datasets; load_datasets('datasets.json', texts=False)",
    ]
    figures["datasets"] = {"rss_mb": run(load, tree).rss_mb}
    figures["tree"] = _tree_figures(tree)
    if "view" in only:
        figures["view"] = _view_figures(tree, requests, stats, repeat)
    return figures


def _tree_figures(tree: Path) -> dict[str, int]:
    apparent, disk = tree_bytes(tree)
    return {"files": SETUPS * QUESTIONS[tree.name.removeprefix("tree-")], "bytes": apparent, "disk": disk}


def _view_figures(tree: Path, requests: int, stats: list[str], rounds: int) -> dict[str, Any]:
    """The view's figures, over ``rounds`` first builds. Each build's anchor is a kag stats
    run just before it and one just after, so that both see the same load; the build ratio
    is the median of the rounds' ratios, every other figure the worst round's."""
    views: list[dict[str, Any]] = []
    for _ in range(rounds):
        before = run(stats, tree)
        view = measure_view(tree, requests)
        after = run(stats, tree)
        view["stats_wall"] = (before.wall + after.wall) / 2
        view["build_ratio"] = view["build"] / view["stats_wall"]
        views.append(view)
    merged: dict[str, Any] = {
        "rounds": [v["build_ratio"] for v in views],
        "build": statistics.median(v["build"] for v in views),
        "stats_wall": statistics.median(v["stats_wall"] for v in views),
        "build_ratio": statistics.median(v["build_ratio"] for v in views),
        "p95": {name: max(v["p95"][name] for v in views) for name in views[0]["p95"]},
    }
    for name in (
        "first_overview",
        "first_api_setups",
        "rss_mb",
        "peak_rss_mb",
        "index_bytes",
        "index_bytes_closed",
    ):
        merged[name] = max(v[name] for v in views)
    apparent, disk = tree_bytes(tree)
    merged["index_share"] = merged["index_bytes"] / apparent
    merged["index_share_disk"] = merged["index_bytes"] / disk
    return merged


def _unlisted(kag_out: bytes, rg_out: bytes) -> int:
    """How many files kag listed that rg did not: every response kag matched is in its
    file's raw JSON, so rg must list that file."""
    listed = set(rg_out.splitlines())
    return sum(1 for line in kag_out.splitlines() if line not in listed)


# ---------------------------------------------------------------- the report


def _verdict(value: float, target: float, unit: str = "") -> str:
    return f"(target <= {target:g}{unit}: {'meets' if value <= target else 'MISSES'})"


def report(size: str, figures: dict[str, object]) -> list[str]:
    tree = figures["tree"]
    lines = [
        f"== {size}: {tree['files']:,} files, {tree['bytes'] / 1e6:,.0f} MB ({tree['disk'] / 1e6:,.0f} MB on disk)"
    ]  # type: ignore[index]
    for name in (n for n in ("stats", *FIND_CASES) if n in figures):
        f: dict[str, object] = figures[name]  # type: ignore[assignment]
        target = TARGETS["stats" if name == "stats" else "find"]
        matched = f" {f['matched']:,} files listed," if f["matched"] is not None else ""
        lines.append(
            f"{name:18} kag {f['wall']:7.2f} s ({f['cpu']:6.1f} s CPU, {f['rss_mb']:5.0f} MB),{matched} "
            f"{f['anchor']} {f['anchor_wall']:7.2f} s: ratio {f['ratio']:.2f} {_verdict(f['ratio'], target)}"  # type: ignore[arg-type]
        )
    stats_rss = f"{figures['stats']['rss_mb']:.0f} MB; " if "stats" in figures else ""  # type: ignore[index]
    lines.append(
        f"{'stats RSS':18} {stats_rss}the datasets file alone, loaded: "
        f"{figures['datasets']['rss_mb']:.0f} MB ({QUESTIONS[size]:,} questions)"  # type: ignore[index]
    )
    if "view" not in figures:
        return lines
    v: dict[str, Any] = figures["view"]  # type: ignore[assignment]
    lines.append(
        f"{'view build':18} {v['build']:7.2f} s, kag stats {v['stats_wall']:.2f} s (just before and after): "
        f"ratio {v['build_ratio']:.2f} {_verdict(v['build_ratio'], TARGETS['view build'])}"
        + (
            f"; median of {len(v['rounds'])} builds: " + ", ".join(f"{r:.2f}" for r in v["rounds"])
            if len(v["rounds"]) > 1
            else ""
        )
    )
    lines.append(
        f"{'view overview':18} first / {v['first_overview']:.2f} s "
        f"{_verdict(v['first_overview'], TARGETS['overview'], ' s')}; first /api/setups {v['first_api_setups']:.2f} s"
    )
    worst = max(v["p95"].items(), key=lambda item: item[1])
    lines.append(
        f"{'view p95':18} worst {worst[1] * 1000:.0f} ms ({worst[0]}) {_verdict(worst[1] * 1000, TARGETS['p95'] * 1000, ' ms')}; "
        + ", ".join(f"{name} {t * 1000:.0f}" for name, t in v["p95"].items())
    )
    rss_target = RSS_TARGET_MB.get(size, RSS_TARGET_MB["100k"])
    lines.append(
        f"{'view server RSS':18} {v['rss_mb']:.0f} MB serving, {v['peak_rss_mb']:.0f} MB peak "
        f"{_verdict(v['peak_rss_mb'], rss_target, ' MB')}"
    )
    lines.append(
        f"{'view index':18} {v['index_bytes'] / 1e6:.1f} MB with its log ({v['index_bytes_closed'] / 1e6:.1f} MB "
        f"once closed): {v['index_share']:.1%} of the tree ({v['index_share_disk']:.1%} of its disk usage) "
        f"{_verdict(v['index_share'] * 100, TARGETS['index'] * 100, '%')}"
    )
    return lines


def growth(small: dict[str, object], large: dict[str, object]) -> list[str]:
    lines = ["== growth 100k -> 1m"]
    for name in (n for n in ("stats", *FIND_CASES) if n in small):
        ratio = large[name]["wall"] / small[name]["wall"]  # type: ignore[index]
        lines.append(f"{name:18} time x{ratio:.2f} {_verdict(ratio, GROWTH_TARGET)}")
    if "view" in small:
        ratio = large["view"]["build"] / small["view"]["build"]  # type: ignore[index]
        lines.append(f"{'view build':18} time x{ratio:.2f} {_verdict(ratio, GROWTH_TARGET)}")
    if "stats" in small:
        rss = large["stats"]["rss_mb"] / small["stats"]["rss_mb"]  # type: ignore[index]
        lines.append(f"{'stats RSS':18} x{rss:.2f} {_verdict(rss, RSS_GROWTH_TARGET)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, default=REPO / ".bench" / "scale")
    parser.add_argument("--sizes", default="100k,1m", help="100k, 1m or both, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--only", default="stats,find,view", help="stats, find and/or view, comma-separated")
    parser.add_argument("--quick", action="store_true", help="a 200-file tree: a smoke test")
    parser.add_argument("--prepare-only", action="store_true", help="generate the trees and stop")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    sizes = ["quick"] if args.quick else [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in QUESTIONS]
    if unknown or not sizes:
        parser.error(f"--sizes takes 100k and/or 1m (got {args.sizes!r})")
    only = {c.strip().lower() for c in args.only.split(",") if c.strip()}
    if not only or only - {"stats", "find", "view"}:
        parser.error(f"--only takes stats, find and/or view (got {args.only!r})")
    start_spawner()  # while this process is small
    rg = shutil.which("rg")
    if rg is None:
        sys.exit("bench: ripgrep is missing (Debian: apt-get install -y ripgrep)")
    trees = {
        size: ensure_tree(args.dir / f"tree-{size}", SETUPS, QUESTIONS[size], **SMALL_FILES) for size in sizes
    }
    if args.prepare_only:
        return
    compile_kag()
    version = subprocess.run([rg, "--version"], capture_output=True, text=True, check=True).stdout.split(
        "\n"
    )[0]
    print(f"bench_scale: {os.cpu_count()} CPUs, {version}, {args.repeat} round(s), load average {_load()}")
    results: dict[str, object] = {}
    for size, tree in trees.items():
        figures = measure_size(tree, args.repeat, args.requests, rg, only)
        figures["load"] = os.getloadavg()[0]
        results[size] = figures
        for line in report(size, figures):
            print(line, flush=True)
    if "100k" in results and "1m" in results:
        for line in growth(results["100k"], results["1m"]):  # type: ignore[arg-type]
            print(line)
    print(f"load average now {_load()}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=lambda o: asdict(o)))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
