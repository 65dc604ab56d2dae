"""One ordered pool of worker processes, used by `kag stats` (grading) and `kag stats find`.

:func:`ordered_map` applies a function to chunks of work in ``workers`` processes and
yields the results in chunk order, holding at most ``4 x workers`` chunks ahead, so
memory stays flat however large the tree is. The window is wider than the chunks the
workers hold (two each): a worker that finishes ahead of an earlier chunk, whose result
must come out first, is handed more work instead of waiting for it.

Each worker has a pipe of its own, written only by the parent (chunks) and by that
worker (results), and works on one chunk at a time. The parent keeps up to two chunks in
each worker's pipe (``multiprocessing.connection.wait`` says which worker has finished
one), so that a worker starts its next chunk as soon as it has sent a result instead of
waiting for the parent to be scheduled; a second chunk is queued only when it is small
enough to sit in the pipe's buffer, so neither side can block the other. The parent goes
on producing chunks (walking the top of the tree) between hand-outs.

Not ``multiprocessing.Pool`` nor ``ProcessPoolExecutor``: stopping a Pool early (the
reader of ``find | head -1`` went away, Ctrl-C) goes through ``Pool.terminate``, which
deadlocks when a worker is killed while it sends a large result: the lock of the shared
result queue stays held and the pool's task thread waits for it forever (7 hangs in 150
runs of ``find | head -1``). Here nothing is shared and there is no thread: when the
consumer stops, for whatever reason, the workers are terminated and reaped, and that is
all. A worker that dies is a KagError; a worker stops by itself when the parent's end of
its pipe closes (the work is over, or the parent is gone); Ctrl-C reaches the parent
alone.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import operator
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator
from itertools import chain
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any, TypeVar

from kag.errors import KagError

# A chunk queued behind the one a worker is on sits in the pipe until the worker reads it;
# kept well under a socket buffer (208 KiB on Linux) so that sending it never blocks while
# the worker is itself blocked sending a large result.
QUEUED_CHUNK_BYTES = 32 << 10

# Chunks handed out or waiting to be yielded, per worker (see the module docstring).
AHEAD = 4

T = TypeVar("T")
R = TypeVar("R")


def send_as_slots(*classes: type) -> None:
    """Send the instances of these slotted classes (``@dataclass(slots=True)``, frozen or
    not) between the parent and the workers as the tuple of their slots' values: the same
    objects, rebuilt by the dataclass's ``__init__`` when it takes every slot in order and
    does nothing else, else by setting the slots. Otherwise a slotted dataclass is pickled
    through its generated ``__getstate__`` and ``__setstate__``, which call
    ``dataclasses.fields`` for every object: several microseconds a record, in both
    processes. Raises TypeError for a class whose instances have a ``__dict__`` (its
    contents would not be sent)."""
    for cls in classes:
        if cls.__dictoffset__ != 0:
            raise TypeError(f"{cls.__qualname__} has instances with a __dict__, not only slots")
        names = _slot_names(cls)
        get = operator.attrgetter(*names) if len(names) > 1 else _one_of(names)
        ForkingPickler.register(cls, functools.partial(_as_slots, cls, _by_init(cls, names), get))


def _by_init(cls: type, names: tuple[str, ...]) -> bool:
    """Whether ``cls(*values)`` sets exactly the slots ``names`` to ``values``."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return False
    fields = dataclasses.fields(cls)
    return all(f.init for f in fields) and tuple(f.name for f in fields) == names


def _one_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    get = operator.attrgetter(*names) if names else None
    return lambda obj: (get(obj),) if get is not None else ()


def _as_slots(
    cls: type, by_init: bool, values: Callable[[Any], tuple[Any, ...]], obj: Any
) -> tuple[Any, ...]:
    if by_init:
        return (cls, values(obj))
    return (_from_slots, (cls, values(obj)))


