"""epochs: hand-computed summaries, the handling of incomplete questions, and invariants."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.grading.epochs import EpochOutcome, majority_correct, summarize_epochs


def ok(answer: str) -> EpochOutcome:
    return EpochOutcome(True, answer)


def wrong(answer: str | None) -> EpochOutcome:
    return EpochOutcome(False, answer)


# q1 always right, q2 right once then a stable wrong answer, q3 wrong twice around an error file.
THREE = [
    [ok("A"), ok("A"), ok("A")],
    [ok("A"), wrong("B"), wrong("B")],
    [wrong("C"), wrong(None), wrong("C")],
]


def test_hand_computed_three_by_three() -> None:
    summary = summarize_epochs(THREE)
    assert summary is not None
    assert (summary.n, summary.questions, summary.incomplete) == (3, 3, 0)
    # per-epoch accuracies 2/3, 1/3, 1/3 -> mean 4/9 (= mean of p = 1, 1/3, 0)
    assert summary.mean_accuracy == pytest.approx(4 / 9)
    # deviations 5/9, -1/9, -4/9: squares sum 42/81; / (3·2) = 7/81 -> sqrt(7)/9
    assert summary.stderr == pytest.approx(math.sqrt(7) / 9)
    assert summary.pass_at_k == pytest.approx(2 / 3)  # q1, q2
    assert summary.maj_at_k == pytest.approx(1 / 3)  # q1 only: q2's majority is B, q3's is C
    assert summary.consistent == pytest.approx(2 / 3)  # q1 all right, q3 all wrong
    # c = 3, 1, 0 of 3: pass@2 = (1 + (1 - C(2,2)/C(3,2)) + 0) / 3 = (1 + 2/3) / 3 = 5/9
    assert list(summary.reduced["pass_at"]) == [1, 2, 3]
    assert summary.reduced["pass_at"][1] == pytest.approx(4 / 9)
    assert summary.reduced["pass_at"][2] == pytest.approx(5 / 9)
    assert summary.reduced["pass_at"][3] == summary.pass_at_k


def test_one_epoch_is_binomial() -> None:
    summary = summarize_epochs([[ok("A")], [ok("B")], [wrong("C")], [wrong("D")], [wrong(None)]])
    assert summary is not None
    assert summary.mean_accuracy == pytest.approx(0.4)
    assert summary.stderr == pytest.approx(math.sqrt(0.4 * 0.6 / 4))  # sqrt(m(1-m)/(Q-1)) = 0.2449...
    assert summary.pass_at_k == summary.maj_at_k == pytest.approx(0.4)
    assert summary.consistent == 1.0


def test_incomplete_questions_are_left_out_and_counted() -> None:
    summary = summarize_epochs([*THREE, [ok("A"), ok("A")]])
    assert summary is not None
    assert (summary.n, summary.questions, summary.incomplete) == (3, 3, 1)
    assert summary.mean_accuracy == pytest.approx(4 / 9)
    # with n=2 every question is complete; q1..q3 keep their first two epochs
    two = summarize_epochs([*THREE, [ok("A"), ok("A")]], n=2)
    assert two is not None
    assert (two.questions, two.incomplete) == (4, 0)
    # p = 1, 1/2, 0, 1 -> mean 5/8; deviations 3/8, -1/8, -5/8, 3/8 -> squares 44/64; /(4·3) -> 11/192
    assert two.mean_accuracy == pytest.approx(5 / 8)
    assert two.stderr == pytest.approx(math.sqrt(11 / 192))
    assert two.pass_at_k == pytest.approx(3 / 4)
    assert two.maj_at_k == pytest.approx(2 / 4)  # q2 ties A/B: none wins
    assert two.consistent == pytest.approx(3 / 4)


def test_nothing_to_measure() -> None:
    assert summarize_epochs([]) is None
    assert summarize_epochs([[ok("A")]], n=2) is None
    assert summarize_epochs([[ok("A")]], n=0) is None
    single = summarize_epochs([[ok("A"), wrong("B")]])
    assert single is not None and single.stderr is None  # one cluster: undefined
    with pytest.raises(ValueError, match=">= 0"):
        summarize_epochs([[ok("A")]], n=-1)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([ok("A"), wrong("B")], False),  # tie: none wins
        ([ok("A"), wrong(None), wrong(None)], False),  # "no answer" wins, never correct
        ([ok(" a\n"), ok("A"), wrong("B")], True),  # answers compare under the grading rule
        ([wrong("B"), ok("A"), wrong("b")], False),
        ([ok("A"), ok("A"), wrong("B"), wrong("B"), wrong(None)], False),  # 2-2 tie at the top
        ([ok("yes")], True),
    ],
)
def test_majority(outcomes: list[EpochOutcome], expected: bool) -> None:
    assert majority_correct(outcomes) is expected


def inspect_clustered_stderr(questions: list[list[EpochOutcome]]) -> float:
    """inspect_ai's clustered stderr, transcribed over the flat list of samples."""
    values = np.array([float(o.correct) for q in questions for o in q])
    clusters = np.array([i for i, q in enumerate(questions) for _ in q])
    mean = values.mean()
    variance = sum(
        np.outer(values[clusters == c] - mean, values[clusters == c] - mean).sum()
        for c in np.unique(clusters)
    )
    count = len(questions)
    return float(np.sqrt(variance * count / (count - 1)) / len(values))


outcome = st.builds(EpochOutcome, st.booleans(), st.sampled_from(["A", "b", "C", None]))


@st.composite
def runs(draw: st.DrawFn) -> list[list[EpochOutcome]]:
    n = draw(st.integers(1, 5))
    return draw(st.lists(st.lists(outcome, min_size=n, max_size=n), min_size=1, max_size=12))


@given(runs())
def test_invariants(questions: list[list[EpochOutcome]]) -> None:
    summary = summarize_epochs(questions)
    assert summary is not None
    for share in (summary.mean_accuracy, summary.pass_at_k, summary.maj_at_k, summary.consistent):
        assert 0.0 <= share <= 1.0
    assert summary.maj_at_k <= summary.pass_at_k
    assert summary.pass_at_k >= summary.mean_accuracy - 1e-12
    all_correct = sum(all(o.correct for o in q) for q in questions) / len(questions)
    assert all_correct == pytest.approx(summary.consistent + summary.pass_at_k - 1)
    assert summary.mean_accuracy >= all_correct - 1e-12
    # pass@1 is the mean score, pass@N the share with a correct epoch, and k only helps.
    passes = [summary.reduced["pass_at"][k] for k in range(1, summary.n + 1)]
    assert list(summary.reduced["pass_at"]) == list(range(1, summary.n + 1))
    assert passes[0] == pytest.approx(summary.mean_accuracy)
    assert passes[-1] == summary.pass_at_k
    assert all(a <= b for a, b in itertools.pairwise(passes))
    per_epoch = [sum(q[e].correct for q in questions) / len(questions) for e in range(summary.n)]
    assert summary.mean_accuracy == pytest.approx(sum(per_epoch) / summary.n)
    if len(questions) >= 2:
        assert summary.stderr == pytest.approx(
            inspect_clustered_stderr(questions), abs=1e-7
        )  # sqrt of rounding noise
    if summary.n == 1:
        m = summary.mean_accuracy
        assert summary.pass_at_k == pytest.approx(m)
        assert summary.consistent == 1.0
        if len(questions) >= 2:
            assert summary.stderr == pytest.approx(math.sqrt(m * (1 - m) / (len(questions) - 1)))
