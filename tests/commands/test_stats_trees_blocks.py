"""Several labelled trees in `kag stats` keep every block one tree has: the ``epochs`` and
``evidence`` blocks, ``--extract`` (``extracted``, ``extract``, XACC%) and the open questions
(``open``, ``scorable_open_questions``, the second table).

The expected values are not written here: each is the value the same tree gives graded
alone (``-r DIR``), under its labelled name, so the test holds whatever those blocks'
formulas are (their values are worked out by hand in test_stats_epochs.py,
test_stats_evidence.py and test_stats_extract_open.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kag.results import OkResult, epoch_result_path, write_result
from tests.commands.test_stats_evidence import kag_result
from tests.conftest import REPO

MCQ = {"type": "MCQ", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"}
DATASETS = {
    "d": {
        "q1": {"input": "q1?", "output": MCQ, "evidence": ["Scurvy"]},
        "q2": {"input": "q2?", "output": MCQ, "evidence": ["Iron"]},
        "q3": {"input": "q3?", "output": MCQ},
    },
    "t": {
        "o1": {"input": "capital?", "output": {"type": "Open", "answers": ["Paris"]}},
        "o2": {"input": "president?", "output": {"type": "Open", "answers": ["George Washington"]}},
    },
}
# Tree label -> (dataset, question) -> the setup "kag"'s retrieval text and its answers,
# epoch 1 first (None: an error file). The two trees differ everywhere, so that a block
# taken from the wrong tree, or summed over both, shows.
KAG: dict[str, dict[tuple[str, str], tuple[str, list[str | None]]]] = {
    "a": {
        ("d", "q1"): ("Scurvy is a disease.", ["The answer is A.", "A", "B"]),  # strict wrong, letter right
        ("d", "q2"): ("nothing relevant", ["B", "B", "B"]),
        ("d", "q3"): ("Iron", ["A"]),
        ("t", "o1"): ("Paris", ["The city of Paris."]),
        ("t", "o2"): ("a list", ["Washington"]),
    },
    "b": {
        ("d", "q1"): ("no match", ["A", "A"]),
        ("d", "q2"): ("iron supplements", ["C", "A"]),
        ("d", "q3"): ("x", [None, "A"]),
        ("t", "o1"): ("Lyon", [None]),
        ("t", "o2"): ("George", ["George Washington"]),
    },
}


@pytest.fixture
def trees(tmp_path: Path) -> Path:
    """datasets.json, tree ``a`` (setups kag and plain) and tree ``b`` (kag) under tmp_path."""
    (tmp_path / "datasets.json").write_text(json.dumps(DATASETS))
    for label, files in KAG.items():
        for (dataset, question), (text, answers) in files.items():
            for epoch, answer in enumerate(answers, start=1):
                path = epoch_result_path(tmp_path / label, dataset, question, "", "kag", epoch)
                write_result(path, kag_result(text, answer))
    for question in DATASETS["d"]:  # a setup without retrieval nor epochs, in tree a only
        write_result(epoch_result_path(tmp_path / "a", "d", question, "", "plain", 1), OkResult("B"))
    write_result(epoch_result_path(tmp_path / "a", "t", "o1", "", "plain", 1), OkResult("paris"))
    return tmp_path


def kag(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kag", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def stats(cwd: Path, *args: str) -> str:
    done = kag(cwd, "stats", "-d", "datasets.json", *args)
    assert done.returncode == 0, done.stderr
    # Every tree here is small: the small-sample warning is the only line allowed.
    assert [line for line in done.stderr.splitlines() if "few graded files" not in line] == []
    return done.stdout


def relabelled(doc: dict, label: str) -> dict[str, dict]:
    """The setups of a one-tree document, under the names they have among labelled trees."""
    return {f"{label}/{s['setup']}": s | {"setup": f"{label}/{s['setup']}"} for s in doc["setups"]}


def test_json_blocks_of_several_trees_are_those_of_each_tree_alone(trees: Path) -> None:
    merged = json.loads(stats(trees, "-r", "a=a", "-r", "b=b", "--format", "json", "--extract", "letter"))
    alone = {
        label: json.loads(stats(trees, "-r", label, "--format", "json", "--extract", "letter"))
        for label in "ab"
    }
    # The one datasets file and the one --extract spec.
    assert merged["scorable_open_questions"] == alone["a"]["scorable_open_questions"] == 2
    assert merged["extract"] == alone["a"]["extract"] == "letter"
    setups = {s["setup"]: s for s in merged["setups"]}
    assert setups == relabelled(alone["a"], "a") | relabelled(alone["b"], "b")
    # Not equal by being empty: every block is there, for both trees' kag setup.
    for name in ("a/kag", "b/kag"):
        for block in (setups[name]["overall"], setups[name]["per_dataset"]["d"]):
            assert block["epochs"] is not None and block["epochs"]["n"] >= 2
            assert block["evidence"] is not None and block["evidence"]["questions"] >= 1
            assert block["extracted"]["correct"] + block["extracted"]["incorrect"] >= 1
        assert setups[name]["per_dataset"]["t"]["open"]["total"] == 2
    # tree a: epochs 3 (q1, q2 have 3, q3 1); tree b: 2. Graded together, each keeps its own N.
    assert setups["a/kag"]["overall"]["epochs"]["n"] == 3
    assert setups["b/kag"]["overall"]["epochs"]["n"] == 2
    # plain has no later epoch (no key) and no retrieval (a null evidence block).
    assert "epochs" not in setups["a/plain"]["overall"]
    assert setups["a/plain"]["overall"]["evidence"] is None


def tables(text: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The setup rows (cells after the name) of the multiple-choice table and of the open one
    (the epochs section between them left out)."""
    before, _, open_part = text.partition("\nOpen questions: ")
    mcq = before.partition("\nEpochs (")[0]

    def rows(part: str) -> dict[str, list[str]]:
        lines = part.splitlines()
        return {line.split()[0]: line.split()[1:] for line in lines if line[:1].islower()}

    return rows(mcq), rows(open_part)


def test_text_report_of_several_trees_has_the_xacc_column_and_the_open_table(trees: Path) -> None:
    out = stats(trees, "-r", "a=a", "-r", "b=b", "--extract", "letter")
    assert "XACC% = correct after answer extraction (letter) / scored" in out
    assert "\nOpen questions: 2\n" in out
    merged = tables(out)
    assert merged[0]["a/kag"][9] == "66.67"  # XACC%: q1 and q3 of 3 after extraction
    for label in "ab":
        alone = tables(stats(trees, "-r", label, "--extract", "letter"))
        for table, mine in zip(merged, alone, strict=True):
            assert (
                mine and {f"{label}/{name}": cells for name, cells in mine.items()}.items() <= table.items()
            )


def test_a_setup_glob_over_labelled_names_keeps_the_epochs_blocks(trees: Path) -> None:
    # --setup matches the labelled name ("a/kag") for epoch 1 and for the later epochs alike:
    # the epochs block is the one the tree gives alone, not dropped as if no epoch matched.
    merged = json.loads(stats(trees, "-r", "a=a", "-r", "b=b", "--setup", "a/*", "--format", "json"))
    alone = json.loads(stats(trees, "-r", "a", "--format", "json"))
    setups = {s["setup"]: s for s in merged["setups"]}
    assert sorted(setups) == ["a/kag", "a/plain"]
    assert setups == relabelled(alone, "a")
    for block in (setups["a/kag"]["overall"], setups["a/kag"]["per_dataset"]["d"]):
        assert block["epochs"] is not None and block["epochs"]["n"] == 3
