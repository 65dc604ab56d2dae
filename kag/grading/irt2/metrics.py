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
    ratios: list[tuple[int, int]] = [float(v).as_integer_ratio() for v in distinct.tolist()]
    denominator = max(d for _, d in ratios)  # powers of two: a common denominator
    numerator = sum(n * (denominator // d) * int(c) for (n, d), c in zip(ratios, counts.tolist()))
    return float(numerator / (denominator * len(values)))  # int / int is correctly rounded


def query_means(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Exact per-query means of per-target ``values``; query ``i`` owns ``values[ptr[i]:ptr[i+1]]``.

    A query without targets has mean 0. Queries with the same multiset of values share
    one exact computation, so the cost follows the number of distinct value patterns.
    """
    values = np.asarray(values, dtype=np.float64)
    sizes = np.diff(ptr)
    out = np.zeros(len(sizes), dtype=np.float64)
    single = sizes == 1
    out[single] = values[ptr[:-1][single]]
    for size in np.unique(sizes[sizes > 1]).tolist():
        queries = np.flatnonzero(sizes == size)
        block = np.sort(values[ptr[queries][:, None] + np.arange(size)], axis=1)
        same = block[:, 0] == block[:, -1]
        out[queries[same]] = block[same, 0]
        if same.all():
            continue
        queries, block = queries[~same], block[~same]
        patterns, inverse = np.unique(block, axis=0, return_inverse=True)
        means = np.array([_exact_mean_of(row) for row in patterns.tolist()], dtype=np.float64)
        out[queries] = means[inverse.ravel()]
    return out


def _exact_mean_of(row: list[float]) -> float:
    ratios = [value.as_integer_ratio() for value in row]
    denominator = max(d for _, d in ratios)
    return sum(n * (denominator // d) for n, d in ratios) / (denominator * len(row))


def micro(values: np.ndarray) -> float:
    """Mean over every (query, target) pair: the paper's number."""
    return exact_mean(values)


def macro(values: np.ndarray, ptr: np.ndarray) -> float:
    """Mean over queries of each query's mean over its targets."""
    return exact_mean(query_means(values, ptr))
