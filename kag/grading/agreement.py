"""Agreement between raters of a binary verdict: Cohen's kappa (with a bootstrap interval),
the confusion matrix, sensitivity and specificity, Krippendorff's alpha (nominal).

One statistic per function; each docstring gives the formula and the edge cases. The
ratings are booleans (True = correct); a missing rating (an unusable verdict, an annotator
who did not label an answer) is None where a function accepts it. Every function returns a
Python float, or None where the statistic is undefined.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

#: Resamples of :func:`kappa_bootstrap_ci` and its seed (the interval is the same on every run).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0

Confusion = tuple[tuple[int, int], tuple[int, int]]


def _pairs(a: Sequence[bool], b: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    if len(a) != len(b):
        raise ValueError(f"two raters of unequal length ({len(a)} and {len(b)})")
    return np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)


def percent_agreement(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """p_o = (1/n) Σ [a_i = b_i]: the share of items both raters rate alike; None when n = 0."""
    x, y = _pairs(a, b)
    return float(np.mean(x == y)) if len(x) else None


def confusion_matrix(truth: Sequence[bool], rated: Sequence[bool]) -> Confusion:
    """``[[truth correct & rated correct, truth correct & rated incorrect],
    [truth incorrect & rated correct, truth incorrect & rated incorrect]]`` (counts; zeros
    when empty). ``truth`` is the reference rater (the human label), ``rated`` the other."""
    x, y = _pairs(truth, rated)
    return (
        (int(np.sum(x & y)), int(np.sum(x & ~y))),
        (int(np.sum(~x & y)), int(np.sum(~x & ~y))),
    )


def sensitivity(confusion: Confusion) -> float | None:
    """TP / (TP + FN): of the answers the reference calls correct, the share the rater calls
    correct (recall of "correct"); None when the reference calls none correct."""
    (tp, fn), _ = confusion
    return tp / (tp + fn) if tp + fn else None


def specificity(confusion: Confusion) -> float | None:
    """TN / (TN + FP): of the answers the reference calls incorrect, the share the rater calls
    incorrect; None when the reference calls none incorrect."""
    _, (fp, tn) = confusion
    return tn / (tn + fp) if tn + fp else None


def _kappa(x: np.ndarray, y: np.ndarray) -> float | None:
    n = len(x)
    if n == 0:
        return None
    p_o = np.mean(x == y)
    pa, pb = np.mean(x), np.mean(y)
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0:
        return None
    return float((p_o - p_e) / (1 - p_e))


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters on the same n items: κ = (p_o − p_e) / (1 − p_e), where
    p_o is the observed agreement and p_e = p_a·p_b + (1 − p_a)(1 − p_b) the agreement
    expected by chance from each rater's share p of "correct".

    1 is perfect agreement, 0 what chance gives, below 0 worse than chance. None when n = 0
    or p_e = 1 (both raters give one and the same verdict to every item: chance explains
    everything, and scikit-learn returns NaN).
    """
    return _kappa(*_pairs(a, b))


def kappa_bootstrap_ci(
    a: Sequence[bool],
    b: Sequence[bool],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """The percentile bootstrap 95% interval of :func:`cohen_kappa`: ``resamples`` samples of
    the n items drawn with replacement (numpy's PCG64 seeded with ``seed``, so the interval
    is reproducible), κ of each, then their 2.5th and 97.5th percentiles (linear
    interpolation). A resample whose κ is undefined (p_e = 1) is left out. None when n < 2
    or no resample has a κ."""
    x, y = _pairs(a, b)
    n = len(x)
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(resamples, n))
    xs, ys = x[draws], y[draws]
    p_o = np.mean(xs == ys, axis=1)
    pa, pb = np.mean(xs, axis=1), np.mean(ys, axis=1)
    p_e = pa * pb + (1 - pa) * (1 - pb)
    defined = p_e < 1.0
    if not defined.any():
        return None
    kappas = (p_o[defined] - p_e[defined]) / (1 - p_e[defined])
    low, high = np.percentile(kappas, [2.5, 97.5])
    return float(low), float(high)


def krippendorff_alpha_nominal(units: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's alpha for nominal data. ``units`` holds, per item, every rater's value
    (None = missing; raters need not be the same from one item to the next).

    Items with fewer than two values are left out (they cannot be paired). With o_ck the
    coincidence matrix (each ordered pair of values c, k of two different raters on the same
    item adds 1/(m_u − 1), m_u the item's number of values), n_c = Σ_k o_ck and n = Σ_c n_c:

        α = 1 − (n − 1) · Σ_{c≠k} o_ck / Σ_{c≠k} n_c·n_k

    1 is perfect agreement, 0 chance. None when fewer than two values are pairable or every
    value is the same (no expected disagreement; the ``krippendorff`` package raises then).
    """
    values = sorted({v for unit in units for v in unit if v is not None}, key=repr)
    index = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for unit in units:
        present = [index[v] for v in unit if v is not None]
        m = len(present)
        if m < 2:
            continue
        counts = np.bincount(present, minlength=len(values)).astype(float)
        o += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n < 2:
        return None
    observed = o.sum() - np.trace(o)
    expected = n_c.sum() ** 2 - np.sum(n_c**2)
    if expected == 0:
        return None
    return float(1.0 - (n - 1) * observed / expected)


def consistency_rate(repeats: Sequence[Sequence[Hashable]]) -> float | None:
    """Self-consistency: the share of items whose repeated verdicts (one sequence per item,
    an unusable verdict a value of its own) are all the same; None when no item has two or
    more verdicts."""
    rated = [r for r in repeats if len(r) >= 2]
    if not rated:
        return None
    return sum(1 for r in rated if len(set(r)) == 1) / len(rated)
