"""Grading of open (free-form) questions: datasets entries ``{"type": "Open", "answers": [...]}``.

Per file (:func:`grade_open_response`): exact match and token F1 after SQuAD v1.1
normalization, each the best over the accepted answers (:mod:`kag.grading.open_answers`);
an ``error`` file scores 0 on both. Per block, the open measure's means
(:mod:`kag.grading.measures.open`). An accepted answer that normalizes to nothing is no
gold (:func:`usable_open_gold` sets it aside).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kag.errors import InputError
from kag.grading.measures.open import OpenMetrics, open_metrics
from kag.grading.open_answers import exact_match, normalize_answer, token_f1

# Re-exported: the block's open-answer numbers are the open measure's (kag.grading.measures.open).
__all__ = [
    "EmptyGold",
    "OpenMetrics",
    "check_open_gold",
    "empty_gold_warning",
    "empty_open_gold",
    "grade_open_response",
    "open_metrics",
    "usable_open_gold",
]

if TYPE_CHECKING:
    from kag.datasets import Datasets, Question


@dataclass(frozen=True, slots=True)
class EmptyGold:
    """An accepted answer of an open question that normalizes to nothing (``"\\t"``,
    ``"the"``, ``"..."``): only an empty reply could match it. ``item`` counts from 1;
    ``alone`` when the question has no other accepted answer."""

    dataset: str
    question: str
    item: int
    answer: str
    alone: bool

    def describe(self) -> str:
        """``trivia/2: 'output.answers' item 2, 'the'`` (a long answer cut to 40 characters)."""
        shown = repr(self.answer) if len(self.answer) <= 40 else f"{self.answer[:40]!r}..."
        return f"{self.dataset}/{self.question}: 'output.answers' item {self.item}, {shown}"


def empty_open_gold(datasets: Datasets) -> list[EmptyGold]:
    """Every accepted answer of an open question that normalizes to nothing, in file order.
    Linear in the size of the answers."""
    found: list[EmptyGold] = []
    for q in datasets.iter_questions():
        if q.open is None:
            continue
        empty = [i for i, a in enumerate(q.open.answers) if not normalize_answer(a)]
        alone = len(empty) == len(q.open.answers)
        found += (EmptyGold(q.dataset, q.id, i + 1, q.open.answers[i], alone) for i in empty)
    return found


def usable_open_gold(datasets: Datasets) -> tuple[Datasets, list[EmptyGold]]:
    """``datasets`` without the accepted answers that normalize to nothing, and those answers.

    A question left with no accepted answer is not scored (it becomes free-form, as a
    question without ``output``), so that one bad alias never stops the rest of a dataset
    from being graded. ``datasets`` itself is returned when it has none.
    """
    found = empty_open_gold(datasets)
    if not found:
        return datasets, found
    by_question: dict[tuple[str, str], set[int]] = {}
    for gold in found:
        by_question.setdefault((gold.dataset, gold.question), set()).add(gold.item - 1)
    pruned = {name: dict(questions) for name, questions in datasets.datasets.items()}
    for (dataset, qid), items in by_question.items():
        question = pruned[dataset][qid]
        assert question.open is not None
        kept = tuple(a for i, a in enumerate(question.open.answers) if i not in items)
        pruned[dataset][qid] = replace(question, open=replace(question.open, answers=kept) if kept else None)
    return replace(datasets, datasets=pruned), found


def empty_gold_warning(datasets: Datasets, found: Sequence[EmptyGold]) -> str | None:
    """The one warning about ``found`` (None when empty): how many answers are ignored, the
    first, and how many questions are left unscored."""
    if not found:
        return None
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    unscored = len({(g.dataset, g.question) for g in found if g.alone})
    left = f"; {unscored} question(s) left with none are not scored" if unscored else ""
    return (
        f"{datasets.path}: ignored {len(found)} accepted answer(s) that normalize to nothing (case, "
        f"punctuation and articles are ignored: only an empty reply would match them): "
        f"{found[0].describe()}{more}{left}; kag datasets check lists them"
    )


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
    """(EM, F1) of one file: ``response`` None (an error file) scores (0, 0). Accepted
    answers that normalize to nothing are no gold and never match (an empty reply against
    ``["Paris", "the"]`` scores 0); with no other answer, every response scores (0, 0).

    Raises ValueError when ``answers`` is empty (the datasets parser never lets that through).
    """
    if not answers:
        raise ValueError("grade_open_response needs at least one accepted answer")
    gold = [a for a in answers if normalize_answer(a)]
    if response is None or not gold:
        return 0.0, 0.0
    return exact_match(response, gold), token_f1(response, gold)
