"""Speed of `kag stats find` against ripgrep on the same 100,000-file result tree.

    python benchmarks/bench_find.py [--tree .bench/tree-100k] [--repeat 3] [--prepare-only]

Anchor: ``rg`` (ripgrep) over the same files, in one run, for a literal word and for a
regex with alternation. rg does less work than kag: it scans the raw JSON bytes (the
word may sit anywhere in the file, the query embedding and the prompt included), while
kag parses every file as a result, validates its shape, and matches only the trimmed
``ok.result``. rg is run as ``rg -c --no-config -g '*.json' PATTERN results/`` so that
it reads every file fully and prints only a per-file count (no per-line rendering that
would make the anchor slower than it needs to be). kag is run as a subprocess,
``kag stats find PATTERN -r results --format json`` with its default workers, output
to a pipe, exactly as a user would call it. Caches are warm for both (one unmeasured
warm-up pass each); the best of ``--repeat`` wall times is reported.

The tree comes from ``benchmarks/make_tree.py`` (10 setups x 10,000 questions, about
2 GB) under ``.bench/tree-100k``; it is generated once and reused. Another process may
generate the same tree at the same time: a ``.bench/tree-100k.lock`` directory (atomic
mkdir, holding the owner's pid) serialises generation, and ``.complete`` inside the tree
marks it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TREE = REPO / ".bench" / "tree-100k"
TARGET_RATIO = 3.0
CASES = [
    ("literal word", "serum"),
    ("regex with alternation", "(?:know|answer) is [A-Da-d]"),
]


# ---------------------------------------------------------------- the shared tree


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_owner(lock: Path) -> int | None:
    try:
        return int((lock / "pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _newest_mtime(tree: Path) -> float:
    """mtime of the most recently changed question folder (cheap: one dataset level)."""
    newest = tree.stat().st_mtime if tree.exists() else 0.0
    results = tree / "results"
    if results.is_dir():
        for dataset in results.iterdir():
            newest = max(newest, dataset.stat().st_mtime)
    return newest


def ensure_tree(tree: Path, setups: int = 10, questions: int = 10_000) -> Path:
    """Return ``tree`` once ``tree/.complete`` exists, generating it if nobody else is."""
    complete = tree / ".complete"
    lock = tree.with_name(tree.name + ".lock")
    tree.parent.mkdir(parents=True, exist_ok=True)
    announced = False
    while not complete.exists():
        try:
            lock.mkdir()
        except FileExistsError:
            owner = _lock_owner(lock)
            if owner is not None and not _pid_alive(owner):
                print(f"bench: removing stale lock of dead pid {owner}", file=sys.stderr)
                shutil.rmtree(lock, ignore_errors=True)
                continue
            if not announced:
                print(f"bench: waiting for another process generating {tree}", file=sys.stderr)
                announced = True
            time.sleep(5)
            continue
        try:
            (lock / "pid").write_text(str(os.getpid()))
            if tree.exists() and time.time() - _newest_mtime(tree) < 60:
                # Someone is writing without the lock; let them finish first.
                shutil.rmtree(lock, ignore_errors=True)
                time.sleep(30)
                continue
            print(f"bench: generating {tree} ({setups} setups x {questions} questions)...", file=sys.stderr)
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, str(REPO / "benchmarks" / "make_tree.py"), str(tree),
                 "--setups", str(setups), "--questions", str(questions)],
                check=True,
            )
            complete.write_text(f"{setups} setups x {questions} questions\n")
            print(f"bench: generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        finally:
            shutil.rmtree(lock, ignore_errors=True)
    return tree
