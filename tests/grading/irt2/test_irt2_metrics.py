"""Rank metrics: hand-computed values, edge cases, and exactness against statistics.mean."""

from __future__ import annotations

import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.grading.irt2.metrics import exact_mean, hits_at_k, macro, micro, query_means, reciprocal_rank


def test_reciprocal_rank_hand_values() -> None:
    ranks = np.array([1, 2, 4, 0, 3.5, 100])
    assert reciprocal_rank(ranks).tolist() == [1.0, 0.5, 0.25, 0.0, 1 / 3.5, 0.01]


def test_reciprocal_rank_is_python_division() -> None:
    # The reference computes 1 / rank in Python; numpy's division must round the same way.
    ranks = np.arange(1, 5000)
    assert reciprocal_rank(ranks).tolist() == [1 / r for r in range(1, 5000)]


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (1, [1.0, 0.0, 0.0, 0.0, 0.0]),
        (2, [1.0, 1.0, 0.0, 0.0, 0.0]),
        (3, [1.0, 1.0, 0.0, 1.0, 0.0]),  # 2.5 <= 3
        (10, [1.0, 1.0, 1.0, 1.0, 0.0]),  # k past every rank: every found target hits
    ],
)
def test_hits_at_k(k: int, expected: list[float]) -> None:
    ranks = np.array([1, 2, 10, 2.5, 0])  # 0 is a miss and never hits
    assert hits_at_k(ranks, k).tolist() == expected


def test_hits_at_k_rejects_non_positive_k() -> None:
    with pytest.raises(ValueError, match="positive"):
        hits_at_k(np.array([1]), 0)


def test_exact_mean_edge_cases() -> None:
    assert exact_mean(np.array([])) == 0.0  # the mean of nothing is 0
    assert exact_mean(np.array([0.25])) == 0.25
    assert exact_mean(np.array([1 / 3] * 7)) == 1 / 3


def test_exact_mean_is_correctly_rounded_where_naive_sums_are_not() -> None:
    values = np.array([1.0, 1e-16, 1e-16, 1e-16, 1e-16])
    exact = Fraction(1) + 4 * Fraction(1e-16)
    assert exact_mean(values) == float(exact / 5)
    assert sum(values.tolist()) / 5 != float(exact / 5)  # the naive sum loses the small terms


finite = st.floats(min_value=0, max_value=1, allow_nan=False, allow_infinity=False)
reciprocals = st.integers(min_value=0, max_value=300).map(lambda r: 1 / r if r else 0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(finite, reciprocals), max_size=60))
def test_exact_mean_equals_statistics_mean(values: list[float]) -> None:
    expected = statistics.mean(values) if values else 0
    assert exact_mean(np.array(values, dtype=np.float64)) == expected


hits = st.sampled_from([0.0, 1.0])
# Values whose common denominator is far past 64 bits: the sums are Python ints.
wide = st.one_of(finite, st.sampled_from([5e-324, 1e-300, 1e300, 2.0**-1000]))


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        *(st.lists(st.lists(v, min_size=1, max_size=7), max_size=25) for v in (reciprocals, hits, wide))
    )
)
def test_query_means_equal_statistics_mean_per_query(groups: list[list[float]]) -> None:
    values = np.array([v for g in groups for v in g], dtype=np.float64)
    ptr = np.concatenate(([0], np.cumsum([len(g) for g in groups]))).astype(np.int64)
    means = query_means(values, ptr)
    assert means.tolist() == [statistics.mean(g) for g in groups]
    assert macro(values, ptr) == (statistics.mean([statistics.mean(g) for g in groups]) if groups else 0)


def test_query_means_of_a_query_without_targets_is_zero() -> None:
    assert query_means(np.array([0.5]), np.array([0, 0, 1])).tolist() == [0.0, 0.5]


def test_micro_and_macro_by_hand() -> None:
    # Query A has ranks 1 and 4, query B rank 2, query C a miss.
    rr = reciprocal_rank(np.array([1, 4, 2, 0]))
    ptr = np.array([0, 2, 3, 4])
    assert micro(rr) == float(Fraction(1 + Fraction(1, 4) + Fraction(1, 2), 4))  # 7/16
    assert macro(rr, ptr) == float((Fraction(5, 8) + Fraction(1, 2) + 0) / 3)  # 3/8
    h1 = hits_at_k(np.array([1, 4, 2, 0]), 1)
    assert micro(h1) == 0.25
    assert macro(h1, ptr) == float(Fraction(1, 2) / 3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=40))
def test_hits_at_1_le_mrr_le_hits_at_n(ranks: list[int]) -> None:
    r = np.array(ranks, dtype=np.float64)
    mrr = micro(reciprocal_rank(r))
    assert 0.0 <= micro(hits_at_k(r, 1)) <= mrr <= micro(hits_at_k(r, 50)) <= 1.0
