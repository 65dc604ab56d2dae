"""Rank metrics over per-target records, and their micro and macro means.

A rank ``r`` is the (target-filtered) position of a gold target, 1 = best; ``r = 0``
is a miss. Per-target values come first (``reciprocal_rank``, ``hits_at_k``), then
aggregation: ``micro`` averages over every (query, target) pair, ``macro`` over queries
of each query's own mean. Means are exact: the correctly rounded value of the exact
mean of the float values, which is what the reference's ``statistics.mean`` returns,
so the numbers agree bit for bit, not only within a tolerance.
"""

from __future__ import annotations

import numpy as np


def reciprocal_rank(ranks: np.ndarray) -> np.ndarray:
    """``RR(r) = 1 / r`` for ``r > 0``, and ``0`` for a miss (``r = 0``).

    Ranks may be half-integers (``realistic`` ties). ``1 / r`` is the correctly
    rounded float, as Python's ``1 / rank`` in the reference.
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    out = np.zeros(ranks.shape, dtype=np.float64)
    np.divide(1.0, ranks, out=out, where=ranks > 0)
    return out


def hits_at_k(ranks: np.ndarray, k: int) -> np.ndarray:
    """``hits@k(r) = 1`` if ``0 < r <= k`` else ``0``.

    ``k`` counts target-filtered positions (other gold targets removed): hits@1 means
    no non-gold candidate scored above the target. A miss never hits; a ``k`` beyond
    the row length is fine (every found target then hits). ``k`` must be positive.
    """
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    ranks = np.asarray(ranks, dtype=np.float64)
    return ((ranks > 0) & (ranks <= k)).astype(np.float64)


def exact_mean(values: np.ndarray) -> float:
    """The correctly rounded mean of float values (as ``statistics.mean``); 0.0 if empty.

    Equal values are grouped first, so the exact sum costs one big-integer step per
    distinct value: ``sum = Σ count(v) · v`` with every ``v = n / 2^e`` exactly.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    if not len(values):
        return 0.0
    distinct, counts = np.unique(values, return_counts=True)
    if len(distinct) == 1:
        return float(distinct[0])
    numerators, denominator = _over_common_denominator(distinct)
    numerator = sum(n * int(c) for n, c in zip(numerators, counts.tolist()))
    return float(numerator / (denominator * len(values)))  # int / int is correctly rounded


def query_means(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Exact per-query means of per-target ``values``; query ``i`` owns ``values[ptr[i]:ptr[i+1]]``.

    A query without targets has mean 0. Each distinct value becomes an integer over one
    common power-of-two denominator, so a query's exact sum is a sum of integers (int64
    when it cannot overflow, Python ints otherwise) and one correctly rounded division.
    """
    values = np.asarray(values, dtype=np.float64)
    sizes = np.diff(ptr)
    out = np.zeros(len(sizes), dtype=np.float64)
    single = sizes == 1
    out[single] = values[ptr[:-1][single]]
    several = np.flatnonzero(sizes > 1)
    if not len(several):
        return out
    counts = sizes[several]
    segment = np.cumsum(counts) - counts  # where each query starts among the members
    members = np.arange(int(counts.sum())) + np.repeat(ptr[several] - segment, counts)
    member_values = values[members]
    distinct = np.unique(member_values)
    inverse = np.searchsorted(distinct, member_values)  # unique's return_inverse is slower
    numerators, denominator = _over_common_denominator(distinct)
    if max(abs(n) for n in numerators) * int(counts.max()) >= 2**63:
        sums = np.add.reduceat(np.array(numerators, dtype=object)[inverse], segment).tolist()
        out[several] = [s / (denominator * k) for s, k in zip(sums, counts.tolist())]
        return out
    sums = np.add.reduceat(np.array(numerators, dtype=np.int64)[inverse], segment)
    # A sum within 2**53 is an exact float64, so float division rounds it correctly; the
    # power-of-two denominator then only shifts the exponent (kept far from subnormals).
    small = np.zeros(len(sums), dtype=bool)
    if denominator <= 2**900:
        small = np.abs(sums) <= 2**53
        out[several[small]] = sums[small] / counts[small] / float(denominator)
    big = np.flatnonzero(~small)
    out[several[big]] = [s / (denominator * k) for s, k in zip(sums[big].tolist(), counts[big].tolist())]
    return out


def _over_common_denominator(distinct: np.ndarray) -> tuple[list[int], int]:
    """``distinct[i] == numerators[i] / denominator`` exactly; the denominator is a power of two."""
    ratios = [value.as_integer_ratio() for value in distinct.tolist()]
    denominator = max(d for _, d in ratios)  # powers of two: a common denominator
    return [n * (denominator // d) for n, d in ratios], denominator


def micro(values: np.ndarray) -> float:
    """Mean over every (query, target) pair: the paper's number."""
    return exact_mean(values)


def macro(values: np.ndarray, ptr: np.ndarray) -> float:
    """Mean over queries of each query's mean over its targets."""
    return exact_mean(query_means(values, ptr))
