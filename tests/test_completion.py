"""Shell completion offers the values of --format, irt2 --task/--split, and the setup names of
the result tree given on the line (what the bash script of `kag completion bash` asks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MED_KAG = REPO.parent / "shared" / "data" / "med-kag" / "results"
EXAMPLE_SETUPS = ["qwen35-9b-kag", "qwen35-9b-native", "smollm2-135m-native"]


def candidates(line: str) -> list[str]:
    """The candidates for the last word of ``line`` (a trailing space: a new, empty word)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    env = dict(os.environ, PYTHONPATH=str(REPO), COMP_WORDS=line, COMP_CWORD=str(cword))
    env["_KAG_COMPLETE"] = "complete_bash"
    done = subprocess.run(
        [sys.executable, "-m", "kag"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("kag stats --format ", ["text", "json", "markdown", "html", "junit", "csv", "jsonl"]),
        ("kag stats --format js", ["json", "jsonl"]),
        ("kag stats judge --format ", ["text", "json", "markdown", "html", "junit"]),
        (
            "kag stats compare --format ",
            ["text", "json", "markdown", "html", "junit"],
        ),  # an enum completes itself
        ("kag irt2 --task ", ["linking", "kgc", "ranking"]),
        ("kag irt2 --task r", ["ranking"]),
        ("kag irt2 --split ", ["validation", "test"]),
    ],
)
def test_option_values_complete(line: str, expected: list[str]) -> None:
    assert candidates(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("kag stats -r examples/results --setup ", EXAMPLE_SETUPS),
        ("kag stats -r examples/results --setup qwen", EXAMPLE_SETUPS[:2]),
        ("kag stats compare -r examples/results --setup s", EXAMPLE_SETUPS[2:]),
        ("kag stats -r examples/results compare --setup ", EXAMPLE_SETUPS),  # -r before the sub-command
        ("kag stats flips -r examples/results ", EXAMPLE_SETUPS),
        ("kag stats flips -r examples/results qwen35-9b-kag smol", EXAMPLE_SETUPS[2:]),
        ("kag stats find x -r examples/results --setup q", EXAMPLE_SETUPS[:2]),
        ("kag stats -r examples/nonexistent --setup ", []),
    ],
)
def test_setup_names_complete_from_the_tree_given(line: str, expected: list[str]) -> None:
    assert candidates(line) == expected


@pytest.mark.skipif(not MED_KAG.is_dir(), reason="../shared/data/med-kag is not present")
def test_setup_names_complete_after_the_prefix() -> None:
    line = f"kag stats -r {MED_KAG} --prefix wekgr- --setup "
    assert candidates(line) == ["qwen35-9b-ollama-native", "qwen35-9b-ollama-neo4j-embedding-triplet-formal"]
