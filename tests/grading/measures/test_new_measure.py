"""A measure with counters of its own is one module: registered before the report is built,
it is counted per file, merged across setups' datasets, and shown in the JSON block and the
stats table, with no line added to the blocks, the walk or the renderers.

It runs in a child interpreter so that the registry of this test session stays as shipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[3]
DATASETS = REPO / "examples" / "dataset" / "datasets.json"
RESULTS = REPO / "examples" / "results"

# The module a user would add as kag/grading/measures/reply_length.py, registered by hand.
MODULE = """
from kag.grading.measures.declarations import TEXT_MD_HTML, Column, JsonKey
from kag.grading.measures.registry import Measure, register


class ReplyLengthCounts:
    reply_chars: int = 0
    replies: int = 0


def add(counts, graded):
    if graded.response is not None:
        counts.reply_chars += len(graded.response)
        counts.replies += 1


def _mean(block):
    m = block.metrics
    return m.reply_chars / m.replies if m.replies else None


register(
    Measure(
        "reply_length",
        ReplyLengthCounts,
        add,
        needs=frozenset({"response"}),
        json=(JsonKey("avg_reply_chars", _mean),),
        columns=(Column("REPLY", lambda b: "-" if _mean(b) is None else f"{_mean(b):.1f}", TEXT_MD_HTML, 7),),
    )
)

from kag.cli import main
import sys
sys.argv = ["kag", *sys.argv[1:]]
main()
"""


def _kag_with_the_measure(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", MODULE, "stats", "-d", str(DATASETS), "-r", str(RESULTS), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _replies() -> dict[tuple[str, str], list[int]]:
    """The reply lengths of the graded files of the example tree (those of a question with
    an MCQ answer in the datasets file), per (setup, dataset), read with the json module."""
    datasets = json.loads(DATASETS.read_text(encoding="utf-8"))
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(RESULTS.glob("*/*/*.json")):
        dataset, question = path.parts[-3], path.parts[-2]
        output = datasets.get(dataset, {}).get(question, {}).get("output", {})
        data = json.loads(path.read_text(encoding="utf-8"))
        if output.get("type") == "MCQ" and output.get("answer") and "ok" in data:
            found.setdefault((path.stem, dataset), []).append(len(data["ok"]["result"]))
    return found


def test_a_new_counting_measure_is_in_every_json_block_and_after_the_known_keys() -> None:
    doc = orjson.loads(_kag_with_the_measure("--format", "json"))
    replies = _replies()
    assert doc["setups"], "the example tree has setups"
    for setup in doc["setups"]:
        name = setup["setup"]
        overall = [n for (s, _), ns in replies.items() if s == name for n in ns]
        assert list(setup["overall"])[-1] == "avg_reply_chars"
        assert abs(setup["overall"]["avg_reply_chars"] - sum(overall) / len(overall)) < 1e-9
        for dataset, block in setup["per_dataset"].items():
            lengths = replies.get((name, dataset), [])
            expected = sum(lengths) / len(lengths) if lengths else None
            assert block["avg_reply_chars"] == expected or abs(block["avg_reply_chars"] - expected) < 1e-9


def test_a_new_measure_s_column_ends_the_stats_table() -> None:
    header = next(line for line in _kag_with_the_measure().splitlines() if "ACC%" in line)
    assert header.split()[-1] == "REPLY"


def test_the_shipped_report_has_no_such_key() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kag", "stats", "-d", str(DATASETS), "-r", str(RESULTS), "--format", "json"],
        check=False,
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0 and b"avg_reply_chars" not in done.stdout
