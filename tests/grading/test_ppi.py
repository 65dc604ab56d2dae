"""kag.grading.ppi against ppi_py (package ppi-python): the classic prediction-powered mean and
its interval (lam=1), and the classical interval, to 1e-9."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

from kag.grading.ppi import mean_ci, ppi_mean

bits = st.lists(st.integers(0, 1), min_size=2, max_size=50)


@settings(max_examples=200, deadline=None)
@given(bits, bits, bits)
def test_ppi_equals_ppi_py(y: list[int], flips: list[int], unlabelled: list[int]) -> None:
    yhat = [(a + b) % 2 for a, b in zip(y, flips * len(y), strict=False)][: len(y)]
    ours = ppi_mean(y, yhat, unlabelled)
    assert ours is not None and ours.ci95 is not None
    Y, Yhat, U = (np.array(v, dtype=float) for v in (y, yhat, unlabelled))
    assert ours.estimate == pytest.approx(
        float(np.squeeze(ppi_mean_pointestimate(Y, Yhat, U, lam=1))), abs=1e-9
    )
    low, high = ppi_mean_ci(Y, Yhat, U, alpha=0.05, lam=1)
    assert ours.ci95 == pytest.approx((float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9)


def test_classical_interval_equals_ppi_py() -> None:
    y = [1, 0, 1, 1, 0, 1, 1]
    ours = mean_ci(y)
    assert ours is not None and ours.ci95 is not None
    assert ours.estimate == pytest.approx(5 / 7)
    low, high = classical_mean_ci(np.array(y, dtype=float), alpha=0.05)
    assert ours.ci95 == pytest.approx((float(low), float(high)), abs=1e-9)


def test_hand_computed_and_edges() -> None:
    # The judge says 3/4 of the unlabelled answers are right, but on the labelled ones it
    # says right once where the label says wrong: rectifier -1/2, estimate 3/4 - 1/2 = 1/4.
    est = ppi_mean([0, 1], [1, 1], [1, 1, 1, 0])
    assert est is not None and est.estimate == pytest.approx(0.25) and est.n == 2
    assert ppi_mean([], [], [1, 0]) is None
    assert ppi_mean([1], [1], []) is None
    one = ppi_mean([1], [1], [1, 0])
    assert one is not None and one.ci95 is None
    assert mean_ci([]) is None
    single = mean_ci([1])
    assert single is not None and single.ci95 is None
    with pytest.raises(ValueError):
        ppi_mean([1, 0], [1], [1])
