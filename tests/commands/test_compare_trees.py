"""`kag stats compare`, `flips` and `impact` over labelled trees give what they give over one
tree holding the same files: the setups ``a/x`` and ``b/y`` of two trees compare as ``x``
and ``y`` of one tree do (``compare --epochs all`` on the per-question mean scores,
``impact`` with its evidence buckets, ``flips`` with each file's own path).

The expected documents are not written here: each is the one-tree document, its setup
names relabelled, so the test holds whatever the formulas are (they are worked out by hand
in test_compare_cli.py, test_stats_epochs.py and test_stats_evidence.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kag.results import OkResult, epoch_result_path, write_result
from tests.commands.test_stats_evidence import kag_result
from tests.commands.test_stats_trees_blocks import kag

MCQ = {"type": "MCQ", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"}
DATASETS = {
    "d": {
        "q1": {"input": "q1?", "output": MCQ, "evidence": ["Scurvy"]},
        "q2": {"input": "q2?", "output": MCQ, "evidence": ["Iron"]},
        "q3": {"input": "q3?", "output": MCQ, "evidence": ["Zinc"]},
        "q4": {"input": "q4?", "output": MCQ},
    },
}
# Setup -> question -> its answers, epoch 1 first. Epoch 1 alone ranks y above x (4/4 vs
# 2/4), the mean scores the reverse (x: 2/3, 2/3, 1, 1/3 averaging 2/3; y: 1/2, 1/2, 1, 1/2
# averaging 5/8), so a comparison on epoch 1 cannot pass for one on the means.
EPOCHS = {
    "x": {"q1": ["A", "A", "B"], "q2": ["B", "A", "A"], "q3": ["A", "A", "A"], "q4": ["B", "B", "A"]},
    "y": {"q1": ["A", "B"], "q2": ["A", "B"], "q3": ["A", "A"], "q4": ["A", "B"]},
}
# The retrieving setup "kag": question -> (retrieval text, answer); q1 and q3 hit their
# evidence, q2 misses it, q4 lists none.
KAG = {"q1": ("Scurvy is a disease.", "A"), "q2": ("nothing", "B"), "q3": ("zinc", "B"), "q4": ("x", "A")}
# The setup without retrieval, named to sort after every other (the order of the setups is
# then the same, labelled or not).
NATIVE = "z-native"
NATIVE_ANSWERS = {"q1": "B", "q2": "A", "q3": "B", "q4": "B"}
# Which tree of the two holds each setup; the one tree holds them all.
TREE_OF = {"kag": "a", "x": "a", "y": "b", NATIVE: "b"}


def write_setup(root: Path, setup: str) -> None:
    if setup in EPOCHS:
        for question, answers in EPOCHS[setup].items():
            for epoch, answer in enumerate(answers, start=1):
                write_result(epoch_result_path(root, "d", question, "", setup, epoch), OkResult(answer))
    elif setup == "kag":
        for question, (text, answer) in KAG.items():
            write_result(epoch_result_path(root, "d", question, "", setup, 1), kag_result(text, answer))
    else:
        for question, answer in NATIVE_ANSWERS.items():
            write_result(epoch_result_path(root, "d", question, "", setup, 1), OkResult(answer))


@pytest.fixture
def trees(tmp_path: Path) -> Path:
    """datasets.json; ``one`` holds every setup, ``a`` and ``b`` the same files split in two."""
    (tmp_path / "datasets.json").write_text(json.dumps(DATASETS))
    for setup, label in TREE_OF.items():
        write_setup(tmp_path / "one", setup)
        write_setup(tmp_path / label, setup)
    return tmp_path


def run(cwd: Path, *args: str) -> tuple[Any, str]:
    """The JSON document on stdout and the messages on stderr."""
    done = kag(cwd, "stats", *args, "-d", "datasets.json", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def one_tree(cwd: Path, *args: str) -> tuple[Any, str]:
    return run(cwd, *args, "-r", "one")


def two_trees(cwd: Path, *args: str) -> tuple[Any, str]:
    """The document and messages of the two labelled trees, with the names and paths of the
    one tree."""
    document, messages = run(cwd, *args, "-r", "a=a", "-r", "b=b")
    for setup in TREE_OF:
        messages = messages.replace(labelled(setup), setup)
    return unlabelled(document), messages


def unlabelled(value: Any, key: str | None = None) -> Any:
    """``value`` with each ``LABEL/setup`` name (a string, or a key) back to ``setup``, and
    each file path from its tree back to the same file's in ``one``."""
    if isinstance(value, dict):
        return {unlabelled(k): unlabelled(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [unlabelled(v) for v in value]
    if isinstance(value, str) and key == "path":
        tree, _, rest = value.partition("/")
        assert rest.endswith(".json") and tree == TREE_OF[Path(rest).stem], value
        return f"one/{rest}"
    if isinstance(value, str) and "/" in value:
        label, _, setup = value.partition("/")
        assert TREE_OF.get(setup) == label, value
        return setup
    return value


def labelled(setup: str) -> str:
    return f"{TREE_OF[setup]}/{setup}"


def test_compare_epochs_all_over_two_trees_is_on_the_mean_scores(trees: Path) -> None:
    alone = one_tree(trees, "compare", "--epochs", "all", "--baseline", "y")
    # The mean-score comparison itself, not an epoch-1 one: x's mean over its 3 epochs.
    assert alone[0]["epochs"] == {"kag": 1, "x": 3, "y": 2, NATIVE: 1}
    [x] = [c for c in alone[0]["comparisons"] if c["setup"] == "x"]
    assert x["setup_mean"] == pytest.approx(2 / 3) and x["baseline_mean"] == pytest.approx(5 / 8)
    assert two_trees(trees, "compare", "--epochs", "all", "--baseline", labelled("y")) == alone
    # Without --baseline, the best mean score (x; y on epoch 1) is the baseline of both.
    best = one_tree(trees, "compare", "--epochs", "all")
    assert best[0]["baseline"] == "x"
    assert two_trees(trees, "compare", "--epochs", "all") == best


def test_compare_epoch_one_over_two_trees(trees: Path) -> None:
    alone = one_tree(trees, "compare")
    assert alone[0]["baseline"] == "y"
    assert two_trees(trees, "compare") == alone


def test_impact_over_two_trees_has_the_evidence_buckets(trees: Path) -> None:
    alone = one_tree(trees, "impact", "kag", "--native", NATIVE)
    # q1 and q3 hit their evidence, q2 misses it, q4 lists none.
    [impact] = alone[0]["impacts"]
    assert [(r["label"], r["n"]) for r in impact["evidence_buckets"]] == [
        ("1-10 · hit", 2),
        ("1-10 · missed", 1),
    ]
    assert two_trees(trees, "impact", labelled("kag"), "--native", labelled(NATIVE)) == alone


def test_flips_over_two_trees(trees: Path) -> None:
    alone = one_tree(trees, "flips", "kag", NATIVE)
    assert alone[0]["a_only"] and alone[0]["b_only"]
    assert two_trees(trees, "flips", labelled("kag"), labelled(NATIVE)) == alone
