"""Paired tests of two setups on the same questions: McNemar (exact or chi-squared), a
seeded paired bootstrap of the accuracy difference, and Holm's step-down adjustment."""

from __future__ import annotations

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "EXACT_BELOW",
    "BootstrapCI",
    "McNemar",
    "binomial_two_sided_p",
    "chi2_sf_1df",
    "holm",
    "mcnemar",
    "paired_bootstrap_diff",
]

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: McNemar uses the exact binomial test when the discordant count b + c is below this.
EXACT_BELOW = 25
DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0


# ---------------------------------------------------------------- intervals and tests


def binomial_two_sided_p(k: int, n: int) -> float:
    """Exact two-sided p of k successes in n trials under p = 1/2.

    p = min(1, 2 · Σ_{i=0}^{min(k, n-k)} C(n, i) / 2^n), computed in integers (no rounding
    until the final division). The null distribution is symmetric, so doubling the smaller
    tail equals summing every outcome at most as likely as k. n = 0 gives 1.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    return min(1.0, 2 * tail / 2**n)


def chi2_sf_1df(x: float) -> float:
    """Survival function of the chi-square distribution with 1 degree of freedom.

    P(X > x) = P(|Z| > sqrt(x)) = erfc(sqrt(x / 2)) for x >= 0; 1 for x <= 0.
    """
    if x <= 0:
        return 1.0
    return math.erfc(math.sqrt(x / 2))


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on the discordant pairs of a paired 2x2 table.

    ``b`` = questions only the first setup got right, ``c`` = only the second.
    ``method`` is "exact" (binomial) or "chi2-cc" (chi-square with continuity correction);
    ``statistic`` is the chi-square value for "chi2-cc" and ``min(b, c)`` for "exact".
    """

    b: int
    c: int
    statistic: float
    p_value: float
    method: Literal["exact", "chi2-cc"]

    @property
    def discordant(self) -> int:
        return self.b + self.c


def mcnemar(b: int, c: int, exact_below: int = EXACT_BELOW) -> McNemar:
    """McNemar's test of b (A right, B wrong) against c (A wrong, B right).

    Under H0 (equal accuracy) each discordant pair is a fair coin: b ~ Binomial(b + c, 1/2).

    - b + c < ``exact_below`` (25 by default, the usual textbook rule): exact two-sided
      binomial p, see :func:`binomial_two_sided_p`. b + c = 0 gives p = 1.
    - otherwise Edwards' continuity-corrected statistic
      χ² = max(0, |b - c| - 1)² / (b + c), p = P(χ²₁ > χ²) = erfc(sqrt(χ²/2)).
      The max(0, ·) only matters when b = c, where it gives p = 1 instead of letting the
      correction overshoot past zero.

    Concordant pairs (both right, both wrong) carry no information and are not inputs.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n < exact_below:
        return McNemar(b, c, float(min(b, c)), binomial_two_sided_p(b, n), "exact")
    statistic = max(0, abs(b - c) - 1) ** 2 / n
    return McNemar(b, c, statistic, chi2_sf_1df(statistic), "chi2-cc")


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile interval of a paired accuracy difference and how it was drawn."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int
    seed: int


def paired_bootstrap_diff(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> BootstrapCI:
    """Paired bootstrap percentile CI of acc(A) - acc(B) over the same n questions.

    estimate = (1/n) Σ (a_i - b_i). Each resample draws n question indices with
    replacement and recomputes the mean difference; the interval is the
    ((1-confidence)/2, (1+confidence)/2) quantiles of the ``n_resamples`` replicates
    (numpy's default linear interpolation).

    The difference d_i = a_i - b_i takes only the values +1, -1, 0, so a resample's mean
    depends only on how many +1 and -1 it drew; those counts are jointly
    Multinomial(n; b/n, c/n, 1 - (b+c)/n). Drawing them directly is the same distribution
    as resampling indices, at O(resamples) instead of O(n · resamples) cost.

    Randomness: ``numpy.random.default_rng(seed)`` (PCG64), fresh per call, so a result
    depends only on (a, b, n_resamples, seed, confidence) and the numpy version.
    Edge cases: n = 0 raises ValueError; when no pair is discordant the interval is
    [0, 0]; lengths must match.
    """
    import numpy as np

    n = check_paired(len(a_correct), len(b_correct), n_resamples, confidence)
    b = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if x and not y)
    c = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if y and not x)
    estimate = (b - c) / n
    # The difference values +1, -1, 0 are integers, so each replicate's sum is exact.
    _, low, high = multinomial_replicates(
        n, np.array([1, -1, 0]), [b / n, c / n, (n - b - c) / n], n_resamples, seed, confidence
    )
    return BootstrapCI(float(estimate), low, high, confidence, n_resamples, seed)


def check_paired(len_a: int, len_b: int, n_resamples: int, confidence: float) -> int:
    """n, the common length of two paired samples; ValueError when the lengths differ, n = 0,
    ``n_resamples`` < 1 or ``confidence`` is not in (0, 1)."""
    if len_a != len_b:
        raise ValueError(f"paired samples differ in length: {len_a} vs {len_b}")
    if len_a == 0:
        raise ValueError("no paired questions to resample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return len_a


def multinomial_replicates(
    n: int, values: Any, shares: Any, n_resamples: int, seed: int, confidence: float
) -> tuple[Any, float, float]:
    """The bootstrap replicates of a paired mean difference over n questions whose differences
    take the distinct ``values`` with the given ``shares``, and their percentile interval.

    A resample's mean depends only on how many times each value was drawn, and those counts
    are Multinomial(n; shares): drawn directly with ``numpy.random.default_rng(seed)`` (fresh
    per call), replicate = counts · values / n; the interval is the ((1-confidence)/2,
    (1+confidence)/2) quantiles (numpy's default linear interpolation).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    replicates = rng.multinomial(n, shares, size=n_resamples) @ values / n
    tail = (1 - confidence) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return replicates, float(low), float(high)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    Sort ascending p_(1) <= ... <= p_(m); adjusted p_(i) = min(1, max_{j<=i} (m-j+1)·p_(j)).
    Rejecting where adjusted <= alpha controls the family-wise error rate at alpha.
    Ties keep their input order (the max makes the result the same either way).
    Empty input gives an empty list; m = 1 leaves the p-value unchanged.
    """
    m = len(pvalues)
    for p in pvalues:
        if not 0 <= p <= 1 or math.isnan(p):
            raise ValueError(f"p-values must be in [0, 1], got {p}")
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
