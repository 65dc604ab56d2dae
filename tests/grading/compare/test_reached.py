"""Reached rates of two setups against gold evidence: paired, McNemar with Holm, and the
accuracy on the questions both reached."""

from __future__ import annotations

import pytest

from kag.grading.compare.reached import compare_reached
from kag.grading.compare.setups import compare_setups
from kag.grading.record import GradedFile, Outcome
from kag.grading.retrieval_quality import QualityRecord


def _answer(setup: str, q: str, reached: bool | None, correct: bool) -> GradedFile:
    quality = None if reached is None else QualityRecord(1, int(reached), 0, 0, 0, 0, None, correct)
    outcome = Outcome.OK if correct else Outcome.WRONG
    return GradedFile("d", q, setup, outcome, "A", retrieval_quality=quality)


def test_reached_rates_are_paired_and_both_reached_accuracy_is_given():
    answers = [
        _answer("base", "1", True, True),
        _answer("base", "2", False, False),
        _answer("base", "3", True, False),
        _answer("base", "4", None, True),  # no retrieval: not paired
        _answer("b", "1", True, False),
        _answer("b", "2", True, True),
        _answer("b", "3", True, True),
        _answer("b", "4", True, True),
    ]
    (r,) = compare_reached(answers, "base", ["b"])
    assert (r.n, r.setup_reached, r.baseline_reached) == (3, 3, 2)
    assert (r.setup_only, r.baseline_only) == (1, 0)
    assert r.diff == pytest.approx(1 / 3)
    assert r.test is not None and r.p_holm == pytest.approx(r.test.p_value)
    assert not r.significant
    # Questions 1 and 3 both reached: b right on 3, base right on 1.
    assert (r.both, r.setup_correct_both, r.baseline_correct_both) == (2, 1, 1)
    assert r.setup_accuracy_both == 0.5


def test_without_records_there_is_no_reached_comparison():
    answers = [_answer("base", "1", None, True), _answer("b", "1", None, False)]
    assert compare_reached(answers, "base", ["b"]) == ()
    assert compare_setups(answers, "base").reached == ()


def test_compare_setups_carries_the_reached_comparisons():
    answers = [_answer("base", "1", False, True), _answer("b", "1", True, True)]
    run = compare_setups(answers, "base")
    assert [r.setup for r in run.reached] == ["b"]
    assert run.reached[0].setup_only == 1
