"""The statistics of `kag stats compare`: hand-computed values, SciPy cross-checks, invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from kag.grading.compare import (
    EXACT_BELOW,
    BootstrapCI,
    binomial_two_sided_p,
    chi2_sf_1df,
    holm,
    mcnemar,
    paired_bootstrap_diff,
)

# ---------------------------------------------------------------- McNemar, by hand

# (b, c, method, statistic, p) worked out on paper:
#   exact: p = 2 * sum_{i<=min(b,c)} C(n,i) / 2^n, n = b + c (capped at 1)
#   chi2-cc: chi2 = (|b-c|-1)^2 / (b+c), p = erfc(sqrt(chi2/2))
MCNEMAR_CASES = [
    (0, 0, "exact", 0.0, 1.0),  # no discordant pair: no evidence
    (0, 5, "exact", 0.0, 2 * 1 / 32),  # 0.0625
    (5, 0, "exact", 0.0, 0.0625),  # symmetric in b and c
    (1, 9, "exact", 1.0, 2 * (1 + 10) / 1024),  # 22/1024 = 0.021484375
    (3, 10, "exact", 3.0, 2 * (1 + 13 + 78 + 286) / 8192),  # 756/8192 = 0.0922851...
    (5, 5, "exact", 5.0, 1.0),  # 2 * 638/1024 > 1 -> capped
    (0, 24, "exact", 0.0, 2 / 2**24),  # n = 24 is still exact
    (12, 12, "exact", 12.0, 1.0),
    # n = 25 switches to chi-square: (|5-20|-1)^2/25 = 196/25 = 7.84
    (5, 20, "chi2-cc", 7.84, math.erfc(math.sqrt(7.84 / 2))),
    # (|20-40|-1)^2/60 = 361/60
    (20, 40, "chi2-cc", 361 / 60, math.erfc(math.sqrt(361 / 60 / 2))),
    # Agresti's presidential approval table (b=150, c=86): (64-1)^2/236 = 16.817
    (150, 86, "chi2-cc", 63**2 / 236, math.erfc(math.sqrt(63**2 / 236 / 2))),
    # b = c with many discordant pairs: the correction is clamped at 0, p = 1
    (30, 30, "chi2-cc", 0.0, 1.0),
    # |b - c| = 1: corrected statistic 0, p = 1
    (15, 16, "chi2-cc", 0.0, 1.0),
]


@pytest.mark.parametrize(("b", "c", "method", "statistic", "p"), MCNEMAR_CASES)
def test_mcnemar_hand_values(b: int, c: int, method: str, statistic: float, p: float) -> None:
    result = mcnemar(b, c)
    assert result.method == method
    assert result.b == b and result.c == c and result.discordant == b + c
    assert result.statistic == pytest.approx(statistic, rel=1e-12, abs=1e-15)
    assert result.p_value == pytest.approx(p, rel=1e-12, abs=1e-300)


def test_mcnemar_literal_decimals() -> None:
    # The same values as decimals, so a wrong formula cannot agree with itself above.
    assert mcnemar(1, 9).p_value == 0.021484375
    assert mcnemar(3, 10).p_value == pytest.approx(0.09228515625, abs=1e-15)
    assert mcnemar(5, 20).p_value == pytest.approx(0.005110261, rel=1e-6)
    assert mcnemar(150, 86).p_value == pytest.approx(4.115e-05, rel=1e-3)


def test_threshold_is_25_and_configurable() -> None:
    assert EXACT_BELOW == 25
    assert mcnemar(10, 14).method == "exact"
    assert mcnemar(10, 15).method == "chi2-cc"
    assert mcnemar(10, 15, exact_below=100).method == "exact"
    assert mcnemar(2, 3, exact_below=0).method == "chi2-cc"


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar(-1, 3)


def test_exact_p_matches_scipy_binomtest_for_every_small_table() -> None:
    for n in range(1, EXACT_BELOW):
        for b in range(n + 1):
            expected = sps.binomtest(b, n, 0.5, alternative="two-sided").pvalue
            got = mcnemar(b, n - b)
            assert got.method == "exact"
            assert got.p_value == pytest.approx(expected, rel=1e-12), (b, n - b)


@given(st.integers(0, 400), st.integers(0, 400))
@settings(max_examples=100, deadline=None)
def test_chi2_branch_matches_scipy_chi2(b: int, c: int) -> None:
    if b + c < EXACT_BELOW:
        return
    result = mcnemar(b, c)
    expected_stat = max(0, abs(b - c) - 1) ** 2 / (b + c)
    assert result.statistic == pytest.approx(expected_stat, rel=1e-12)
    assert result.p_value == pytest.approx(sps.chi2.sf(expected_stat, 1), rel=1e-9, abs=1e-300)


@given(st.integers(0, 60), st.integers(0, 60))
@settings(max_examples=100, deadline=None)
def test_mcnemar_invariants(b: int, c: int) -> None:
    p = mcnemar(b, c).p_value
    assert 0 <= p <= 1
    assert p == mcnemar(c, b).p_value  # symmetric
    if b == c:
        assert p == 1.0


def test_chi2_sf_edges() -> None:
    assert chi2_sf_1df(0.0) == 1.0
    assert chi2_sf_1df(-3.0) == 1.0
    assert chi2_sf_1df(3.841458820694124) == pytest.approx(0.05, rel=1e-12)  # the 95% critical value
    assert chi2_sf_1df(1e6) == 0.0


def test_binomial_p_edges() -> None:
    assert binomial_two_sided_p(0, 0) == 1.0
    assert binomial_two_sided_p(0, 1) == 1.0
    # integer arithmetic: no overflow in C(n, i) for large n, a tiny but exact p
    assert binomial_two_sided_p(0, 1000) == pytest.approx(2 * 0.5**1000, rel=1e-12)
    assert binomial_two_sided_p(500, 1000) == 1.0
    with pytest.raises(ValueError):
        binomial_two_sided_p(5, 3)


# ---------------------------------------------------------------- Holm


def test_holm_worked_example() -> None:
    # p = (0.01, 0.04, 0.03, 0.005), m = 4. Sorted: 0.005, 0.01, 0.03, 0.04
    # times (4, 3, 2, 1): 0.02, 0.03, 0.06, 0.04 -> running max: 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_edges() -> None:
    assert holm([]) == []
    assert holm([0.3]) == [0.3]
    assert holm([0.4, 0.5]) == [0.8, 0.8]
    assert holm([0.6, 0.7, 0.01]) == pytest.approx([1.0, 1.0, 0.03])
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])  # ties
    with pytest.raises(ValueError):
        holm([1.5])


def _holm_sequential_rejections(pvalues: list[float], alpha: float) -> list[bool]:
    """The textbook procedure: reject p_(i) while p_(i) <= alpha / (m - i + 1), then stop."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    reject = [False] * m
    for rank, i in enumerate(order):
        if pvalues[i] <= alpha / (m - rank):
            reject[i] = True
        else:
            break
    return reject


