"""Two independent computations on two cores: the second one in a forked child process.

Parsing a prediction file dominates `kag irt2` and holds the GIL (simdjson, bytes), so
threads would not overlap; a child process forked once the ground truth is loaded counts
the second file while this process counts the first. Fork (Linux) hands the child the
ground truth without copying or re-importing; the child sends back its value, or the
exception it raised, through a pipe. A child that dies without a word (killed, out of
memory) costs nothing but time: its part is computed here.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

A = TypeVar("A")
B = TypeVar("B")


def can_fork() -> bool:
    # macOS offers fork, but system libraries there are not fork-safe.
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def run_both(first: Callable[[], A], second: Callable[[], B], parallel: bool) -> tuple[A, B]:
    """``(first(), second())``; with ``parallel``, ``second`` runs in a forked child meanwhile.

    Exceptions are those of the sequential order: ``first``'s (the child is then stopped),
    else ``second``'s.
    """
    if not (parallel and can_fork()):
        return first(), second()
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, second), daemon=True)
    child.start()
    send.close()
    try:
        a = first()
    except BaseException:
        child.terminate()
        child.join()
        receive.close()
        raise
    try:
        kind, value = receive.recv()
    except EOFError:  # the child died before it could answer
        kind, value = "lost", None
    finally:
        receive.close()
        child.join()
    if kind == "error":
        raise value
    return a, (value if kind == "ok" else second())


def _child(send: Connection, compute: Callable[[], Any]) -> None:
    try:
        payload: tuple[str, Any] = ("ok", compute())
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
        payload = ("error", exc)
    send.send(payload)
    send.close()
