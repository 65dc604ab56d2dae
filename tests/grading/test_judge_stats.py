"""kag.grading.judge_stats: majority verdicts of repeats and judges (ties unusable), labels of
several annotators, and every figure hand-computed on a small case."""

from __future__ import annotations

import pytest

from kag.errors import UsageError
from kag.grading.judge import Judge, JudgedItem, JudgeItem, JudgeRun, Kind, Verdict
from kag.grading.judge_labels import Label
from kag.grading.judge_stats import judge_statistics, majority, majority_label, pair_judges

C, I, U = Verdict.CORRECT, Verdict.INCORRECT, Verdict.UNUSABLE


def item(q: str, setup: str = "s", exact: bool = True) -> JudgeItem:
    return JudgeItem("d", q, setup, Kind.OPEN, f"q{q}", "ref", f"r{q}", exact)


def run(items: list[JudgeItem], verdicts: list[Verdict]) -> JudgeRun:
    return JudgeRun(
        tuple(JudgedItem(i, v, cached=True) for i, v in zip(items, verdicts, strict=True)), 0, 0.0
    )


def test_majority_and_ties() -> None:
    assert majority([C, C, I]) is C
    assert majority([C, I]) is U  # a tie
    assert majority([C, U, U]) is C  # unusable verdicts do not vote
    assert majority([U, U]) is U and majority([]) is U
    assert majority_label([True, False, True]) is True
    assert majority_label([True, False]) is None


def test_two_judges_with_repeats_and_labels_hand_computed() -> None:
    items = [item(str(n)) for n in range(4)]
    m, n = Judge("p", "m"), Judge("p", "n")
    runs = [
        [run(items, [C, C, I, U]), run(items, [C, I, I, U])],  # m: C, tie->U, I, U; the same 3 times in 4
        [run(items, [C, C, C, I])],  # n once
    ]
    labels = [
        Label("d", "0", "s", True, "x"),
        Label("d", "0", "s", True, "y"),
        Label("d", "1", "s", True, "x"),
        Label("d", "2", "s", True, "x"),
        Label("d", "2", "s", False, "y"),  # a tie of annotators: no label
        Label("d", "9", "s", True, "x"),  # no such answer
    ]
    stats = judge_statistics(items, [m, n], runs, labels)
    combined = [j.verdict for j in stats.combined]
    # 0: m C, n C -> C; 1: m U, n C -> C; 2: m I, n C -> tie U; 3: m U, n I -> I
    assert combined == [C, C, U, I]
    assert stats.unmatched_labels == 1
    assert dict(stats.consistency) == {m: pytest.approx(0.75), n: None}
    (s,) = stats.setups
    assert (s.summary.correct, s.summary.incorrect, s.summary.unusable) == (2, 1, 1)
    assert s.summary.accuracy == pytest.approx(2 / 3)
    assert [(j.accuracy, j.unusable) for j in s.judges] == [(pytest.approx(0.5), 2), (pytest.approx(0.75), 0)]
    # Answers both judges rated: 0 (C, C) and 2 (I, C): kappa of [T, F] vs [T, T] is 0.
    (pair,) = s.judges_kappa
    assert pair.n == 2 and pair.kappa == pytest.approx(0.0)
    # Labels: 0 -> True, 1 -> True, 2 -> tie (no label), 3 -> none. Usable verdicts on 0, 1: C, C.
    assert s.labels is not None and s.labels.n == 2 and s.labels.agreement == 1.0
    assert s.labels.kappa is None  # everyone says correct: kappa undefined
    assert s.labels.confusion == ((2, 0), (0, 0))
    # PPI: unlabelled usable answers are 3 (I) only: 0 + mean(label - judge) = 0 + 0.
    assert s.corrected_accuracy is not None and s.corrected_accuracy.estimate == pytest.approx(0.0)
    assert s.labelled_accuracy is not None and s.labelled_accuracy.estimate == 1.0
    assert stats.overall.summary.judged == 4


def test_no_labels_file_gives_no_label_figures() -> None:
    items = [item("0", "a"), item("1", "b")]
    stats = judge_statistics(items, [Judge("p", "m")], [[run(items, [C, I])]])
    assert [s.setup for s in stats.setups] == ["a", "b"] and stats.overall.setup is None
    assert all(
        s.labels is None and s.corrected_accuracy is None and s.judges_alpha is None for s in stats.setups
    )
    assert stats.repeats == 1 and dict(stats.consistency) == {Judge("p", "m"): None}


def test_pair_judges() -> None:
    assert pair_judges(["p"], ["a", "b"]) == (Judge("p", "a"), Judge("p", "b"))
    assert pair_judges(["p", "q"], ["a"]) == (Judge("p", "a"), Judge("q", "a"))
    assert pair_judges(["p", "q"], ["a", "b"]) == (Judge("p", "a"), Judge("q", "b"))
    assert pair_judges(["p", "p"], ["a", "a"]) == (Judge("p", "a"),)
    with pytest.raises(UsageError, match="2 -p and 3 -m"):
        pair_judges(["p", "q"], ["a", "b", "c"])
