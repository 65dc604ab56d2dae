"""Every command exits 0, silently, when the reader of its output goes away (`kag ... | head -1`).

A real pipe whose read end is closed before kag writes its first byte: the first write
fails with EPIPE, as it does when `head` has read its line and left.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands.test_compare_cli import PREFIX, build_tree

REPO = Path(__file__).resolve().parent.parent
IRT2 = REPO / "tests" / "data" / "irt2"


def run_with_reader_gone(args: list[str]) -> tuple[int, str]:
    """Run ``python -m kag ARGS`` with stdout a pipe nobody reads; (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kag", *args],
            check=False,
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            timeout=120,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    datasets, results = build_tree(tmp_path_factory.mktemp("tree"))
    return ["-d", str(datasets), "-r", str(results), "--prefix", PREFIX]


def _cases(tree: list[str]) -> dict[str, list[str]]:
    triplets = REPO / "examples" / "triplets"
    irt2 = [
        "irt2", "--dataset", str(IRT2 / "dataset"), "--task", "linking", "--split", "test",
        "--head", str(IRT2 / "predictions" / "linking-head.csv"),
        "--tail", str(IRT2 / "predictions" / "linking-tail.csv"),
    ]  # fmt: skip
    return {
        "triplets text": ["triplets", str(triplets / "gold.jsonl"), str(triplets / "finetuned.jsonl")],
        "triplets json": ["triplets", str(triplets / "gold.jsonl"), str(triplets / "finetuned.jsonl")]
        + ["--format", "json"],
        "irt2 text": irt2,
        "irt2 json": [*irt2, "--format", "json"],
        "stats text": ["stats", *tree],
        "stats json": ["stats", *tree, "--format", "json"],
        "stats compare": ["stats", "compare", *tree],
        "stats compare json": ["stats", "compare", *tree, "--format", "json"],
    }


CASES = (
    "triplets text", "triplets json", "irt2 text", "irt2 json", "stats text", "stats json",
    "stats compare", "stats compare json",
)  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_the_reader_going_away_is_exit_0_without_a_word(tree: list[str], case: str) -> None:
    code, err = run_with_reader_gone(_cases(tree)[case])
    assert code == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err and "BrokenPipe" not in err
    assert "error" not in err
