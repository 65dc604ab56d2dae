"""Setups compared on per-question mean scores over repeated samples (``compare --epochs all``).

Per setup with N epochs (the most any of its questions has in the tree; 1 for a setup
without epochs), a question's score is p = (correct epochs among its first N) / N, and a
question with fewer than N epochs is left out (as in :mod:`kag.grading.epochs`). "Correct"
is the grade the comparison is asked for (``--grade``): the strict one, or the extracted one
of a run graded with ``--extract``, in every epoch alike. Two
setups are paired on the questions both have a score for; ``diff`` = mean(p_setup −
p_baseline).

The test is a paired bootstrap over questions, not McNemar (McNemar needs a right/wrong
outcome per question; a mean score is not one): the replicates resample the questions
with replacement (:func:`paired_bootstrap_mean_diff`), the interval is their percentile
interval, and the two-sided p-value is the share of null-centred replicates at least as
far from 0 as the observed difference, (1 + #{|d*_r − d̄| ≥ |d̄|}) / (R + 1) (Davison &
Hinkley 1997, §4.4, the +1 keeping p above 0). Holm's adjustment then runs over the
comparisons, as in :mod:`.setups`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kag.grading.compare.paired import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    BootstrapCI,
    check_paired,
    holm,
    multinomial_replicates,
)
from kag.grading.mcq.epoch_walk import extracted_epochs
from kag.grading.mcq.metrics import GradeRun
from kag.grading.record import Outcome, question_sort_key

#: setup -> (dataset, question) -> the question's mean score over the setup's N epochs.
QuestionMeans = Mapping[str, Mapping[tuple[str, str], float]]


@dataclass(frozen=True)
class SetupMeans:
    """The per-question mean scores of every setup, and each setup's N."""

    means: QuestionMeans
    epochs: Mapping[str, int]


def question_means(run: GradeRun, *, extracted: bool = False) -> SetupMeans:
    """Per-question mean scores from a grading run whose request asks for ``records`` and
    ``epochs``, under the strict grade or (``extracted``) the extracted one of a run graded with
    ``extract`` (ERR = not extracted, not correct). Raises ValueError when the run kept no
    records, or has no extracted grade when ``extracted``."""
    if run.records is None:
        raise ValueError("the grading run kept no per-file records (a request asking for 'records')")
    if extracted and run.extract is None:
        raise ValueError("the grading run has no extracted grade (a request with an extract spec)")
    outcomes = run.epochs or {}
    if extracted:
        outcomes = extracted_epochs(outcomes)
    epochs: dict[str, int] = {}
    for (setup, _), questions in outcomes.items():
        longest = max((len(q) for q in questions.values()), default=1)
        epochs[setup] = max(epochs.get(setup, 1), longest)
    means: dict[str, dict[tuple[str, str], float]] = {}
    for record in run.records:
        n = epochs.get(record.setup, 1)
        sequence = outcomes.get((record.setup, record.dataset), {}).get(record.question)
        if sequence is None:
            if n > 1:
                continue  # epoch 1 only: fewer than n epochs
            correct = int((record.extracted if extracted else record.outcome) is Outcome.OK)
        elif len(sequence) < n:
            continue
        else:
            correct = sum(o.correct for o in sequence[:n])
        means.setdefault(record.setup, {})[(record.dataset, record.question)] = correct / n
    for setup in epochs:
        means.setdefault(setup, {})
    return SetupMeans(means, {setup: epochs.get(setup, 1) for setup in sorted(means)})


