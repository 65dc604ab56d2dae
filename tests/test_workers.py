"""kag.workers: the one ordered pool of worker processes behind `kag stats` and `kag stats find`."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import pickletools
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest

from kag.errors import KagError
from kag.workers import ordered_map, send_as_slots
from tests.conftest import REPO

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
    assert len(produced) <= 9  # the window: 4 x workers chunks ahead, plus the first


def next_chunk_pulled(chunk: tuple[int, int, str]) -> tuple[int, bool]:
    """Work on chunk n (of ``last``): wait until the parent has pulled chunk n + 1 (its
    marker file appears in ``folder``); whether it did (the wait is only a hang guard)."""
    n, last, folder = chunk
    deadline = time.monotonic() + 60
    while n < last and not Path(folder, str(n + 1)).exists():
        if time.monotonic() > deadline:
            return n, False
        time.sleep(0.005)
    return n, True


def test_a_worker_has_its_next_chunk_queued_while_it_works(tmp_path: Path) -> None:
    # One worker: chunk n + 1 is handed out while chunk n is still being worked on, so the
    # worker goes on as soon as it has sent a result, without waiting for the parent.
    def chunks() -> Iterator[tuple[int, int, str]]:
        for n in range(4):
            (tmp_path / str(n)).touch()
            yield n, 3, str(tmp_path)

    results = list(ordered_map(next_chunk_pulled, chunks(), 1, **MESSAGES))
    assert results == [(0, True), (1, True), (2, True), (3, True)]


def first_waits_for_a_later_chunk(chunk: tuple[int, int, str]) -> tuple[int, bool]:
    """Chunk 0 waits until the parent has pulled chunk ``later`` (its marker file appears
    in ``folder``); whether it did (the wait is only a hang guard). The others return at once."""
    n, later, folder = chunk
    deadline = time.monotonic() + 60
    while n == 0 and not Path(folder, str(later)).exists():
        if time.monotonic() > deadline:
            return n, False
        time.sleep(0.005)
    return n, True


def test_a_free_worker_goes_on_while_an_earlier_chunk_is_still_worked_on(tmp_path: Path) -> None:
    # Two workers: the one not on chunk 0 finishes chunks 1, 3, 4, ... and is handed more
    # while chunk 0, whose result must come out first, is still being worked on.
    def chunks() -> Iterator[tuple[int, int, str]]:
        for n in range(10):
            (tmp_path / str(n)).touch()
            yield n, 6, str(tmp_path)

    results = list(ordered_map(first_waits_for_a_later_chunk, chunks(), 2, **MESSAGES))
    assert results == [(n, True) for n in range(10)]


_LARGE = """
import sys
from kag.workers import QUEUED_CHUNK_BYTES, ordered_map

def echo(chunk: bytes) -> bytes:
    return chunk * 2  # a result larger than any pipe buffer, as the chunk is

size = 8 * QUEUED_CHUNK_BYTES
chunks = (bytes([n]) * size for n in range(40))
results = list(ordered_map(echo, chunks, 2, died="died", failed="failed"))
assert [r[0] for r in results] == list(range(40)) and all(len(r) == 2 * size for r in results)
print("ok")
"""


def test_large_chunks_and_large_results_never_block_each_other() -> None:
    # A chunk too large for the pipe's buffer is never queued behind a busy worker: the
    # parent would block sending it while the worker blocks sending its result.
    done = subprocess.run(
        [sys.executable, "-c", _LARGE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


@dataclass(frozen=True, slots=True)
class _Sent:
    name: str
    counts: tuple[int, ...]
    inner: _Sent | None = None


@dataclass(frozen=True, slots=True)
class _Derived:
    """A derived slot set by ``__post_init__``: rebuilt by its slots, not by ``__init__``."""

    text: str
    folded: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", self.text.lower() + "!")


@dataclass(slots=True)
class _Counts:
    n: int = 0
    total: float = 0.0


class _WithDict:
    pass


def _echo(values: list[object]) -> list[object]:
    return values


def test_slotted_records_are_sent_as_their_slots_and_come_back_equal() -> None:
    send_as_slots(_Sent, _Derived, _Counts)
    shared = _Sent("shared", (1,))
    values: list[object] = [_Sent("a", (1, 2), shared), shared, _Derived("AbC"), _Counts(3, 0.5)]
    data = bytes(ForkingPickler.dumps(values))
    # Each object is rebuilt from its values (REDUCE), never given a state after (BUILD,
    # what the dataclass's generated __setstate__ would read).
    opcodes = {op.name for op, _, _ in pickletools.genops(data)}
    assert "REDUCE" in opcodes and "BUILD" not in opcodes
    back = pickle.loads(data)
    assert back == values
    assert back[0].inner is back[1]  # one object sent once, as before
    assert back[2].folded == "abc!" and back[2] == _Derived("AbC")
    # And through a pool of real worker processes, both ways.
    (echoed,) = list(ordered_map(_echo, iter([values]), 2, **MESSAGES))
    assert echoed == values


def test_a_class_whose_instances_have_a_dict_is_refused() -> None:
    with pytest.raises(TypeError, match="_WithDict"):
        send_as_slots(_WithDict)
