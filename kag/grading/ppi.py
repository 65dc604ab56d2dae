"""Prediction-powered inference of an accuracy: the judge's verdicts on many answers,
corrected by human labels on a few (Angelopoulos et al., Science 2023), and the classical
intervals it is shown beside.

One estimate per function; each docstring gives the formula and the edge cases. Values
are 1 (correct) and 0 (incorrect); every interval is the normal one at 95%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The 97.5th percentile of the standard normal distribution: a 95% two-sided interval.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """A mean and its 95% interval (None when the sample is too small for one)."""

    estimate: float
    ci95: tuple[float, float] | None
    n: int


def mean_ci(values: Sequence[float]) -> Estimate | None:
    """The sample mean ȳ and its normal 95% interval ȳ ± z·σ/√n (σ the standard deviation
    with divisor n, as ``ppi_py.classical_mean_ci``). None when n = 0; the interval is None
    when n = 1 (one answer says nothing of the spread)."""
    y = np.asarray(values, dtype=float)
    n = len(y)
    if n == 0:
        return None
    mean = float(y.mean())
    if n < 2:
        return Estimate(mean, None, n)
    half = Z95 * float(y.std()) / math.sqrt(n)
    return Estimate(mean, (mean - half, mean + half), n)


def ppi_mean(
    labels: Sequence[float], judged_labelled: Sequence[float], judged_unlabelled: Sequence[float]
) -> Estimate | None:
    """The prediction-powered estimate of a mean (classic PPI, no power tuning).

    With Y the n human labels, Ŷ the judge's verdicts on the same n answers and Ŷᵘ its
    verdicts on the N answers that have no label:

        θ̂ = mean(Ŷᵘ) + mean(Y − Ŷ)
        σ̂² = var(Ŷᵘ)/N + var(Y − Ŷ)/n      (variances with divisor N, n)
        95% interval: θ̂ ± z·σ̂

    The second term is the rectifier: the judge's average error measured where a human
    looked. Equal to ``ppi_py.ppi_mean_pointestimate`` and ``ppi_mean_ci(..., lam=1)``.
    Valid when the labelled answers are drawn at random from the same answers as the
    unlabelled ones. None when n = 0 or N = 0; the interval is None when n < 2 or N < 2.
    """
    y = np.asarray(labels, dtype=float)
    yhat = np.asarray(judged_labelled, dtype=float)
    unl = np.asarray(judged_unlabelled, dtype=float)
    if len(y) != len(yhat):
        raise ValueError(f"{len(y)} labels for {len(yhat)} verdicts")
    n, big_n = len(y), len(unl)
    if n == 0 or big_n == 0:
        return None
    rectifier = y - yhat
    estimate = float(unl.mean() + rectifier.mean())
    if n < 2 or big_n < 2:
        return Estimate(estimate, None, n)
    sigma = math.sqrt(float(unl.var()) / big_n + float(rectifier.var()) / n)
    return Estimate(estimate, (estimate - Z95 * sigma, estimate + Z95 * sigma), n)
