"""Speed and peak memory of `kag irt2` against the reference `irt2 evaluate-kgc`, in one run.

    python benchmarks/bench_irt2.py [--queries 100000] [--candidates 100] [--root DIR]
                                    [--venv /tmp/kag-bench-irt2-ref] [--prepare-only]

Anchor: the reference evaluator, PyPI ``irt2`` (lavis-nlp/irt2), installed by this script
into a throwaway venv (``pip install irt2 pudb pretty_errors``: its CLI imports the last
two without declaring them). Both programs run as subprocesses on the same generated
IRT2-format dataset, linking task (``kgc``), test split, mode original, max rank 100:

    irt2 evaluate-kgc --irt2 DIR --split test --head-task H --tail-task T --out REPORT
    kag irt2 --dataset DIR --task kgc --split test --head H --tail T --format json

The dataset (``--queries`` per side, default 100,000; ``--candidates`` scored vertices
per row, default 100; 1-3 gold vertices per query, present in 70% of the rows; scores
are float32 values printed by ``repr``, as a model's ``str(tensor.item())`` would) is
generated once under ``.bench/irt2-<queries>x<candidates>`` and reused. The script reads
the files once before timing so both programs start with a warm page cache, then times
each program once (``--repeat n``: n runs of each, interleaved, and their medians) with
``os.wait4``: wall time, CPU time (user + system, children included) and peak resident
memory of the largest process (``ru_maxrss``), and samples the peak proportional set size
of the whole process tree (``kag irt2`` counts the second file in a forked child). It
also checks that the two reports hold the same numbers (all 18 of them, exactly).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
# The console script next to the interpreter running this (a worktree without its own
# .venv uses the shared one, importing kag from PYTHONPATH); `python -m kag` without one.
_SCRIPT = Path(sys.executable).parent / "kag"
KAG = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "kag"]
TARGET_RATIO = 10.0
TARGET_MEMORY = 4.0  # at most a quarter of the reference's memory
VERTICES = 20_000
RELATIONS = 50


# ------------------------------------------------------------------------ dataset


def _write_lines(path: Path, lines: list[str], comment: str | None = None) -> None:
    with path.open("w") as out:
        if comment:
            out.write(f"# {comment}\n")
        out.write("".join(lines))


def generate(root: Path, queries: int, candidates: int, seed: int = 0) -> None:
    """An IRT2-format folder whose linking test split has ``queries`` queries per side."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    mentions_per_split = max(queries // 2, 1)
    (root / "config.yaml").write_text(
        "create:\n  name: BENCH/SYNTH\n  separator: '|'\ncreated: '2023-01-01T00:00:00'\n"
    )
    _write_lines(root / "vertices.txt", [f"{v}|vertex {v}\n" for v in range(VERTICES)], "vid|name")
    _write_lines(root / "relations.txt", [f"{r}|relation {r}\n" for r in range(RELATIONS)], "rid|name")
    first_val, first_test = VERTICES, VERTICES + mentions_per_split
    total_mentions = VERTICES + 2 * mentions_per_split
    _write_lines(root / "mentions.txt", [f"{m}|mention {m}\n" for m in range(total_mentions)], "mid|phrase")
    _write_lines(root / "closed.train-mentions.txt", [f"{v}|{v}\n" for v in range(VERTICES)], "vid|mid")
    heads = rng.integers(0, VERTICES, 3 * VERTICES)
    heads[:VERTICES] = np.arange(VERTICES)  # every vertex is in a closed-world triple
    tails = rng.integers(0, VERTICES, 3 * VERTICES)
    relations = rng.integers(0, RELATIONS, 3 * VERTICES)
    _write_lines(
        root / "closed.train-triples.txt",
        [f"{h}|{t}|{r}\n" for h, t, r in zip(heads.tolist(), tails.tolist(), relations.tolist())],
        "head|tail|relation",
    )
    for split, first in (("validation", first_val), ("test", first_test)):
        mids = first + np.arange(mentions_per_split)
        owners = rng.integers(0, VERTICES, mentions_per_split)
        _write_lines(
            root / f"open.{split}-mentions.txt",
            [f"{v}|{m}\n" for v, m in zip(owners.tolist(), mids.tolist())],
        )
        # Linking: head-side queries come from *-tail.txt, tail-side ones from *-head.txt.
        for kind, side in (("tail", "head"), ("head", "tail")):
            keys = rng.choice(mentions_per_split * RELATIONS, size=queries, replace=False)
            q_mid, q_rid = mids[keys // RELATIONS], keys % RELATIONS
            sizes = rng.integers(1, 4, queries)
            gold = np.full((queries, 3), -1, dtype=np.int64)
            lines: list[str] = []
            for i, (m, r, k) in enumerate(zip(q_mid.tolist(), q_rid.tolist(), sizes.tolist())):
                vids = rng.choice(VERTICES, size=k, replace=False)
                gold[i, :k] = vids
                lines.extend(f"{m}|{r}|{v}\n" for v in vids.tolist())
            _write_lines(root / f"open.{split}-{kind}.txt", lines)
            if split == "test":
                _write_predictions(root / f"pred-{side}.csv", q_mid, q_rid, gold, sizes, candidates, rng)


def _write_predictions(
    path: Path,
    q_mid: np.ndarray,
    q_rid: np.ndarray,
    gold: np.ndarray,
    sizes: np.ndarray,
    candidates: int,
    rng: np.random.Generator,
) -> None:
    n = len(q_mid)
    ids = rng.integers(0, VERTICES, (n, candidates))
    placed = np.zeros((n, candidates), dtype=bool)
    with_gold = np.flatnonzero(rng.random(n) < 0.7)
    for i in with_gold.tolist():
        k = int(sizes[i])
        slots = rng.choice(candidates, size=k, replace=False)
        ids[i, slots] = gold[i, :k]
        placed[i, slots] = True
    while True:  # a gold vertex must not appear twice in a row
        clash = (ids[:, :, None] == gold[:, None, :]).any(axis=2) & ~placed
        if not clash.any():
            break
        ids[clash] = (ids[clash] + 7919) % VERTICES
    scores = rng.random((n, candidates)).astype(np.float32).astype(np.float64)
    width = 2 * candidates
    with path.open("w") as out:
        for start in range(0, n, 5000):
            rows = slice(start, start + 5000)
            fields = [""] * (2 * ids[rows].size)
            fields[0::2] = map(str, ids[rows].ravel().tolist())
            fields[1::2] = map(repr, scores[rows].ravel().tolist())
            queries = zip(q_mid[rows].tolist(), q_rid[rows].tolist())
            out.writelines(
                f"{m},{r}," + ",".join(fields[i * width : (i + 1) * width]) + "\n"
                for i, (m, r) in enumerate(queries)
            )


def ensure_dataset(root: Path, queries: int, candidates: int) -> Path:
    marker = root / ".complete"
    if marker.exists():
        return root
    print(f"generating {root} ({queries} queries per side x {candidates} candidates) ...", file=sys.stderr)
    started = time.perf_counter()
    generate(root, queries, candidates)
    marker.write_text(f"{queries} {candidates}\n")
    print(f"generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return root


# -------------------------------------------------------------------- reference


def ensure_reference(venv: Path) -> Path:
    cli = venv / "bin" / "irt2"
    if cli.exists():
        return cli
    print(f"creating {venv} with the reference evaluator (pip install irt2) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "irt2", "pudb", "pretty_errors"], check=True)
    return cli


# ------------------------------------------------------------------------ timing


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``kag irt2`` counts one file in a forked child)."""
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                pids.extend(p for child in children.read().split() for p in _tree(int(child)))
    except OSError:  # gone meanwhile
        pass
    return pids


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next((int(line.split()[1]) for line in rollup if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def measure(command: list[str], stdout: Path) -> dict[str, float]:
    """Wall, CPU and peak memory of one child process and its descendants.

    CPU time and ``ru_maxrss`` (the largest single process) come from wait4. ``pss_mb`` is
    the peak over time of the summed proportional set size of the process tree, sampled
    every 20 ms: pages a forked child shares with its parent count once, not twice.
    """
    peak_pss = [0]
    with stdout.open("wb") as out:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE)
        assert child.stderr is not None
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak_pss[0] = max(peak_pss[0], sum(_pss_kb(p) for p in _tree(child.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        errors = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.stderr.write(errors.decode(errors="replace")[-3000:])
        raise SystemExit(f"failed ({child.returncode}): {' '.join(command)}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "pss_mb": peak_pss[0] / 1024,
    }


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def warm(paths: list[Path]) -> None:
    for path in paths:
        with path.open("rb") as fd:
            while fd.read(1 << 24):
                pass


def compare(kag_json: Path, reference_yaml: Path) -> tuple[int, float]:
    """Number of compared values and the largest absolute difference."""
    import yaml

    ours = json.loads(kag_json.read_text())
    theirs = yaml.safe_load(reference_yaml.read_text())["metrics"]
    worst, count = 0.0, 0
    for side in ("head", "tail", "all"):
        for average in ("micro", "macro"):
            for key, value in theirs[side][average].items():
                worst = max(worst, abs(ours[side][average][key] - value))
                count += 1
    return count, worst


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=100_000, help="queries per side")
    parser.add_argument("--candidates", type=int, default=100, help="scored candidates per row")
    parser.add_argument("--root", type=Path, default=None, help="dataset folder (default .bench/irt2-QxC)")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/kag-bench-irt2-ref"))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, interleaved; medians")
    parser.add_argument("--prepare-only", action="store_true")
    args = parser.parse_args()

    root = args.root or REPO / ".bench" / f"irt2-{args.queries}x{args.candidates}"
    ensure_dataset(root, args.queries, args.candidates)
    reference = ensure_reference(args.venv)
    if args.prepare_only:
        return
    head, tail = root / "pred-head.csv", root / "pred-tail.csv"
    warm([head, tail, *root.glob("*.txt")])
    out = root / "out"
    out.mkdir(exist_ok=True)
    report = out / "reference.yaml"
    report.unlink(missing_ok=True)
    ref_cmd = [
        str(reference), "-q", "evaluate-kgc", "--irt2", str(root), "--split", "test",
        "--head-task", str(head), "--tail-task", str(tail), "--max-rank", "100", "--out", str(report),
    ]  # fmt: skip
    kag_cmd = [
        *KAG, "irt2", "--dataset", str(root), "--task", "kgc", "--split", "test",
        "--head", str(head), "--tail", str(tail), "--max-rank", "100", "--format", "json",
    ]  # fmt: skip
    size_mb = (head.stat().st_size + tail.stat().st_size) / 1e6
    print(
        f"dataset: {root} ({args.queries} queries per side, {args.candidates} candidates per row,"
        f" {size_mb:.0f} MB of predictions)"
    )
    print(f"cpus: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    kag_runs, ref_runs, ratios = [], [], []
    for _ in range(args.repeat):  # interleaved, so that a change of load hits both sides
        kag_runs.append(measure(kag_cmd, out / "kag.json"))
        ref_runs.append(measure(ref_cmd, out / "reference.log"))
        ratios.append(ref_runs[-1]["wall"] / kag_runs[-1]["wall"])
    count, worst = compare(out / "kag.json", report)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print()
    kag, ref = medians(kag_runs), medians(ref_runs)
    what = f"median of {args.repeat} runs" if args.repeat > 1 else "one run"
    print(f"{what:22}{'wall s':>10}{'cpu s':>10}{'peak RSS MB':>14}{'peak PSS MB':>14}")
    for name, row in (("kag irt2", kag), ("irt2 evaluate-kgc", ref)):
        print(f"{name:22}{row['wall']:10.2f}{row['cpu']:10.2f}{row['rss_mb']:14.0f}{row['pss_mb']:14.0f}")
    print("(peak RSS: the largest single process; peak PSS: the whole process tree, sampled)")
    print()
    wall_ratio, cpu_ratio = ref["wall"] / kag["wall"], ref["cpu"] / kag["cpu"]
    verdict = "meets" if wall_ratio >= TARGET_RATIO else "MISSES"
    print(
        f"speed-up: {wall_ratio:.1f}x wall, {cpu_ratio:.1f}x cpu ({verdict} the {TARGET_RATIO:.0f}x target)"
        + (f"; per run: {', '.join(f'{r:.1f}x' for r in ratios)}" if args.repeat > 1 else "")
    )
    memory = ref["pss_mb"] / kag["pss_mb"]
    verdict = "meets" if memory >= TARGET_MEMORY else "MISSES"
    print(f"memory: 1/{memory:.1f} of the reference's peak PSS ({verdict} the 1/{TARGET_MEMORY:.0f} target)")
    print(f"metrics: {count} values compared, largest difference {worst:.3g}")


if __name__ == "__main__":
    main()
