"""kag.grading.agreement against the reference implementations (scikit-learn's Cohen's kappa,
the `krippendorff` package), hand-computed values and the edge cases."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from kag.grading.agreement import (
    cohen_kappa,
    confusion_matrix,
    consistency_rate,
    kappa_bootstrap_ci,
    krippendorff_alpha_nominal,
    percent_agreement,
    sensitivity,
    specificity,
)

pairs = st.integers(2, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.booleans(), min_size=n, max_size=n), st.lists(st.booleans(), min_size=n, max_size=n)
    )
)


@settings(max_examples=200, deadline=None)
@given(pairs)
def test_kappa_equals_scikit_learn(ab: tuple[list[bool], list[bool]]) -> None:
    a, b = ab
    ours = cohen_kappa(a, b)
    if len(set(a) | set(b)) == 1:  # one verdict everywhere: p_e = 1, undefined
        assert ours is None
        return
    assert ours == pytest.approx(cohen_kappa_score(a, b), abs=1e-9)


def test_kappa_hand_computed_and_edges() -> None:
    # p_o = 3/4; p_a = 1/2, p_b = 1/4: p_e = 1/8 + 3/8 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == pytest.approx(0.5)
    assert cohen_kappa([], []) is None
    assert cohen_kappa([True, True], [True, True]) is None
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


def test_confusion_sensitivity_specificity() -> None:
    truth = [True, True, True, False, False]
    rated = [True, True, False, True, False]
    matrix = confusion_matrix(truth, rated)
    assert matrix == ((2, 1), (1, 1))
    assert sensitivity(matrix) == pytest.approx(2 / 3)
    assert specificity(matrix) == pytest.approx(1 / 2)
    assert percent_agreement(truth, rated) == pytest.approx(3 / 5)
    assert sensitivity(((0, 0), (1, 1))) is None and specificity(((1, 1), (0, 0))) is None
    assert percent_agreement([], []) is None


def test_bootstrap_interval_holds_the_kappa_and_is_reproducible() -> None:
    rng = np.random.default_rng(7)
    a = rng.random(80) < 0.6
    b = np.where(rng.random(80) < 0.8, a, ~a)
    kappa = cohen_kappa(list(a), list(b))
    ci = kappa_bootstrap_ci(list(a), list(b))
    assert ci is not None and kappa is not None
    assert ci[0] < kappa < ci[1] and -1.0 <= ci[0] and ci[1] <= 1.0
    assert kappa_bootstrap_ci(list(a), list(b)) == ci
    assert kappa_bootstrap_ci([True], [True]) is None
    assert kappa_bootstrap_ci([True] * 5, [True] * 5) is None


units_strategy = st.lists(
    st.lists(st.one_of(st.none(), st.booleans()), min_size=3, max_size=3), min_size=2, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(units_strategy)
def test_alpha_equals_the_krippendorff_package(units: list[list[bool | None]]) -> None:
    ours = krippendorff_alpha_nominal(units)
    pairable = [[v for v in u if v is not None] for u in units]
    values = {v for u in pairable if len(u) >= 2 for v in u}
    if len(values) < 2:
        assert ours is None
        return
    data = np.array([[np.nan if v is None else float(v) for v in u] for u in units]).T  # raters x units
    assert ours == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-9
    )


def test_alpha_edges() -> None:
    assert krippendorff_alpha_nominal([]) is None
    assert krippendorff_alpha_nominal([[True, None], [None, False]]) is None  # nothing pairable
    assert krippendorff_alpha_nominal([[True, True], [False, False]]) == pytest.approx(1.0)


def test_consistency_rate() -> None:
    assert consistency_rate([["C", "C"], ["C", "I"], ["U", "U"], ["I"]]) == pytest.approx(2 / 3)
    assert consistency_rate([["C"]]) is None
