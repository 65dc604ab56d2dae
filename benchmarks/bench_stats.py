"""Speed and memory of `kag stats` on a generated 100,000-file result tree.

    python benchmarks/bench_stats.py [--tree .bench/tree-100k] [--repeat 3]

Anchor (speed): the floor of merely reading the same files,
``find results -type f -print0 | xargs -0 cat > /dev/null``, warm cache, timed in the same
run, alternating with ``kag stats -d datasets.json -r results`` (the installed console
script, so interpreter start-up and imports are included). Printed: every timing, the
ratio of the best times and of the median times (target: <= 1.1), the CPU time of both,
and the load average (the machine is shared: the ratio is only meaningful in one run).

Memory: peak PSS summed over `kag stats` and its worker processes (sampled every 10 ms
from /proc), on the 100k tree and on a 10k tree made of hard links to the first 200
questions of every dataset of the same tree (same datasets file, same file sizes).
The two peaks should be about equal: nothing is kept per file.

Start-up: best wall time of ``kag --help`` over 5 runs (target: well under a second).

``--evidence``: instead, the cost of grading retrieval against gold evidence. A second
datasets file (``datasets-evidence.json`` in a temporary folder, so that a shared tree is
only read: the tree's datasets file with every question given two gold entities and one
gold triple drawn from the generator's words and relation types) makes
``kag stats --format json`` compute the ``evidence`` and ``retrieval_quality`` blocks of
every KAG file (its ~16 KB subgraph text read back as a graph); timed alternating with the
same command on the plain datasets file (target: <= 1.3).

The tree is made by ``benchmarks/make_tree.py`` (10 setups x 10,000 questions, seed 0)
when it does not exist yet; it is about 3.3 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from make_tree import compile_kag, ensure_tree


def kag_command() -> list[str]:
    script = Path(sys.executable).parent / "kag"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kag"]


def ensure_subset(tree: Path, subset: Path, questions_per_dataset: int) -> int:
    """Hard-link the first N question folders of every dataset; returns the file count."""
    if not (subset / "results").is_dir():
        tmp = subset.with_name(subset.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        for dataset in sorted((tree / "results").iterdir()):
            for question in sorted(dataset.iterdir())[:questions_per_dataset]:
                target = tmp / "results" / dataset.name / question.name
                target.mkdir(parents=True)
                for f in question.iterdir():
                    os.link(f, target / f.name)
        os.link(tree / "datasets.json", tmp / "datasets.json")
        tmp.rename(subset)
    return sum(len(files) for _, _, files in os.walk(subset / "results"))


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_floor(tree: Path) -> tuple[float, float]:
    before, start = cpu_of_children(), time.perf_counter()
    subprocess.run(
        "find results -type f -print0 | xargs -0 cat > /dev/null", shell=True, cwd=tree, check=True
    )
    return time.perf_counter() - start, cpu_of_children() - before


def stats_args(tree: Path, datasets: Path | None = None, *extra: str) -> list[str]:
    """``kag stats`` of ``tree``'s results against ``datasets`` (None: the tree's own file)."""
    datasets = tree / "datasets.json" if datasets is None else datasets
    return [*kag_command(), "stats", "-d", str(datasets), "-r", str(tree / "results"), *extra]


def time_stats(tree: Path, datasets: Path | None = None, *extra: str) -> tuple[float, float]:
    before, start = cpu_of_children(), time.perf_counter()
    done = subprocess.run(stats_args(tree, datasets, *extra), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    expected = (
        '{\n  "datasets": 5,\n  "scorable_questions": 10000'
        if extra
        else "Datasets: 5 | Scorable questions: 10000"
    )
    if done.returncode != 0 or not done.stdout.startswith(expected):
        raise SystemExit(f"kag stats failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, cpu_of_children() - before


def write_evidence_datasets(tree: Path, folder: Path) -> Path:
    """``folder/datasets-evidence.json``: the tree's datasets file, every question given two
    gold entities and one gold triple (deterministic); returns its path."""
    import random

    import orjson
    from make_tree import RELATIONS, words

    path = folder / "datasets-evidence.json"
    doc = orjson.loads((tree / "datasets.json").read_bytes())
    rng = random.Random(0)
    for questions in doc.values():
        for entry in questions.values():
            a, b = words(rng, 2).title(), words(rng, 1).title()
            entry["evidence"] = {"entities": [a, b], "triples": [[a, rng.choice(RELATIONS).lower(), b]]}
    path.write_bytes(orjson.dumps(doc))
    return path


def bench_evidence(tree: Path, repeat: int) -> None:
    """`kag stats --format json` with the evidence blocks against without them."""
    with tempfile.TemporaryDirectory(prefix="bench-evidence-") as folder:
        gold_datasets = write_evidence_datasets(tree, Path(folder))
        time_stats(tree, None, "--format", "json")  # warm the page cache
        plain, gold = [], []
        for i in range(repeat):
            plain.append(time_stats(tree, None, "--format", "json"))
            gold.append(time_stats(tree, gold_datasets, "--format", "json"))
            print(
                f"  run {i + 1}: without evidence {plain[-1][0]:.2f} s (cpu {plain[-1][1]:.2f} s)   "
                f"with evidence {gold[-1][0]:.2f} s (cpu {gold[-1][1]:.2f} s)"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    best_plain, best_gold = min(p[0] for p in plain), min(g[0] for g in gold)
    med_plain, med_gold = statistics.median(p[0] for p in plain), statistics.median(g[0] for g in gold)
    cpu_plain, cpu_gold = statistics.median(p[1] for p in plain), statistics.median(g[1] for g in gold)
    print(
        f"evidence: with / without = {best_gold / best_plain:.2f} (best {best_gold:.2f} s vs "
        f"{best_plain:.2f} s), {med_gold / med_plain:.2f} (median), cpu {cpu_gold / cpu_plain:.2f} "
        f"({cpu_gold:.2f} s vs {cpu_plain:.2f} s); target <= 1.3"
    )


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    stack.extend(int(c) for c in handle.read().split())
        except OSError:
            continue
    return found


def _pss_kb(pid: int) -> int:
    for name, key in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
        try:
            with open(f"/proc/{pid}/{name}") as handle:
                for line in handle:
                    if line.startswith(key):
                        return int(line.split()[1])
        except OSError:
            continue
    return 0


def peak_memory(tree: Path) -> tuple[float, float]:
    """(peak PSS summed over the process tree, peak RSS of the largest single process), in MB."""
    proc = subprocess.Popen(stats_args(tree), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_sum = peak_one = 0
    while proc.poll() is None:
        sizes = [_pss_kb(p) for p in _descendants(proc.pid)]
        peak_sum = max(peak_sum, sum(sizes))
        peak_one = max(peak_one, max(sizes, default=0))
        time.sleep(0.01)
    if proc.returncode != 0:
        raise SystemExit(f"kag stats failed: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
    return peak_sum / 1024, peak_one / 1024


def help_startup() -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([*kag_command(), "--help"], stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO / ".bench" / "tree-100k")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument(
        "--evidence", action="store_true", help="time kag stats with gold evidence against without it"
    )
    args = parser.parse_args()
    tree: Path = args.tree.resolve()
    ensure_tree(tree)
    compile_kag()
    files = sum(len(f) for _, _, f in os.walk(tree / "results"))
    size = sum(
        e.stat().st_size
        for d, _, fs in os.walk(tree / "results")
        for e in map(Path, (os.path.join(d, x) for x in fs))
    )
    print(f"tree: {tree} ({files:,} files, {size / 1e9:.2f} GB); cpus: {os.cpu_count()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.evidence:
        bench_evidence(tree, args.repeat)
        return

    time_floor(tree)  # warm the page cache
    time_stats(tree)
    floors, stats = [], []
    for i in range(args.repeat):
        floors.append(time_floor(tree))
        stats.append(time_stats(tree))
        print(
            f"  run {i + 1}: floor {floors[-1][0]:.2f} s (cpu {floors[-1][1]:.2f} s)   "
            f"kag stats {stats[-1][0]:.2f} s (cpu {stats[-1][1]:.2f} s)"
        )
    best_floor, best_stats = min(f[0] for f in floors), min(s[0] for s in stats)
    med_floor, med_stats = statistics.median(f[0] for f in floors), statistics.median(s[0] for s in stats)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"speed: kag stats / cat floor = {best_stats / best_floor:.2f} "
        f"(best {best_stats:.2f} s vs {best_floor:.2f} s), "
        f"{med_stats / med_floor:.2f} (median {med_stats:.2f} s vs {med_floor:.2f} s); target <= 1.1"
    )
    cpu_floor = statistics.median(f[1] for f in floors)
    cpu_stats = statistics.median(s[1] for s in stats)
    print(f"cpu time (median): kag stats {cpu_stats:.2f} s, floor {cpu_floor:.2f} s")

    if not args.skip_memory:
        subset = tree.with_name(tree.name + "-subset10k")
        small_files = ensure_subset(tree, subset, 200)
        small = peak_memory(subset)
        large = peak_memory(tree)
        print(
            f"memory: peak PSS of kag stats + workers {small[0]:.1f} MB on {small_files:,} files, "
            f"{large[0]:.1f} MB on {files:,} files (ratio {large[0] / small[0]:.2f}); "
            f"largest process {small[1]:.1f} MB vs {large[1]:.1f} MB"
        )
    print(f"startup: kag --help {help_startup() * 1000:.0f} ms (best of 5)")


if __name__ == "__main__":
    main()