@given(st.lists(st.floats(0, 1), max_size=12), st.sampled_from([0.01, 0.05, 0.1]))
@settings(max_examples=150, deadline=None)
def test_holm_adjusted_rejects_exactly_like_the_step_down_procedure(
    pvalues: list[float], alpha: float
) -> None:
    adjusted = holm(pvalues)
    assert len(adjusted) == len(pvalues)
    for p, q in zip(pvalues, adjusted, strict=True):
        assert p <= q + 1e-15 and q <= 1
    # ordering of the raw p-values is kept
    for i in range(len(pvalues)):
        for j in range(len(pvalues)):
            if pvalues[i] < pvalues[j]:
                assert adjusted[i] <= adjusted[j]
    # Rejection by adjusted p equals the sequential procedure (away from float ties at alpha).
    expected = _holm_sequential_rejections(pvalues, alpha)
    m = len(pvalues)
    if any(abs(p * k - alpha) < 1e-12 for p in pvalues for k in range(1, m + 1)):
        return
    assert [q <= alpha for q in adjusted] == expected


# ---------------------------------------------------------------- paired bootstrap


def _pairs(b: int, c: int, both: int, neither: int) -> tuple[list[bool], list[bool]]:
    a = [True] * b + [False] * c + [True] * both + [False] * neither
    bb = [False] * b + [True] * c + [True] * both + [False] * neither
    return a, bb


