"""Accuracy (``accuracy``): OK, WRONG and ERR of the strict grade, the abstentions and the
answers that are no option key among the WRONG ones, and ACC, PREC and COVER from them.

ACC = OK / TOT, PREC = OK / (OK + WRONG), COVER = (OK + WRONG) / TOT, with
TOT = OK + WRONG + ERR; each None when its denominator is 0. Its interval is
:mod:`.interval`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kag.grading.measures.declarations import TEXT_MD_HTML, Block, Column, JsonKey
from kag.grading.measures.registry import Counters, Measure, register
from kag.grading.percent import pct
from kag.grading.record import GradedFile, Outcome


def accuracy(correct: int, total: int) -> float | None:
    """ACC = OK / TOT, the share of scored files answered correctly; None when TOT = 0."""
    return correct / total if total > 0 else None


def precision(correct: int, parsed: int) -> float | None:
    """PREC = OK / (OK + WRONG), correctness of committed answers; None when nothing committed."""
    return correct / parsed if parsed > 0 else None


def coverage(parsed: int, total: int) -> float | None:
    """COVER = (OK + WRONG) / TOT, the share of scored files that are not errors; None when TOT = 0."""
    return parsed / total if total > 0 else None


@dataclass(slots=True)
class AccuracyCounts(Counters):
    """The strict grade's counters of a block."""

    correct: int = 0
    incorrect: int = 0
    errors: int = 0
    abstentions: int = 0
    non_option_answers: int = 0


def _metric(name: str) -> Callable[[Block], Any]:
    """The block's value ``name`` (a counter, or one of the values this measure declares)."""
    return lambda b: getattr(b.metrics, name)


def _total(c: AccuracyCounts) -> int:
    """TOT = OK + WRONG + ERR."""
    return c.correct + c.incorrect + c.errors


def _parsed(c: AccuracyCounts) -> int:
    """OK + WRONG: files whose model committed to an answer."""
    return c.correct + c.incorrect


def add(counts: AccuracyCounts, graded: GradedFile) -> None:
    """Count the strict grade of one MCQ file (abstained / non-option only on WRONG ones)."""
    outcome = graded.outcome
    if outcome is Outcome.OK:
        counts.correct += 1
    elif outcome is Outcome.WRONG:
        counts.incorrect += 1
        counts.abstentions += graded.abstained
        counts.non_option_answers += graded.non_option
    else:
        counts.errors += 1


MEASURE = register(
    Measure(
        "accuracy",
        AccuracyCounts,
        add,
        needs=frozenset({"outcome", "abstained", "non_option"}),
        values={
            "total": _total,
            "parsed": _parsed,
            "accuracy": lambda c: accuracy(c.correct, _total(c)),
            "precision": lambda c: precision(c.correct, _parsed(c)),
            "coverage": lambda c: coverage(_parsed(c), _total(c)),
        },
        json=tuple(
            JsonKey(key, _metric(key))
            for key in (
                "total",
                "correct",
                "incorrect",
                "errors",
                "parsed",
                "accuracy",
                "precision",
                "coverage",
                "abstentions",
                "non_option_answers",
            )
        ),
        columns=(
            Column("ACC%", lambda b: pct(b.metrics.accuracy), TEXT_MD_HTML, 7),
            Column("PREC%", lambda b: pct(b.metrics.precision), TEXT_MD_HTML, 7),
            Column("COVER%", lambda b: pct(b.metrics.coverage), TEXT_MD_HTML, 8),
            Column("OK", lambda b: str(b.metrics.correct), TEXT_MD_HTML, 5),
            Column("WRONG", lambda b: str(b.metrics.incorrect), TEXT_MD_HTML, 5),
            Column("ERR", lambda b: str(b.metrics.errors), TEXT_MD_HTML, 4),
            Column("TOT", lambda b: str(b.metrics.total), TEXT_MD_HTML, 3),
        ),
    )
)
