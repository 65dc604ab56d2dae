"""Grading of open (free-form) questions: datasets entries ``{"type": "Open", "answers": [...]}``.

Per file (:func:`grade_open_response`): exact match and token F1 after SQuAD v1.1
normalization, each the best over the accepted answers (:mod:`kag.grading.open_answers`);
an ``error`` file scores 0 on both. Per block, the open measure's means
(:mod:`kag.grading.measures.open`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kag.errors import InputError
from kag.grading.measures.open import OpenMetrics, open_metrics
from kag.grading.open_answers import exact_match, normalize_answer, token_f1

# Re-exported: the block's open-answer numbers are the open measure's (kag.grading.measures.open).
__all__ = ["OpenMetrics", "check_open_gold", "grade_open_response", "open_metrics"]

if TYPE_CHECKING:
    from kag.datasets import Datasets, Question


def check_open_gold(datasets: Datasets) -> None:
    """Refuse accepted answers that normalize to nothing (``""``, ``"The"``, ``"!!!"``):
    every empty or article-only reply would match them exactly, so they are no gold.

    Raises InputError naming the datasets file, the first such question and answer, and how
    many questions have one. Linear in the size of the answers.
    """
    bad: list[tuple[Question, int]] = []
    for q in datasets.iter_questions():
        if q.open is None:
            continue
        empty = next((i for i, a in enumerate(q.open.answers) if not normalize_answer(a)), None)
        if empty is not None:
            bad.append((q, empty))
    if not bad:
        return
    q, index = bad[0]
    assert q.open is not None
    answer = q.open.answers[index]
    shown = repr(answer) if len(answer) <= 40 else f"{answer[:40]!r}..."
    more = f" ({len(bad) - 1} more question(s) have one)" if len(bad) > 1 else ""
    raise InputError(
        f"{datasets.path}: {q.dataset}/{q.id}: 'output.answers' item {index + 1}, "
        f"{shown}, "
        f"normalizes to nothing (case, punctuation and articles are ignored), so an empty reply "
        f"would match it: it cannot be gold{more}"
    )


def grade_open_response(response: str | None, answers: Sequence[str]) -> tuple[float, float]:
    """(EM, F1) of one file: ``response`` None (an error file) scores (0, 0).

    Raises ValueError when ``answers`` is empty (the datasets parser never lets that through).
    """
    if response is None:
        return 0.0, 0.0
    return exact_match(response, answers), token_f1(response, answers)
