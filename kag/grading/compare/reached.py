"""Did setup B reach the gold evidence more often than the baseline, and did it use it?

For each setup against the baseline, on the questions both have a retrieval-quality record
for (:mod:`kag.grading.retrieval_quality`: a retrieval and gold evidence), the reached rates
and their difference with McNemar on the discordant questions (b = reached by the setup
only, c = by the baseline only), Holm over the setups; and the accuracy of both on the
questions both reached (whether the gold, once in the prompt, was used).
"""

from __future__ import annotations

__all__ = ["ReachedComparison", "compare_reached"]

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kag.grading.compare.paired import DEFAULT_ALPHA, EXACT_BELOW, McNemar, holm, mcnemar
from kag.grading.compare.records import Answer, index_answers, question_sort_key
from kag.grading.retrieval_quality import is_reached


@dataclass(frozen=True)
class ReachedComparison:
    """One setup against the baseline on the ``n`` questions both retrieved for.

    ``diff`` = reached rate of the setup - the baseline's on those questions (None when
    n = 0, and then no test); ``both`` the questions both reached, with each side's
    correct answers on them.
    """

    setup: str
    baseline: str
    n: int
    setup_reached: int
    baseline_reached: int
    setup_only: int
    baseline_only: int
    test: McNemar | None
    p_holm: float | None
    significant: bool
    both: int
    setup_correct_both: int
    baseline_correct_both: int

    @property
    def setup_rate(self) -> float | None:
        return self.setup_reached / self.n if self.n else None

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_reached / self.n if self.n else None

    @property
    def diff(self) -> float | None:
        return (self.setup_reached - self.baseline_reached) / self.n if self.n else None

    @property
    def setup_accuracy_both(self) -> float | None:
        """The setup's accuracy on the questions both reached; None when there is none."""
        return self.setup_correct_both / self.both if self.both else None

    @property
    def baseline_accuracy_both(self) -> float | None:
        return self.baseline_correct_both / self.both if self.both else None


def compare_reached(
    answers: Iterable[Answer],
    baseline: str,
    setups: Sequence[str],
    alpha: float = DEFAULT_ALPHA,
    exact_below: int = EXACT_BELOW,
) -> tuple[ReachedComparison, ...]:
    """One :class:`ReachedComparison` per setup of ``setups`` (the baseline left out), in
    that order; () when no answer has a retrieval-quality record (evidence was not measured).
    ``significant`` = Holm-adjusted McNemar p <= alpha and b != c."""
    records = index_answers(a for a in answers if a.retrieval_quality is not None)
    if not records:
        return ()
    base = records.get(baseline, {})
    raw = []
    for name in (s for s in setups if s != baseline):
        mine = records.get(name, {})
        keys = sorted(set(mine) & set(base), key=question_sort_key)
        pairs = [(mine[k], base[k]) for k in keys]
        reached = [
            (is_reached(m.retrieval_quality), is_reached(b.retrieval_quality))  # type: ignore[arg-type]
            for m, b in pairs
        ]
        only_a = sum(1 for x, y in reached if x and not y)
        only_b = sum(1 for x, y in reached if y and not x)
        both = [(m, b) for (m, b), (x, y) in zip(pairs, reached, strict=True) if x and y]
        test = mcnemar(only_a, only_b, exact_below) if keys else None
        raw.append(
            (
                name,
                len(keys),
                sum(x for x, _ in reached),
                sum(y for _, y in reached),
                only_a,
                only_b,
                test,
                len(both),
                sum(m.correct for m, _ in both),
                sum(b.correct for _, b in both),
            )
        )
    adjusted = iter(holm([r[6].p_value for r in raw if r[6] is not None]))
    out = []
    for name, n, ra, rb, only_a, only_b, test, n_both, ca, cb in raw:
        p_holm = next(adjusted) if test is not None else None
        out.append(
            ReachedComparison(
                name,
                baseline,
                n,
                ra,
                rb,
                only_a,
                only_b,
                test,
                p_holm,
                p_holm is not None and p_holm <= alpha and only_a != only_b,
                n_both,
                ca,
                cb,
            )
        )
    return tuple(out)
