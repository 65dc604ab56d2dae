"""Speed of `kag stats find` against ripgrep on the same 100,000-file result tree.

    python benchmarks/bench_find.py [--tree .bench/tree-100k] [--repeat 5] [--cold] [--prepare-only]

Anchors: ``rg`` (ripgrep) over the same files, in one run, for a literal word and for a
regex with alternation (``^C$`` and ``B|C``). rg does less work than kag: it scans the raw JSON bytes (the
word may sit anywhere in the file, the query embedding, the prompt and the rendered
subgraph included), while kag parses every file as a result, validates its shape, and
matches only the trimmed ``ok.result``. Two rg runs per case:

- ``rg -l --no-config --no-ignore -g "*.json" PATTERN results`` (files-with-matches: it
  stops reading a file at its first hit), the headline anchor, target kag/rg <= 2;
- ``rg -c ...`` (a count per file: it reads every file fully), as before.

Neither renders lines, which would make the anchor slower than it needs to be. kag is run as a subprocess,
``kag stats find PATTERN -r results --format json`` with its default workers, output
to a pipe, exactly as a user would call it (kag's modules are compiled to bytecode first,
as an installed copy is). Caches are warm for both (one unmeasured
warm-up pass each); kag and rg then run back to back ``--repeat`` times. With ``--cold``
every run starts with an empty page cache instead (``sync`` and ``3`` written to
``/proc/sys/vm/drop_caches``, which needs root: the tree, Python, kag's modules and rg are
all read from the disk again) and there is no warm-up. The headline
ratio is the median over those pairs of kag wall / rg -l wall (steady on a shared
machine); best-vs-best wall and CPU-time (user + system, children included) ratios are
printed too, for both anchors.

The tree comes from ``benchmarks/make_tree.py`` (10 setups x 10,000 questions, its KAG
files carrying a rendered subgraph like the real ones, about 3.3 GB) under ``.bench/tree-100k``; it is generated once and reused. Another process may
generate the same tree at the same time: a ``.bench/tree-100k.lock`` directory (atomic
mkdir, holding the owner's pid) serialises generation, and ``.complete`` inside the tree
marks it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_tree import compile_kag, ensure_tree

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TREE = REPO / ".bench" / "tree-100k"
TARGET_RATIO = 2.0
CASES = [
    ("anchored literal", "^C$"),
    ("alternation", "B|C"),
]


# ---------------------------------------------------------------- the measurement


def _run(command: list[str], cwd: Path, cold: bool = False) -> tuple[float, float, bytes]:
    """Wall seconds, CPU seconds (user + system, children included) and stdout of one run;
    ``cold``: from an empty page cache."""
    if cold:
        _drop_caches()
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = os.times()
    if proc.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(command)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, proc.stdout


DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def _drop_caches() -> None:
    """Empty the page cache, dentries and inodes (the whole machine's: a cold start)."""
    os.sync()
    try:
        DROP_CACHES.write_text("3\n")
    except OSError as exc:
        sys.exit(f"bench: --cold cannot empty the page cache ({DROP_CACHES}: {exc.strerror}); run as root")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="empty the page cache before every run")
    parser.add_argument("--prepare-only", action="store_true", help="generate the tree and stop")
    args = parser.parse_args()
    rg = shutil.which("rg")
    if rg is None:
        sys.exit("bench: ripgrep is missing (Debian: apt-get install -y ripgrep)")
    tree = ensure_tree(args.tree)
    compile_kag()
    if args.prepare_only:
        return
    results = tree / "results"
    version = subprocess.run(
        [rg, "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    print(
        f"tree: {results} ({sum(1 for _ in results.glob('*/*/*.json'))} result files); anchor: {version}; "
        f"{os.cpu_count()} CPUs, {'cold' if args.cold else 'warm'} page cache, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    worst = 0.0
    for label, pattern in CASES:
        kag = [sys.executable, "-m", "kag", "stats", "find", pattern, "-r", "results", "--format", "json"]
        rg_args = ["--no-config", "--no-ignore", "-g", "*.json", pattern, "results"]
        anchors = {"rg -l": [rg, "-l", *rg_args], "rg -c": [rg, "-c", *rg_args]}
        if not args.cold:
            _run(kag, tree)  # warm-up: page cache, imports
            for command in anchors.values():
                _run(command, tree)
        kag_runs: list[tuple[float, float, bytes]] = []
        rg_runs: dict[str, list[tuple[float, float, bytes]]] = {name: [] for name in anchors}
        for _ in range(args.repeat):  # interleaved, so a burst of load hits all of them
            kag_runs.append(_run(kag, tree, args.cold))
            for name, command in anchors.items():
                rg_runs[name].append(_run(command, tree, args.cold))
        kag_wall, _, kag_out = min(kag_runs, key=lambda r: r[0])
        kag_cpu = min(r[1] for r in kag_runs)
        doc = json.loads(kag_out)
        print(
            f"{label:24} {pattern!r}: kag {kag_wall:6.2f} s wall ({kag_cpu:5.1f} s CPU), "
            f"{doc['matches']} of {doc['total']} responses, {len(doc['paths'])} files"
        )
        for name, runs in rg_runs.items():
            rg_wall, _, rg_out = min(runs, key=lambda r: r[0])
            rg_cpu = min(r[1] for r in runs)
            rg_files = {
                (line if name == "rg -l" else line.rsplit(b":", 1)[0]).decode()
                for line in rg_out.splitlines()
            }
            # Every response kag matched is in its file's raw JSON, so rg must list that file.
            missing = [p for p in doc["paths"] if p not in rg_files]
            if missing:
                sys.exit(f"bench: kag matched files {name} did not list: {missing[:3]}")
            # On a shared machine the best-of-N favours the shorter runs (rg's); the median of
            # the ratios of back-to-back pairs is the steadier figure, and the headline.
            paired = statistics.median(k[0] / r[0] for k, r in zip(kag_runs, runs, strict=True))
            if name == "rg -l":
                worst = max(worst, paired)
            print(
                f"{'':26}{name}: {rg_wall:6.2f} s wall ({rg_cpu:5.1f} s CPU), {len(rg_files)} raw files; "
                f"ratio kag/{name}: median of pairs {paired:.2f} wall, best vs best "
                f"{kag_wall / rg_wall:.2f} wall, {kag_cpu / max(rg_cpu, 1e-9):.2f} CPU"
            )
    verdict = "meets" if worst <= TARGET_RATIO else "MISSES"
    print(
        f"worst median wall ratio kag/rg -l = {worst:.2f} ({verdict} the target <= {TARGET_RATIO:g}); "
        f"{args.repeat} back-to-back rounds per case ({'cold' if args.cold else 'warm'}), "
        f"load average now {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
