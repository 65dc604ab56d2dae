"""Pairwise verdicts (``kag stats judge --pairwise A B``): which of two setups' answers to the
same question is better on a criterion, asked in both orders, and the statistics of the
outcome (wins, ties, losses, win rate with its interval, a sign test with Holm's correction
across criteria, the position-consistency rate).

The default criteria and their definitions are those of the GraphRAG paper (Edge et al.,
2024, "From Local to Global"). One statistic per function; each docstring gives the formula
and the edge cases. Per-question records first (:class:`PairOutcome`), aggregation after
(:func:`summarize_criterion`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from kag.errors import UsageError
from kag.generation.templates import compile_template
from kag.grading.extract import strip_think
from kag.grading.judge_prompt import JudgePrompt, sha256_text
from kag.grading.ppi import Z95

#: The GraphRAG paper's criteria and their definitions.
CRITERIA: dict[str, str] = {
    "comprehensiveness": "How much detail does the answer provide to cover all aspects and details of the question?",
    "diversity": "How varied and rich is the answer in providing different perspectives and insights on the question?",
    "empowerment": "How well does the answer help the reader understand and make informed judgements about the topic?",
    "directness": "How specifically and clearly does the answer address the question?",
}
DEFAULT_CRITERIA = tuple(CRITERIA)

PAIRWISE_VARIABLES = frozenset({"QUESTION", "ANSWER_1", "ANSWER_2", "CRITERION", "DEFINITION"})

DEFAULT_PAIRWISE_PROMPT = """\
You will compare two answers to the same question on one criterion.

Question:
{{ QUESTION }}

Answer 1:
{{ ANSWER_1 }}

Answer 2:
{{ ANSWER_2 }}

Criterion: {{ CRITERION }}. {{ DEFINITION }}

Which answer is better on this criterion? Judge only the criterion, not the order in which \
the answers are shown. Reply with exactly one of: ANSWER 1, ANSWER 2, TIE.
"""

_CHOICE = re.compile(r"(?<![A-Za-z0-9_])(ANSWER 1|ANSWER 2|TIE)(?![A-Za-z0-9_])")


class Choice(StrEnum):
    """What one order's reply says: the first answer shown, the second, a tie, or nothing."""

    FIRST = "ANSWER 1"
    SECOND = "ANSWER 2"
    TIE = "TIE"
    UNUSABLE = "UNUSABLE"


class Outcome(StrEnum):
    """Both orders combined, from setup A's side."""

    WIN = "win"
    TIE = "tie"
    LOSS = "loss"
    UNUSABLE = "unusable"


def parse_choice(reply: str) -> Choice:
    """The first whole ``ANSWER 1``, ``ANSWER 2`` or ``TIE`` of ``reply`` (upper case) once its
    reasoning blocks are removed; UNUSABLE when there is none."""
    match = _CHOICE.search(strip_think(reply))
    return Choice.UNUSABLE if match is None else Choice(match.group(1))


def compile_pairwise_prompt(source: str, origin: str) -> JudgePrompt:
    """A pairwise prompt (the same sandbox as every prompt) that may use QUESTION, ANSWER_1,
    ANSWER_2, CRITERION and DEFINITION; ConfigError naming ``origin`` for anything else."""
    template = compile_template(source, origin, PAIRWISE_VARIABLES, "a pairwise judge prompt")
    return JudgePrompt(template, sha256_text(source))


def check_criteria(names: Sequence[str], custom_prompt: bool = False) -> tuple[str, ...]:
    """The criteria named (lower case, in order, without repeats). UsageError for an empty
    name, and, with the built-in prompt, for a criterion it has no definition of (naming the
    known ones); a custom prompt may use any name (its DEFINITION is then empty)."""
    out: list[str] = []
    for name in names:
        name = name.strip().lower()
        if not name:
            raise UsageError("--criteria: an empty criterion name")
        if not custom_prompt and name not in CRITERIA:
            raise UsageError(
                f"--criteria: unknown criterion {name!r} (known: {', '.join(CRITERIA)}; or give --prompt)"
            )
        if name not in out:
            out.append(name)
    return tuple(out)


def combine(a_first: Choice, b_first: Choice) -> Outcome:
    """A's outcome from the verdict with A shown first and the one with B shown first: a win
    when both pick A, a loss when both pick B, a tie when both say TIE or the choice flips
    with the order (each picks the answer in the same place, or one says TIE); UNUSABLE when
    either order gave no verdict."""
    if Choice.UNUSABLE in (a_first, b_first):
        return Outcome.UNUSABLE
    picks_a = (a_first is Choice.FIRST, b_first is Choice.SECOND)
    picks_b = (a_first is Choice.SECOND, b_first is Choice.FIRST)
    if all(picks_a):
        return Outcome.WIN
    if all(picks_b):
        return Outcome.LOSS
    return Outcome.TIE


