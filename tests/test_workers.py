"""kag.workers: the one ordered pool of worker processes behind `kag stats` and `kag stats find`."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator

import pytest

from kag.errors import KagError
from kag.workers import ordered_map

MESSAGES = {"died": "a worker died", "failed": "a worker failed"}


def slow_square(n: int) -> tuple[int, int]:
    # Early chunks take longest: they finish last, and must still come out first.
    time.sleep(0.02 * (5 - n % 5))
    return n, os.getpid()


def fail_on_three(n: int) -> int:
    if n == 3:
        raise ValueError("three")
    return n


def die_on_three(n: int) -> int:
    if n == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return n


def test_results_come_in_chunk_order_from_several_processes() -> None:
    results = list(ordered_map(slow_square, iter(range(20)), 3, **MESSAGES))
    assert [n for n, _ in results] == list(range(20))
    pids = {pid for _, pid in results}
    assert os.getpid() not in pids and len(pids) >= 2
    assert multiprocessing.active_children() == []  # every worker reaped


def test_no_process_starts_for_no_chunks() -> None:
    assert list(ordered_map(slow_square, iter([]), 2, **MESSAGES)) == []
    assert multiprocessing.active_children() == []


def test_an_exception_in_the_work_is_a_kag_error_with_its_message() -> None:
    with pytest.raises(KagError) as info:
        list(ordered_map(fail_on_three, iter(range(10)), 2, **MESSAGES))
    assert str(info.value) == "a worker failed: ValueError: three"
    assert multiprocessing.active_children() == []


def test_a_dead_worker_is_a_kag_error_not_a_hang() -> None:
    with pytest.raises(KagError) as info:
        list(ordered_map(die_on_three, iter(range(10)), 2, **MESSAGES))
    assert str(info.value) == "a worker died"
    assert multiprocessing.active_children() == []


def test_stopping_early_stops_the_workers_and_reads_no_further() -> None:
    produced: list[int] = []

    def chunks() -> Iterator[int]:
        for n in range(1000):
            produced.append(n)
            yield n

    results = ordered_map(slow_square, chunks(), 2, **MESSAGES)
    assert next(results)[0] == 0
    results.close()
    assert multiprocessing.active_children() == []
    assert len(produced) <= 5  # the window: 2 x workers chunks ahead, plus the first