def test_bootstrap_is_deterministic_under_a_seed_and_reports_it() -> None:
    a, b = _pairs(40, 25, 100, 35)
    first = paired_bootstrap_diff(a, b, n_resamples=2000, seed=7)
    again = paired_bootstrap_diff(a, b, n_resamples=2000, seed=7)
    other = paired_bootstrap_diff(a, b, n_resamples=2000, seed=8)
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    assert first.seed == 7 and first.resamples == 2000 and first.confidence == 0.95
    assert first.estimate == pytest.approx((40 - 25) / 200)


def test_bootstrap_ci_is_close_to_the_normal_approximation() -> None:
    # b = 60, c = 30, n = 300: estimate 0.1; var(d) = (b+c)/n - 0.1^2 = 0.29;
    # se = sqrt(0.29/300) = 0.031091; normal 95% CI = 0.1 +- 1.96*se = [0.03906, 0.16094]
    a, b = _pairs(60, 30, 150, 60)
    ci = paired_bootstrap_diff(a, b, n_resamples=20_000, seed=0)
    assert ci.estimate == pytest.approx(0.1)
    assert ci.low == pytest.approx(0.03906, abs=0.006)
    assert ci.high == pytest.approx(0.16094, abs=0.006)
    assert isinstance(ci.low, float) and isinstance(ci.high, float)  # plain floats, not numpy


def test_multinomial_shortcut_matches_index_resampling() -> None:
    # The shortcut must have the distribution of the textbook bootstrap (resample indices).
    a, b = _pairs(12, 5, 20, 13)
    n = len(a)
    d = np.array(a, dtype=int) - np.array(b, dtype=int)
    rng = np.random.default_rng(123)
    naive = d[rng.integers(0, n, size=(4000, n))].mean(axis=1)
    rng2 = np.random.default_rng(456)
    counts = rng2.multinomial(n, [12 / n, 5 / n, 33 / n], size=4000)
    shortcut = (counts[:, 0] - counts[:, 1]) / n
    assert sps.ks_2samp(naive, shortcut).pvalue > 0.001
    ci = paired_bootstrap_diff(a, b, n_resamples=4000, seed=1)
    assert ci.low == pytest.approx(float(np.quantile(naive, 0.025)), abs=0.03)
    assert ci.high == pytest.approx(float(np.quantile(naive, 0.975)), abs=0.03)


def test_bootstrap_edges() -> None:
    same = paired_bootstrap_diff([True, False, True], [True, False, True], n_resamples=100)
    assert same == BootstrapCI(0.0, 0.0, 0.0, 0.95, 100, 0)
    one = paired_bootstrap_diff([True], [False], n_resamples=50)
    assert (one.estimate, one.low, one.high) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap_diff([True], [True, False])
    with pytest.raises(ValueError, match="no paired"):
        paired_bootstrap_diff([], [])
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap_diff([True], [True], n_resamples=0)


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=80), st.integers(0, 2**32))
@settings(max_examples=100, deadline=None)
def test_bootstrap_invariants(pairs: list[tuple[bool, bool]], seed: int) -> None:
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    ci = paired_bootstrap_diff(a, b, n_resamples=1000, seed=seed)
    assert -1 <= ci.low <= ci.high <= 1
    assert ci.low <= ci.estimate <= ci.high
    flipped = paired_bootstrap_diff(b, a, n_resamples=1000, seed=seed)
    assert flipped.estimate == -ci.estimate