def position_consistent(a_first: Choice, b_first: Choice) -> bool | None:
    """Whether the two orders name the same answer (or both say TIE); None when either is unusable."""
    if Choice.UNUSABLE in (a_first, b_first):
        return None
    same = {(Choice.FIRST, Choice.SECOND), (Choice.SECOND, Choice.FIRST), (Choice.TIE, Choice.TIE)}
    return (a_first, b_first) in same


def win_rate(wins: int, ties: int, losses: int) -> tuple[float, tuple[float, float] | None] | None:
    """A's win rate w = (wins + ties/2) / n (n = wins + ties + losses), a score of 1, ½ or 0 per
    question, and its normal 95% interval w ± z·s/√n (s the standard deviation of the scores,
    divisor n), clipped to [0, 1]. None when n = 0; the interval None when n = 1."""
    n = wins + ties + losses
    if n == 0:
        return None
    rate = (wins + ties / 2) / n
    if n == 1:
        return rate, None
    second = (wins + ties / 4) / n
    half = Z95 * math.sqrt(max(second - rate * rate, 0.0)) / math.sqrt(n)
    return rate, (max(0.0, rate - half), min(1.0, rate + half))


def sign_test(wins: int, losses: int) -> float | None:
    """The exact two-sided sign test of wins against losses (ties left out): with m = wins +
    losses and k = min(wins, losses), p = min(1, 2 · Σ_{i≤k} C(m, i) / 2^m). None when m = 0."""
    m = wins + losses
    if m == 0:
        return None
    k = min(wins, losses)
    tail = sum(math.comb(m, i) for i in range(k + 1)) / 2**m
    return min(1.0, 2 * tail)


def holm(pvalues: Sequence[float | None]) -> tuple[float | None, ...]:
    """Holm's step-down adjustment of m p-values (None stays None and is not counted): sorted
    ascending, p'_(i) = max_{j≤i} min(1, (m − j + 1) · p_(j))."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        out[index] = running
    return tuple(out)


@dataclass(frozen=True)
class PairOutcome:
    """One question, one criterion: the choice with A shown first, with B shown first, and A's outcome."""

    dataset: str
    question: str
    criterion: str
    a_first: Choice
    b_first: Choice

    @property
    def outcome(self) -> Outcome:
        return combine(self.a_first, self.b_first)


@dataclass(frozen=True)
class CriterionSummary:
    """One criterion over every question; see :func:`summarize_criterion`."""

    criterion: str
    wins: int
    ties: int
    losses: int
    unusable: int
    win_rate: float | None
    win_rate_ci95: tuple[float, float] | None
    p_value: float | None
    p_holm: float | None
    position_consistency: float | None
    first_position_rate: float | None


def summarize_criterion(outcomes: Sequence[PairOutcome], criterion: str) -> CriterionSummary:
    """Counts of A's wins, ties (a flip included), losses and unusable pairs; the win rate and
    its interval (:func:`win_rate`); the sign test (:func:`sign_test`; ``p_holm`` is filled by
    :func:`summarize_pairwise`); the position-consistency rate (the share of usable pairs
    whose two orders agree, :func:`position_consistent`) and the first-position rate (of the
    single-order verdicts that pick an answer, the share that pick the one shown first: 0.5
    for a judge without position bias, 1.0 for one that always picks the first)."""
    mine = [o for o in outcomes if o.criterion == criterion]
    count = {kind: sum(1 for o in mine if o.outcome is kind) for kind in Outcome}
    wins, ties, losses = count[Outcome.WIN], count[Outcome.TIE], count[Outcome.LOSS]
    rate = win_rate(wins, ties, losses)
    consistent = [c for o in mine if (c := position_consistent(o.a_first, o.b_first)) is not None]
    picks = [c for o in mine for c in (o.a_first, o.b_first) if c in (Choice.FIRST, Choice.SECOND)]
    return CriterionSummary(
        criterion,
        wins,
        ties,
        losses,
        count[Outcome.UNUSABLE],
        rate[0] if rate else None,
        rate[1] if rate else None,
        sign_test(wins, losses),
        None,
        sum(consistent) / len(consistent) if consistent else None,
        sum(1 for c in picks if c is Choice.FIRST) / len(picks) if picks else None,
    )


def summarize_pairwise(
    outcomes: Sequence[PairOutcome], criteria: Sequence[str]
) -> tuple[CriterionSummary, ...]:
    """One summary per criterion (in the order given), their sign tests adjusted by :func:`holm`."""
    summaries = [summarize_criterion(outcomes, c) for c in criteria]
    adjusted = holm([s.p_value for s in summaries])
    return tuple(
        CriterionSummary(**{**s.__dict__, "p_holm": p}) for s, p in zip(summaries, adjusted, strict=True)
    )


@dataclass(frozen=True)
class PairwiseReport:
    """Setups ``a`` and ``b`` compared on ``questions`` questions, one summary per criterion."""

    a: str
    b: str
    questions: int
    criteria: tuple[CriterionSummary, ...]
