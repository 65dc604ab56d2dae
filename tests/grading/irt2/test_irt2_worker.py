"""The second side counted in a forked child: same values, same errors, and a lost child recovered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kag.errors import InputError
from kag.grading.irt2 import score as score_module
from kag.grading.irt2.model import Split, Task
from kag.grading.irt2.score import Request, evaluate
from kag.grading.irt2.worker import can_fork, run_both
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "irt2"
needs_fork = pytest.mark.skipif(not can_fork(), reason="the child process needs fork (Linux)")


def pid_pair() -> tuple[int, int]:
    return os.getpid(), os.getppid()


@needs_fork
def test_the_second_computation_runs_in_a_child() -> None:
    here, (child, parent) = run_both(os.getpid, pid_pair, parallel=True)
    assert parent == here and child != here
    assert run_both(os.getpid, os.getpid, parallel=False) == (here, here)


def fail(message: str) -> None:
    raise InputError(message)


@pytest.mark.parametrize("parallel", [False, True])
def test_errors_come_in_sequential_order(parallel: bool) -> None:
    with pytest.raises(InputError, match="^second$"):
        run_both(lambda: 1, lambda: fail("second"), parallel)
    with pytest.raises(InputError, match="^first$"):
        run_both(lambda: fail("first"), lambda: fail("second"), parallel)


@needs_fork
def test_a_child_that_dies_silently_is_replaced_by_this_process() -> None:
    parent = os.getpid()

    def second() -> str:
        if os.getpid() != parent:
            os._exit(3)  # as if killed: no value, no exception
        return "computed here"

    assert run_both(lambda: 1, second, parallel=True) == (1, "computed here")


def request(head: str = "linking-head.csv", tail: str = "linking-tail.csv") -> Request:
    predictions = DATA / "predictions"
    return Request(DATA / "dataset", Task.LINKING, Split.TEST, predictions / head, predictions / tail)


@needs_fork
def test_evaluation_with_a_child_equals_the_sequential_one(monkeypatch: pytest.MonkeyPatch) -> None:
    sequential = evaluate(request())
    monkeypatch.setattr(score_module, "PARALLEL_MIN_BYTES", 0)
    parallel = evaluate(request())
    assert parallel.metrics == sequential.metrics
    assert parallel.sides == sequential.sides
    for ours, theirs in zip(parallel.records, sequential.records):
        assert ours.rank.tolist() == theirs.rank.tolist()
        assert ours.raw.tolist() == theirs.raw.tolist()


@needs_fork
def test_an_error_in_the_child_file_is_the_sequential_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "tail.csv"
    bad.write_text("100,0,3,nan\n")
    broken = Request(request().dataset, Task.LINKING, Split.TEST, request().head, bad)
    with pytest.raises(InputError) as sequential:
        evaluate(broken)
    monkeypatch.setattr(score_module, "PARALLEL_MIN_BYTES", 0)
    with pytest.raises(InputError) as parallel:
        evaluate(broken)
    assert str(parallel.value) == str(sequential.value)
    assert "score is NaN" in str(parallel.value)
