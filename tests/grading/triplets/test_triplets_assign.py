"""The assignment solver against SciPy and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import linear_sum_assignment as scipy_lsa

from kag.grading.triplets import assign
from kag.grading.triplets.assign import assign_max, assignment_total, linear_sum_assignment


def brute_force(matrix: np.ndarray, maximize: bool) -> float:
    """Best total over every way to give each row of the short side a distinct column."""
    if matrix.shape[0] > matrix.shape[1]:
        matrix = matrix.T
    n_rows, n_cols = matrix.shape
    totals = (
        sum(matrix[i, cols[i]] for i in range(n_rows))
        for cols in itertools.permutations(range(n_cols), n_rows)
    )
    return max(totals) if maximize else min(totals)


def check_valid(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
    assert len(rows) == len(cols) == min(matrix.shape)
    assert len(set(rows.tolist())) == len(rows) and len(set(cols.tolist())) == len(cols)
    assert list(rows) == sorted(rows)


# Values drawn from a small set make ties and zeros common (the grader's exact mode has both).
tie_values = st.sampled_from([0.0, 0.0, 0.1, 0.45, 0.55, 0.9, 1.0, -0.5, 2.0])
any_values = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
shapes = st.tuples(st.integers(1, 9), st.integers(1, 9))


@settings(max_examples=300, deadline=None)
@given(
    matrix=shapes.flatmap(
        lambda shape: arrays(np.float64, shape, elements=st.one_of(tie_values, any_values))
    ),
    maximize=st.booleans(),
)
def test_optimum_equals_scipy(matrix: np.ndarray, maximize: bool) -> None:
    rows, cols = linear_sum_assignment(matrix, maximize=maximize)
    check_valid(matrix, rows, cols)
    ref_rows, ref_cols = scipy_lsa(matrix, maximize=maximize)
    ours, theirs = matrix[rows, cols].sum(), matrix[ref_rows, ref_cols].sum()
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    matrix=st.tuples(st.integers(1, 5), st.integers(1, 5)).flatmap(
        lambda shape: arrays(np.float64, shape, elements=tie_values)
    ),
    maximize=st.booleans(),
)
def test_optimum_equals_brute_force(matrix: np.ndarray, maximize: bool) -> None:
    rows, cols = linear_sum_assignment(matrix, maximize=maximize)
    check_valid(matrix, rows, cols)
    assert assignment_total(matrix, rows, cols) == pytest.approx(brute_force(matrix, maximize), abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_random_matrices_with_ties_and_zeros_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        shape = (int(rng.integers(1, 16)), int(rng.integers(1, 16)))
        matrix = (
            rng.choice([0.0, 0.0, 0.0, 0.1, 0.45, 0.55, 0.9, 1.0], shape) if seed % 2 else rng.random(shape)
        )
        for maximize in (False, True):
            rows, cols = linear_sum_assignment(matrix, maximize=maximize)
            ref = scipy_lsa(matrix, maximize=maximize)
            assert matrix[rows, cols].sum() == pytest.approx(matrix[ref].sum(), abs=1e-9)


@pytest.mark.parametrize("shape", [(3, 7), (7, 3), (1, 5), (5, 1), (40, 60), (60, 40)])
def test_rectangular_inputs(shape: tuple[int, int]) -> None:
    matrix = np.random.default_rng(sum(shape)).random(shape)
    for maximize in (False, True):
        rows, cols = linear_sum_assignment(matrix, maximize=maximize)
        check_valid(matrix, rows, cols)
        assert matrix[rows, cols].sum() == pytest.approx(matrix[scipy_lsa(matrix, maximize=maximize)].sum())


def test_python_and_numpy_paths_return_the_same_assignment() -> None:
    rng = np.random.default_rng(5)
    for _ in range(80):
        shape = (int(rng.integers(1, 12)), int(rng.integers(1, 12)))
        matrix = rng.choice([0.0, -0.1, -0.55, -1.0, 0.3], shape) if rng.random() < 0.5 else rng.random(shape)
        if shape[0] > shape[1]:
            matrix = matrix.T
        assert assign._solve_python(matrix.tolist()) == assign._solve_numpy(np.ascontiguousarray(matrix))


def test_large_matrix_takes_the_numpy_path_and_is_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assign, "PYTHON_MAX_COLS", 4)
    matrix = np.random.default_rng(9).random((12, 15))
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    assert matrix[rows, cols].sum() == pytest.approx(matrix[scipy_lsa(matrix, maximize=True)].sum())


def test_hand_example_maximize_and_minimize() -> None:
    matrix = np.array([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0], [3.0, 2.0, 2.0]])
    rows, cols = linear_sum_assignment(matrix)
    assert cols.tolist() == [1, 0, 2] and matrix[rows, cols].sum() == 5.0  # 1 + 2 + 2
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    assert matrix[rows, cols].sum() == 11.0  # 4 + 5 + 2


def test_tall_matrix_reports_rows_in_order() -> None:
    matrix = np.array([[0.0, 1.0], [5.0, 0.0], [0.0, 9.0]])
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    assert rows.tolist() == [1, 2] and cols.tolist() == [0, 1]


def test_empty_and_invalid_inputs() -> None:
    rows, cols = linear_sum_assignment(np.zeros((0, 3)))
    assert rows.size == 0 and cols.size == 0
    with pytest.raises(ValueError, match="2-D"):
        linear_sum_assignment(np.zeros(3))
    with pytest.raises(ValueError, match="NaN or infinite"):
        linear_sum_assignment(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        linear_sum_assignment(np.array([[0.0, np.inf]]))


@settings(max_examples=200, deadline=None)
@given(
    matrix=shapes.flatmap(
        lambda shape: arrays(np.float64, shape, elements=st.one_of(tie_values, any_values))
    ),
)
def test_list_api_returns_the_same_assignment(matrix: np.ndarray) -> None:
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    assert assign_max(matrix.tolist()) == (rows.tolist(), cols.tolist())


def test_list_api_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="ragged"):
        assign_max([[1.0, 2.0], [1.0]])
    with pytest.raises(ValueError, match="NaN"):
        assign_max([[float("nan")]])