def paired_bootstrap_mean_diff(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[BootstrapCI, float]:
    """Paired bootstrap of mean(a − b) over the same n questions: the percentile interval,
    and the two-sided p-value of the module docstring.

    A resample draws n questions with replacement; its mean depends only on how many times
    each distinct difference value was drawn, and those counts are Multinomial(n; shares of
    the values), so they are drawn directly (the same distribution as drawing indices, at
    O(resamples · distinct values)). ``numpy.random.default_rng(seed)``, fresh per call.
    n = 0 raises ValueError; lengths must match. All differences 0 gives [0, 0] and p = 1.
    """
    import numpy as np

    n = check_paired(len(a), len(b), n_resamples, confidence)
    counts = Counter(x - y for x, y in zip(a, b, strict=True))
    values = np.array(sorted(counts))
    shares = np.array([counts[v] for v in sorted(counts)]) / n
    estimate = math.fsum(x - y for x, y in zip(a, b, strict=True)) / n
    replicates, low, high = multinomial_replicates(n, values, shares, n_resamples, seed, confidence)
    # A tolerance: the replicates' float sums may miss the estimate by an ulp or so.
    far = int(np.count_nonzero(np.abs(replicates - estimate) >= abs(estimate) - 1e-12))
    p_value = 1.0 if estimate == 0 else min(1.0, (1 + far) / (n_resamples + 1))
    ci = BootstrapCI(estimate, low, high, confidence, n_resamples, seed)
    return ci, p_value


@dataclass(frozen=True)
class MeanComparison:
    """One setup against the baseline on the n questions both have a mean score for."""

    setup: str
    baseline: str
    n: int
    setup_mean: float | None
    baseline_mean: float | None
    diff: float | None
    ci: BootstrapCI | None
    p_value: float | None
    p_holm: float | None
    significant: bool

    @property
    def verdict(self) -> str:
        if self.n == 0 or self.diff is None:
            return "no paired questions"
        if not self.significant:
            return "no significant difference"
        return "better" if self.diff > 0 else "worse"


@dataclass(frozen=True)
class MeanComparisonRun:
    """Every compared setup against one baseline, with each setup's N and the settings."""

    baseline: str
    comparisons: tuple[MeanComparison, ...]
    epochs: Mapping[str, int]
    alpha: float
    seed: int
    resamples: int
    confidence: float

    @property
    def regressions(self) -> tuple[MeanComparison, ...]:
        return tuple(c for c in self.comparisons if c.verdict == "worse")


def best_mean_setup(means: QuestionMeans) -> str:
    """The setup with the highest mean score over its questions (ties: by name)."""
    scored = [(-(math.fsum(m.values()) / len(m)), s) for s, m in means.items() if m]
    if not scored:
        raise ValueError("no setup has a question with all its epochs")
    return min(scored)[1]


def compare_means(
    setup_means: SetupMeans,
    baseline: str,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> MeanComparisonRun:
    """Each setup (by name) against ``baseline`` on their paired questions, Holm over the
    comparisons with at least one; ``significant`` = Holm-adjusted p <= alpha. Raises
    ValueError when the baseline has no scores."""
    means = setup_means.means
    if baseline not in means:
        raise ValueError(f"baseline {baseline!r} has no graded answers")
    base = means[baseline]
    raw: list[tuple[str, list[tuple[str, str]], BootstrapCI | None, float | None]] = []
    for name in sorted(means):
        if name == baseline:
            continue
        mine = means[name]
        keys = sorted(mine.keys() & base.keys(), key=question_sort_key)
        a, b = [mine[k] for k in keys], [base[k] for k in keys]
        ci, p = paired_bootstrap_mean_diff(a, b, n_resamples, seed, confidence) if keys else (None, None)
        raw.append((name, keys, ci, p))
    adjusted = iter(holm([p for *_, p in raw if p is not None]))
    comparisons = []
    for name, keys, ci, p in raw:
        p_holm = next(adjusted) if p is not None else None
        n = len(keys)
        setup_mean = math.fsum(means[name][k] for k in keys) / n if n else None
        baseline_mean = math.fsum(base[k] for k in keys) / n if n else None
        comparisons.append(
            MeanComparison(
                setup=name,
                baseline=baseline,
                n=n,
                setup_mean=setup_mean,
                baseline_mean=baseline_mean,
                diff=ci.estimate if ci is not None else None,
                ci=ci,
                p_value=p,
                p_holm=p_holm,
                significant=p_holm is not None and p_holm <= alpha and ci is not None and ci.estimate != 0,
            )
        )
    return MeanComparisonRun(
        baseline, tuple(comparisons), dict(setup_means.epochs), alpha, seed, n_resamples, confidence
    )


def mean_regression_verdict(run: MeanComparisonRun) -> str | None:
    """Why the regression gate fails on mean scores, or None when it passes."""
    worse = run.regressions
    if not worse:
        return None
    details = "; ".join(
        f"{c.setup}: {100 * (c.diff or 0):+.2f} pp of mean score on {c.n} questions, Holm p = {c.p_holm:.3g}"
        for c in worse
    )
    return f"{len(worse)} setup(s) significantly worse than {run.baseline} at alpha {run.alpha:g}: {details}"
