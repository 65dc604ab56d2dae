"""pass_hat: hand-computed pass^k, the exact binomial ratio, its invariants against pass@k
and the epoch measures, and its key and column in the reports."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.epochs import EpochOutcome, summarize_epochs
from kag.grading.measures.pass_hat import mean_pass_hat, pass_hat_curve, pass_hat_k
from kag.results import OkResult, epoch_result_path, write_result


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (3, 2, 1, 2 / 3),
        (3, 2, 2, 1 / 3),  # C(2,2)/C(3,2)
        (3, 2, 3, 0.0),  # k > c: some draw holds a wrong answer
        (5, 4, 2, 0.6),  # C(4,2)/C(5,2) = 6/10
        (5, 4, 4, 0.2),  # C(4,4)/C(5,4) = 1/5
        (10, 7, 5, 1 / 12),  # C(7,5)/C(10,5) = 21/252
        (4, 4, 4, 1.0),
        (4, 0, 1, 0.0),
        (1, 1, 1, 1.0),
        (200, 199, 100, 0.5),  # C(199,100)/C(200,100) = 100/200
    ],
)
def test_hand_computed(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_mean_over_questions() -> None:
    # Three questions of 3 epochs with 3, 2 and 0 correct: pass^1 = (1 + 2/3 + 0)/3,
    # pass^2 = (1 + 1/3 + 0)/3, pass^3 = (1 + 0 + 0)/3.
    means = mean_pass_hat([3, 2, 0], 3)
    assert list(means) == [1, 2, 3]
    assert means[1] == pytest.approx(5 / 9)
    assert means[2] == pytest.approx(4 / 9)
    assert means[3] == pytest.approx(1 / 3)
    assert mean_pass_hat([], 3) == {}


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_out_of_range(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@st.composite
def n_c(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.integers(1, 300))
    return n, draw(st.integers(0, n))


@given(n_c())
def test_equals_the_exact_ratio(sample: tuple[int, int]) -> None:
    n, c = sample
    curve = pass_hat_curve(n, c)
    assert len(curve) == n
    for k in sorted({1, min(2, n), n // 3 or 1, n // 2 or 1, n - 1 or 1, n}):
        exact = Fraction(math.comb(c, k), math.comb(n, k))
        assert curve[k - 1] == pytest.approx(float(exact), rel=1e-9, abs=1e-300)
        assert pass_hat_k(n, c, k) == curve[k - 1]


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=1, max_size=25)
    )
)
def test_invariants_against_pass_at_and_the_epoch_measures(questions: list[list[bool]]) -> None:
    summary = summarize_epochs([[EpochOutcome(c, "A" if c else "B") for c in q] for q in questions])
    assert summary is not None
    n, hat, at = summary.n, summary.reduced["pass_hat"], summary.reduced["pass_at"]
    assert list(hat) == list(range(1, n + 1))
    assert hat[1] == pytest.approx(at[1]) and hat[1] == pytest.approx(summary.mean_accuracy)
    assert all(a >= b for a, b in itertools.pairwise(hat.values()))  # never increases with k
    assert hat[n] == pytest.approx(sum(all(q) for q in questions) / len(questions))  # all correct
    assert all(hat[k] <= at[k] + 1e-12 for k in hat)
    assert all(0.0 <= v <= 1.0 for v in hat.values())


def test_every_epochs_block_has_the_key_and_the_text_its_column(tmp_path: Path) -> None:
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "B"}
    datasets = tmp_path / "datasets.json"
    datasets.write_text(json.dumps({"d": {f"q{i}": {"input": "?", "output": mcq} for i in range(2)}}))
    root = tmp_path / "r"
    # q0: B, B, A (2 of 3 right); q1: "The answer is B." each time (right once extracted).
    for epoch, answer in enumerate(("B", "B", "A"), start=1):
        write_result(epoch_result_path(root, "d", "q0", "", "s", epoch), OkResult(answer))
        write_result(epoch_result_path(root, "d", "q1", "", "s", epoch), OkResult("The answer is B."))
    args = ["stats", "-d", str(datasets), "-r", str(root), "--extract", "letter"]
    out = CliRunner().invoke(app, [*args, "--format", "json"])
    assert out.exit_code == 0, out.stderr
    block = json.loads(out.stdout)["setups"][0]["overall"]
    strict, extracted = block["epochs"]["pass_hat"], block["extracted"]["epochs"]["pass_hat"]
    assert list(block["epochs"])[-1] == "pass_hat"
    assert strict == pytest.approx({"1": 1 / 3, "2": 1 / 6, "3": 0.0})  # q0: 2/3, 1/3, 0; q1: 0
    assert extracted == pytest.approx({"1": 5 / 6, "2": 2 / 3, "3": 0.5})  # q1 now always right
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0, text.stderr
    header = next(line for line in text.stdout.splitlines() if line.startswith("SETUP") and "PASS" in line)
    assert header.split()[-2:] == ["PASS@k%", "PASS^k%"]
    assert "1:33.33 2:16.67 3:0.00" in text.stdout and "1:83.33 2:66.67 3:50.00" in text.stdout
    assert "PASS^k% = pass^k (Yao et al. 2024)" in text.stdout
