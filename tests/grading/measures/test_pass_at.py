"""pass_at: hand-computed pass@k, the exact binomial ratio, Chen et al.'s product, and invariants."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.grading.measures.pass_at import mean_pass_at, pass_at_curve, pass_at_k, shown_ks


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (3, 1, 1, 1 / 3),
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
        (3, 1, 3, 1.0),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # C(3,4) = 0: every draw of 4 holds a correct answer
        (10, 3, 5, 11 / 12),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
        (4, 0, 4, 0.0),
        (4, 4, 1, 1.0),
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (200, 1, 100, 0.5),  # 1 - C(199,100)/C(200,100) = 1 - 100/200
        (200, 100, 100, 1.0),  # 1 - 1/C(200,100), C(200,100) has 59 digits
    ],
)
def test_hand_computed(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_pass_at_one_and_n_are_exact() -> None:
    assert pass_at_curve(7, 0) == (0.0,) * 7
    assert pass_at_curve(7, 7) == (1.0,) * 7
    assert pass_at_curve(7, 2)[-1] == 1.0 and pass_at_curve(7, 2)[0] == pytest.approx(2 / 7)


def test_mean_over_questions() -> None:
    # Three questions of 3 epochs with 3, 1 and 0 correct: pass@1 = (1 + 1/3 + 0)/3,
    # pass@2 = (1 + 2/3 + 0)/3, pass@3 = (1 + 1 + 0)/3.
    means = mean_pass_at([3, 1, 0], 3)
    assert list(means) == [1, 2, 3]
    assert means[1] == pytest.approx(4 / 9)
    assert means[2] == pytest.approx(5 / 9)
    assert means[3] == pytest.approx(2 / 3)
    assert mean_pass_at([], 3) == {}


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_out_of_range(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def chen_pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021), figure 3, as inspect_ai's ``pass_at`` reducer transcribes it."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@st.composite
def n_c(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.integers(1, 300))
    return n, draw(st.integers(0, n))


@given(n_c())
def test_equals_the_exact_ratio_and_chen_s_product(sample: tuple[int, int]) -> None:
    n, c = sample
    curve = pass_at_curve(n, c)
    assert len(curve) == n
    for k in sorted({1, min(2, n), n // 3 or 1, n // 2 or 1, n - 1 or 1, n}):
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert curve[k - 1] == pytest.approx(float(exact), rel=1e-9, abs=1e-12)
        assert curve[k - 1] == pytest.approx(chen_pass_at_k(n, c, k), rel=1e-9, abs=1e-12)
        assert pass_at_k(n, c, k) == curve[k - 1]


@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n), max_size=30))))
def test_invariants(sample: tuple[int, list[int]]) -> None:
    n, counts = sample
    means = mean_pass_at(counts, n)
    if not counts:
        assert means == {}
        return
    assert list(means) == list(range(1, n + 1))
    values = list(means.values())
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b for a, b in itertools.pairwise(values))  # never decreases with k
    assert means[1] == pytest.approx(sum(c / n for c in counts) / len(counts))  # the mean score
    assert means[n] == sum(c > 0 for c in counts) / len(counts)  # at least one correct


@pytest.mark.parametrize(
    ("n", "ks"),
    [
        (1, [1]),
        (2, [1, 2]),
        (3, [1, 2, 3]),
        (8, [1, 2, 4, 8]),
        (10, [1, 2, 4, 8, 10]),
        (100, [1, 2, 4, 8, 16, 32, 64, 100]),
    ],
)
def test_powers_of_two_and_n(n: int, ks: list[int]) -> None:
    assert shown_ks(n) == ks
