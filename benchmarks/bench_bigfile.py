"""Peak memory of `kag stats` and `kag stats find` on a tree holding one 1 GB result file.

    python benchmarks/bench_bigfile.py [--size-mb 1024] [--kag-path DIR]

The tree has one small result file and one sparse file of ``--size-mb`` MB (``truncate``:
no disk used) in the same question folder. Each command runs once in a fresh process;
printed: its exit code, wall time, and peak RSS (``ru_maxrss`` of the child). A file past
the result size cap (64 MiB) is refused from its size, so the peak stays that of an
empty run; a reader that loads the file costs at least its size.

Anchor: the same commands on a tree without the large file (the memory of start-up).
``--kag-path`` runs another checkout of kag (e.g. an older commit from ``git worktree``)
to compare before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL = b'{"ok": {"result": "b", "stats": {"time": {"secs": 1, "nanos": 0}}}}'


def make_tree(base: Path, size: int) -> Path:
    root = base / "results"
    question = root / "mcq-form" / "0"
    question.mkdir(parents=True)
    (question / "a.json").write_bytes(SMALL)
    if size:
        with (question / "b.json").open("wb") as f:
            f.truncate(size)
    return root


def run(kag_path: Path, args: list[str], cwd: str) -> tuple[int, float, float]:
    """Exit code, wall seconds and peak RSS (MB) of ``python -m kag ARGS`` in a fresh process.
    Run from ``cwd`` (not a checkout): ``-m`` puts the working folder before PYTHONPATH."""
    code = (
        "import json, resource, subprocess, sys, time; t = time.perf_counter(); "
        "p = subprocess.run([sys.executable, '-m', 'kag', *sys.argv[1:]], capture_output=True); "
        "print(json.dumps([p.returncode, time.perf_counter() - t, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024]))"
    )
    env = {**os.environ, "PYTHONPATH": str(kag_path), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env, cwd=cwd
    )
    rc, wall, peak = json.loads(out.stdout)
    return int(rc), float(wall), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--kag-path", type=Path, default=REPO)
    args = parser.parse_args()
    datasets = str(REPO / "examples/dataset/datasets.json")
    with tempfile.TemporaryDirectory() as tmp:
        for label, size in (
            ("anchor (no large file)", 0),
            (f"{args.size_mb} MB sparse file", args.size_mb << 20),
        ):
            root = make_tree(Path(tmp) / label.replace(" ", "_"), size)
            for name, command in (
                ("kag stats", ["stats", "-d", datasets, "-r", str(root), "--format", "json"]),
                (
                    "kag stats find",
                    ["stats", "find", "b", "-r", str(root), "--format", "json", "--jobs", "1"],
                ),
            ):
                rc, wall, peak = run(args.kag_path, command, tmp)
                print(f"{name:<15} {label:<24} exit {rc}  {wall:6.2f} s  peak RSS {peak:8.1f} MB")


if __name__ == "__main__":
    main()
