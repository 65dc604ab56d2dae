"""Every setup against one baseline: the paired tests of :mod:`.paired` together."""

from __future__ import annotations

__all__ = ["Comparison", "ComparisonRun", "compare_indexed", "compare_setups"]

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from kag.grading.compare.paired import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    EXACT_BELOW,
    BootstrapCI,
    McNemar,
    holm,
    mcnemar,
    paired_bootstrap_diff,
)
from kag.grading.compare.reached import ReachedComparison, compare_reached
from kag.grading.compare.records import Answer, Indexed, index_answers, paired_keys

# ---------------------------------------------------------------- every setup against a baseline


@dataclass(frozen=True)
class Comparison:
    """One setup against the baseline on the n questions both have a graded file for.

    ``setup_only`` (b) = questions the setup gets right and the baseline not; ``baseline_only``
    (c) the reverse. ``diff`` = acc(setup) - acc(baseline) on the paired questions, None
    when n = 0 (then there is no test: ``test``, ``ci`` and ``p_holm`` are None).
    """

    setup: str
    baseline: str
    n: int
    setup_correct: int
    baseline_correct: int
    setup_only: int
    baseline_only: int
    diff: float | None
    ci: BootstrapCI | None
    test: McNemar | None
    p_holm: float | None
    significant: bool

    @property
    def setup_accuracy(self) -> float | None:
        return self.setup_correct / self.n if self.n else None

    @property
    def baseline_accuracy(self) -> float | None:
        return self.baseline_correct / self.n if self.n else None

    @property
    def verdict(self) -> Literal["better", "worse", "no significant difference", "no paired questions"]:
        if self.n == 0 or self.diff is None:
            return "no paired questions"
        if not self.significant:
            return "no significant difference"
        return "better" if self.setup_only > self.baseline_only else "worse"


@dataclass(frozen=True)
class ComparisonRun:
    """Every compared setup against one baseline, with the settings that produced it."""

    baseline: str
    comparisons: tuple[Comparison, ...]
    alpha: float
    seed: int
    resamples: int
    confidence: float
    exact_below: int
    #: Each setup's reached rate against the baseline's (:mod:`.reached`); () without evidence.
    reached: tuple[ReachedComparison, ...] = ()

    @property
    def regressions(self) -> tuple[Comparison, ...]:
        """Setups significantly worse than the baseline after Holm's adjustment."""
        return tuple(c for c in self.comparisons if c.verdict == "worse")


def compare_setups(
    answers: Iterable[Answer],
    baseline: str,
    setups: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    exact_below: int = EXACT_BELOW,
) -> ComparisonRun:
    """Compare each setup (default: every setup but the baseline, by name) to the baseline.

    Per setup: paired questions = questions both have a graded file for (ERR counts as not
    correct); McNemar on the discordant counts; a paired bootstrap CI of the difference
    (each with a fresh generator seeded with ``seed``, so one comparison does not change
    when other setups join the run); then Holm over the m comparisons that have at least
    one paired question. ``significant`` = Holm-adjusted p <= alpha (and b != c, which
    the tests already imply: b = c gives p = 1).
    Raises ValueError when the baseline has no answers (the CLI names the setups).
    With retrieval-quality records (evidence measured), ``reached`` compares the reached
    rates too (:func:`~kag.grading.compare.reached.compare_reached`).
    """
    return compare_indexed(
        index_answers(answers), baseline, setups, alpha, n_resamples, seed, confidence, exact_below
    )


def compare_indexed(
    by_setup: Indexed[Answer],
    baseline: str,
    setups: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    exact_below: int = EXACT_BELOW,
) -> ComparisonRun:
    """:func:`compare_setups` of answers indexed by :func:`index_answers`."""
    if baseline not in by_setup:
        raise ValueError(f"baseline {baseline!r} has no graded answers")
    names = [s for s in (setups if setups is not None else sorted(by_setup)) if s != baseline]
    base = by_setup[baseline]
    pairs = []
    for name in names:
        mine = by_setup.get(name, {})
        keys = paired_keys(mine, base)
        pairs.append((name, [mine[k].correct for k in keys], [base[k].correct for k in keys]))
    comparisons = compare_pairs(pairs, baseline, alpha, n_resamples, seed, confidence, exact_below)
    every = (a for indexed in by_setup.values() for a in indexed.values())
    reached = compare_reached(every, baseline, names, alpha, exact_below)
    return ComparisonRun(baseline, comparisons, alpha, seed, n_resamples, confidence, exact_below, reached)


def compare_pairs(
    pairs: Sequence[tuple[str, Sequence[bool], Sequence[bool]]],
    baseline: str,
    alpha: float,
    n_resamples: int,
    seed: int,
    confidence: float,
    exact_below: int,
) -> tuple[Comparison, ...]:
    """One :class:`Comparison` per (setup, its correctness, the baseline's on the same
    questions): the paired bootstrap of the difference, McNemar on the discordant pairs
    (b = setup only right, c = baseline only right), Holm over the setups with a paired
    question; ``significant`` = Holm-adjusted p <= alpha and b != c. No pair: n = 0, no
    test, no interval."""
    raw: list[tuple[str, int, int, int, int, int, BootstrapCI | None, McNemar | None]] = []
    for name, a, b in pairs:
        only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
        only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
        ci = paired_bootstrap_diff(list(a), list(b), n_resamples, seed, confidence) if a else None
        test = mcnemar(only_a, only_b, exact_below) if a else None
        raw.append((name, len(a), sum(a), sum(b), only_a, only_b, ci, test))
    adjusted = iter(holm([r[7].p_value for r in raw if r[7] is not None]))
    comparisons = []
    for name, n, ca, cb, only_a, only_b, ci, test in raw:
        p_holm = next(adjusted) if test is not None else None
        comparisons.append(
            Comparison(
                setup=name,
                baseline=baseline,
                n=n,
                setup_correct=ca,
                baseline_correct=cb,
                setup_only=only_a,
                baseline_only=only_b,
                diff=(ca - cb) / n if n else None,
                ci=ci,
                test=test,
                p_holm=p_holm,
                significant=p_holm is not None and p_holm <= alpha and only_a != only_b,
            )
        )
    return tuple(comparisons)