@functools.cache
def _slot_names(cls: type) -> tuple[str, ...]:
    """Every slot of ``cls``'s instances, its bases' first."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__weakref__", "__dict__") and name not in names:
                names.append(name)
    return tuple(names)


def _from_slots(cls: type, values: tuple[Any, ...]) -> Any:
    """An instance of ``cls`` with its slots set to ``values`` (as :func:`send_as_slots` sent them)."""
    obj: Any = object.__new__(cls)
    for name, value in zip(_slot_names(cls), values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def default_workers() -> int:
    """Worker processes for large trees: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def mp_context() -> BaseContext:
    """fork, the cheapest start, while this process has a single thread; with other
    threads alive (a writer, a UI) fork can deadlock: a clean forkserver then."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def _worker_main(conn: Connection, work: Callable[[Any], Any], inherited: list[Connection]) -> None:
    """A worker process: apply ``work`` to each chunk it is sent and send back ``(True,
    result)``, or ``(False, message)`` when it raised; stop when the parent's end of the
    pipe closes."""
    for end in inherited:  # the parent's ends, copied by fork: held here, no EOF would come
        end.close()
    # Ctrl-C reaches the whole process group: the parent alone handles it and stops the
    # workers, so they must not die printing their own tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[bool, Any] = (True, work(chunk))
        except Exception as exc:  # noqa: BLE001 - the parent reports it and stops
            reply = (False, str(exc) if isinstance(exc, KagError) else f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:
            return


def ordered_map(
    work: Callable[[T], R],
    chunks: Iterator[T],
    workers: int,
    *,
    died: str,
    failed: str,
) -> Generator[R, None, None]:
    """``map(work, chunks)`` in ``workers`` processes, the results in chunk order.

    ``work`` must be picklable (it is sent once to each worker, or inherited by fork). A
    worker that dies raises ``KagError(died)``; an exception raised by ``work`` raises
    ``KagError(f"{failed}: {message}")``. No process starts when ``chunks`` is empty.
    Closing the generator early terminates and reaps the workers.
    """
    first = next(chunks, None)
    if first is None:
        return
    chunks = chain([first], chunks)
    context = mp_context()
    forked = context.get_start_method() == "fork"
    processes: list[BaseProcess] = []
    ends: list[Connection] = []  # the parent's end of each worker's pipe
    finished = False
    try:
        for _ in range(workers):
            mine, theirs = context.Pipe()
            ends.append(mine)
            inherited = list(ends) if forked else []
            process = context.Process(  # type: ignore[attr-defined]
                target=_worker_main, args=(theirs, work, inherited), daemon=True
            )
            process.start()
            theirs.close()
            processes.append(process)
        sentinels = [process.sentinel for process in processes]
        queued: dict[Connection, deque[int]] = {end: deque() for end in ends}  # chunks in each pipe
        ready: dict[int, R] = {}
        sent = given = 0
        more = True
        pending: memoryview | None = None  # the next chunk, pickled, not sent yet
        while more or pending is not None or given < sent:
            while (more or pending is not None) and sent - given < AHEAD * workers:
                if pending is None:
                    chunk = next(chunks, None)
                    if chunk is None:
                        more = False
                        break
                    pending = ForkingPickler.dumps(chunk)  # as Connection.send would
                depth = 1 if len(pending) > QUEUED_CHUNK_BYTES else 2
                conn = min(ends, key=lambda end: len(queued[end]))
                if len(queued[conn]) >= depth:
                    break
                try:
                    conn.send_bytes(pending)
                except OSError:  # its worker is gone
                    raise KagError(died) from None
                pending = None
                queued[conn].append(sent)
                sent += 1
            if given in ready:
                yield ready.pop(given)
                given += 1
                continue
            # A worker exits only when told to: any sentinel here is a death (an idle
            # worker's too, which no pipe would show until the next hand-out).
            for event in wait([*(end for end in ends if queued[end]), *sentinels]):
                if not isinstance(event, Connection) or not queued.get(event):
                    raise KagError(died)
                try:
                    done, value = event.recv()
                except (EOFError, OSError):  # reset, not EOF, when it died with a chunk unread
                    raise KagError(died) from None
                if not done:
                    raise KagError(f"{failed}: {value}")
                ready[queued[event].popleft()] = value
        finished = True
    finally:
        for end in ends:  # every worker waiting for a chunk then sees the end of its pipe
            end.close()
        if not finished:  # stopped early: a worker may be deep in a chunk
            for process in processes:
                if process.is_alive():
                    process.terminate()
        for process in processes:
            process.join()
