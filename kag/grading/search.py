"""Regex search over the model responses of a result tree (`kag stats find`).

Walks every ``<prefix>…json`` regular file below the results folder, at any depth and
without following symbolic links (:func:`kag.results.iter_result_files_deep`), reads it
with the verdict of :func:`kag.results.parse_result` (:func:`parse_response`), and
matches the pattern against the trimmed ``ok.result``. Every walked file that passes the ``--setup``/``--dataset`` filters counts
in ``total``; unreadable files and ``error`` files hold no response and are skipped.

Patterns use the ``regex`` module's syntax. Matching one file has a CPU-time budget
(``timeout``, the ``regex`` module's own ``timeout=`` argument, which measures the CPU
time of the whole scan of that file): a pathological pattern such as ``(a+)+$`` is cut
on the files where it explodes, reported for those files, and the search goes on.

For speed the tree is cut into units (the question folders, :func:`iter_units`) that a
pool of processes lists and searches chunk by chunk; the chunks come back in order, so
outcomes, hits and warnings always come out sorted by path whatever the number of
workers.

Nothing here prints: warnings go to ``logging.getLogger(__name__)`` (rendered as
``kag: warning: …`` by the CLI), results are returned as frozen dataclasses.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from itertools import chain
from multiprocessing.connection import Connection, wait
from typing import Any

import orjson
import regex
import simdjson

from kag.errors import KagError, UsageError
from kag.grading.mcq import MAX_RESULT_BYTES, matches_any, rust_trim, too_large_message
from kag.results import (
    ErrorResult,
    ResultFile,
    UnreadableResult,
    check_results_root,
    list_result_files_deep,
    parse_result,
    result_from_json,
    scandir_entries,
    setup_from_name,
)
from kag.textsafe import escape_controls, is_utf8

log = logging.getLogger(__name__)

DEFAULT_CONTEXT = 40
DEFAULT_TIMEOUT = 1.0
# Below this many files a process pool costs more to start than it saves.
POOL_MIN_FILES = 1000

# Matches and offsets are against the response trimmed by the grading rule's own
# `rust_trim` (Rust's `str::trim`), so `find` and `stats` see the same text.


# ---------------------------------------------------------------- options and outcomes


@dataclass(frozen=True)
class SearchOptions:
    """What to search for and which files to search.

    - ``pattern``: ``regex`` module syntax; compiled once (:func:`compile_pattern`).
    - ``invert``: select the files whose trimmed response does NOT match.
    - ``context``: characters kept on each side of a match (0 = the match alone).
    - ``max_count``: at most this many hits per file (None = all); ``files_only`` stops at
      the first hit of each file (``-l``), which is ``max_count=1``.
    - ``timeout``: CPU seconds of matching allowed per file (> 0).
    - ``setups`` / ``datasets``: shell globs (``fnmatch``, case-sensitive); a file is
      searched when its setup matches any of ``setups`` and its dataset any of
      ``datasets`` (an empty tuple accepts everything).
    """

    pattern: str
    prefix: str = ""
    ignore_case: bool = False
    invert: bool = False
    context: int = DEFAULT_CONTEXT
    max_count: int | None = None
    files_only: bool = False
    timeout: float = DEFAULT_TIMEOUT
    setups: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.context < 0:
            raise UsageError(f"--context must be 0 or more (got {self.context})")
        if self.max_count is not None and self.max_count < 1:
            raise UsageError(f"--max-count must be 1 or more (got {self.max_count})")
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise UsageError(f"--timeout must be more than 0 seconds (got {self.timeout})")

    @property
    def hits_per_file(self) -> int | None:
        return 1 if self.files_only else self.max_count


def compile_pattern(pattern: str, ignore_case: bool = False) -> regex.Pattern[str]:
    """Compile with the ``regex`` module; an invalid pattern raises UsageError (exit 2)
    carrying the compiler's message, e.g. ``missing ) at position 1``."""
    flags = regex.IGNORECASE if ignore_case else 0
    try:
        return regex.compile(pattern, flags)
    except regex.error as exc:
        raise UsageError(f"invalid pattern {pattern!r}: {exc}") from None
    except (OverflowError, ValueError, RecursionError, MemoryError) as exc:
        raise UsageError(f"invalid pattern {pattern!r}: {exc}") from None


class FileStatus(Enum):
    """What searching one result file gave."""

    MATCHED = "matched"  # selected: a match (or, inverted, no match)
    ERROR_RESULT = "error_result"  # an `error` file: no response to search
    UNREADABLE = "unreadable"  # not a result file (bad JSON, wrong shape, I/O error)
    TIMED_OUT = "timed_out"  # the budget ran out before any hit
    # its path is not valid UTF-8: neither searched nor counted (no JSON string can hold it)
    BAD_NAME = "bad_name"


@dataclass(frozen=True)
class Hit:
    """One match in one file. ``offset`` is the 0-based character index of the match in
    the trimmed response (``length`` characters long); ``before``/``after`` are up to
    ``context`` characters around it. An inverted search has one hit per selected file:
    offset 0, ``match`` None, and the first ``2 x context`` characters as ``after``."""

    file: ResultFile
    offset: int
    match: str | None
    before: str
    after: str
    length: int

    @property
    def context(self) -> str:
        return self.before + (self.match or "") + self.after

    @property
    def cut_before(self) -> bool:
        return self.offset > len(self.before)

    @property
    def cut_after(self) -> bool:
        return self.offset + len(self.match or "") + len(self.after) < self.length


@dataclass(frozen=True)
class FileOutcome:
    """The search of one file. ``timed_out`` may be true on a MATCHED file: the budget ran
    out after the hits shown were found (later matches in that file are missing)."""

    file: ResultFile
    status: FileStatus
    hits: tuple[Hit, ...] = ()
    timed_out: bool = False
    message: str | None = None  # why a file is unreadable


@dataclass(frozen=True)
class SetupCount:
    total: int = 0
    matched: int = 0


@dataclass(frozen=True)
class SearchResult:
    """Counts and hits of a whole search, everything sorted by path.

    ``total`` counts every searched file (unreadable, error and timed-out ones included);
    ``paths`` are the selected files (the Rust tool's ``paths``); ``per_setup`` maps each
    setup seen to its searched and selected file counts.
    """

    total: int
    paths: tuple[str, ...]
    hits: tuple[Hit, ...]
    unreadable: tuple[str, ...]
    error_files: int
    timed_out: tuple[str, ...]
    per_setup: dict[str, SetupCount] = field(default_factory=dict)

    @property
    def matches(self) -> int:
        return len(self.paths)


# ---------------------------------------------------------------- the tree


def relative_path(root: str, path: str) -> str:
    """``path`` below ``root`` with ``/`` separators, as the text output shows it. The walk
    yields ``os.path.join(root, …)`` paths, so this is a cheap prefix cut."""
    base = root if root.endswith(os.sep) else root + os.sep
    rel = path[len(base) :] if path.startswith(base) else os.path.relpath(path, root)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


class _Globs:
    """``fnmatchcase`` against any of ``globs`` (none = everything), memoised: a tree has
    few distinct setups and datasets but many files."""

    def __init__(self, globs: tuple[str, ...]) -> None:
        self.globs = globs
        self.seen: dict[str, bool] = {}

    def __call__(self, value: str) -> bool:
        if not self.globs:
            return True
        hit = self.seen.get(value)
        if hit is None:
            hit = self.seen[value] = matches_any(value, self.globs)
        return hit


# A unit of the walk: (path, is_folder). A folder unit stands for every result file of
# its whole subtree, listed by the worker that searches it, so the parent lists only the
# top of the tree.
_Unit = tuple[str, bool]


def iter_units(
    root: str, prefix: str = "", depth: int = 1, keep_top: Callable[[str], bool] | None = None
) -> Iterator[_Unit]:
    """The tree cut into units, in an order such that the units' deep walks, one after
    the other, give exactly ``iter_result_files_deep(root, prefix)``: the same paths in
    the same order. Folders ``depth`` levels below ``root`` (the question folders of the
    normal layout, with the default 1) are units; result files above them are units of
    their own. ``keep_top`` (the ``--dataset`` filter) is asked about each top-level
    folder name, and about ``""`` for the files directly in ``root``.

    Same order: the deep walk sorts full paths; a file sorts among its siblings by its
    name and a folder's files by ``<name>`` and the separator (``/``; ``\\`` on Windows,
    which sorts otherwise against digits and capitals). A name holds no separator, so
    comparing ``name`` with ``folder/…`` is decided within ``folder/``, at every level. Folders and files are
    told apart without following symbolic links, as the deep walk does. Raises
    InputError when ``root`` is not a folder.
    """
    check_results_root(root)
    yield from _units(root, prefix, depth, keep_top)


def _units(folder: str, prefix: str, depth: int, keep: Callable[[str], bool] | None) -> Iterator[_Unit]:
    units: list[tuple[str, str, bool]] = []
    for entry in scandir_entries(folder):
        if entry.is_dir(follow_symlinks=False):
            if keep is None or keep(entry.name):
                units.append((entry.name + os.sep, entry.path, True))
        elif (
            (keep is None or keep(""))
            and entry.is_file(follow_symlinks=False)
            and setup_from_name(entry.name, prefix) is not None
        ):
            units.append((entry.name, entry.path, False))
    for _, path, is_dir in sorted(units):
        if is_dir and depth > 0:
            yield from _units(path, prefix, depth - 1, None)
        else:
            yield (path, is_dir)


def undecodable_part(root: str, path: str) -> str | None:
    """The path of the first folder or file of ``path``, from ``root`` down, whose name is
    not valid UTF-8 (``root`` itself when it is not), or None when all of ``path`` is."""
    if is_utf8(path):
        return None
    if not is_utf8(root):
        return root
    head = root.rstrip(os.sep) or os.sep
    for name in relative_path(root, path).split("/"):
        head = os.path.join(head, name)
        if not is_utf8(name):
            return head
    return path  # not reached: some name holds the undecodable byte


def _expand(unit: _Unit, prefix: str) -> list[str]:
    # A folder removed since it was listed has no files: the deep walk would not see it either.
    path, is_dir = unit
    return list_result_files_deep(path, prefix) if is_dir else [path]


def iter_walk(root: str, prefix: str = "", depth: int = 1) -> Iterator[str]:
    """``iter_result_files_deep(root, prefix)``, unit by unit (:func:`iter_units`)."""
    for unit in iter_units(root, prefix, depth):
        yield from _expand(unit, prefix)


# path, dataset, question, setup: a plain tuple, 100,000 of them are built per search.
_Entry = tuple[str, str, str, str]


class _Entries:
    """The dataset, question and setup of each walked path, with the ``--setup`` and
    ``--dataset`` filters (None = filtered out). Dataset = the first folder below
    ``root``, question = the folders between it and the file (exactly one in the normal
    layout); a file too shallow for either gets ``""``. Memoised per folder and name: a
    tree has many files but few setups."""

    def __init__(self, root: str, options: SearchOptions) -> None:
        self.root, self.prefix = root, options.prefix
        self.keep_setup, self.keep_dataset = _Globs(options.setups), _Globs(options.datasets)
        # folder path -> (dataset, question, kept); file name -> (setup, kept)
        self.folders: dict[str, tuple[str, str, bool]] = {}
        self.names: dict[str, tuple[str, bool]] = {}

    def __call__(self, path: str) -> _Entry | None:
        head, _, name = path.rpartition(os.sep)
        where = self.folders.get(head)
        if where is None:
            dataset, _, question = relative_path(self.root, path).rpartition("/")[0].partition("/")
            where = self.folders[head] = (dataset, question, self.keep_dataset(dataset))
        known = self.names.get(name)
        if known is None:
            setup = setup_from_name(name, self.prefix) or ""
            known = self.names[name] = (setup, self.keep_setup(setup))
        if where[2] and known[1]:
            return (path, where[0], where[1], known[0])
        return None


def list_search_files(root: str | os.PathLike[str], options: SearchOptions) -> list[ResultFile]:
    """The files a search covers, sorted by path (see :class:`_Entries` for the dataset
    and question of each); raises InputError when ``root`` is not a folder."""
    entries = _Entries(os.fspath(root), options)
    found = (entries(path) for path in iter_walk(os.fspath(root), options.prefix))
    return [ResultFile(*entry) for entry in found if entry is not None]


# ---------------------------------------------------------------- matching one file

# What crosses the process boundary per file: None for the common "searched, no hit".
_RawHit = tuple[int, str | None, str, str, int]
_Raw = tuple[str, tuple[_RawHit, ...], bool, str | None] | None


_METACHARACTERS = frozenset("\\.^$*+?{}[]|()")


def literal_of(pattern: str, ignore_case: bool = False) -> str | None:
    """The text a pattern matches when it is a plain literal (no metacharacter at all, so
    it matches exactly itself), else None. Such a pattern can be ruled out on a response
    with ``in``, which costs less than the regex engine's set-up with a timeout (one CPU
    clock syscall per call). Not with ``ignore_case`` (Unicode case folding), not empty."""
    if ignore_case or not pattern or not _METACHARACTERS.isdisjoint(pattern):
        return None
    return pattern


@dataclass(frozen=True)
class _Matcher:
    pattern: regex.Pattern[str]
    invert: bool
    context: int
    hits_per_file: int | None
    timeout: float
    literal: str | None = None


def _match_text(text: str, m: _Matcher) -> tuple[list[_RawHit], bool]:
    """Hits in ``text`` and whether the budget ran out. One ``finditer`` per file: its
    ``timeout`` bounds the CPU time of the whole scan, not of each match."""
    hits: list[_RawHit] = []
    if m.literal is not None and m.literal not in text:
        if m.invert:
            hits.append((0, None, "", text[: 2 * m.context], len(text)))
        return hits, False
    try:
        if m.invert:
            if m.pattern.search(text, timeout=m.timeout) is None:
                hits.append((0, None, "", text[: 2 * m.context], len(text)))
            return hits, False
        c = m.context
        for found in m.pattern.finditer(text, timeout=m.timeout):
            start, end = found.span()
            hits.append(
                (start, text[start:end], text[max(0, start - c) : start], text[end : end + c], len(text))
            )
            if m.hits_per_file is not None and len(hits) >= m.hits_per_file:
                break
    except TimeoutError:
        return hits, True
    return hits, False


_READ_SIZE = 1 << 16  # below malloc's mmap threshold: no mmap/munmap per file


class _TooLarge(Exception):
    """A result file past ``MAX_RESULT_BYTES``; the message says how large."""


def _read(path: str) -> bytes:
    # os.read halves the cost of a small file against open().read() (no buffered object).
    # Only a file that fills the first read is sized (fstat): one past the cap is refused
    # before the rest of it is read.
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, _READ_SIZE)
        if len(data) == _READ_SIZE:
            size = os.fstat(fd).st_size
            if size > MAX_RESULT_BYTES:
                raise _TooLarge(too_large_message(size))
            parts = [data]
            read = len(data)
            while part := os.read(fd, _READ_SIZE):
                parts.append(part)
                read += len(part)
                if read > MAX_RESULT_BYTES:  # grew while read
                    raise _TooLarge(too_large_message(os.fstat(fd).st_size))
            data = b"".join(parts)
    finally:
        os.close(fd)
    return data


_BOM = b"\xef\xbb\xbf"
_simd_parser: simdjson.Parser | None = None


def _simd_response(data: bytes) -> str | ErrorResult | None:
    """The two well-formed shapes read through simdjson, which validates the whole
    document (syntax, UTF-8, numbers) without building a Python object for anything but
    the response: no list of 768 floats per KAG file. None = not sure, ask orjson.

    simdjson rejects some documents orjson accepts (integers past 64 bits, nesting near
    1,024 levels): those come back None. It accepts two that orjson rejects or reads
    otherwise, and both are left to orjson here: a leading UTF-8 byte order mark, and a
    repeated key (simdjson's lookup finds the first, orjson keeps the last; ``len``
    counts both). The proxies into the parser's buffer die with this call's frame, as
    simdjson requires before the next parse (a leaked one makes it refuse, and orjson
    takes over).
    """
    global _simd_parser
    if data.startswith(_BOM):
        return None
    if _simd_parser is None:
        _simd_parser = simdjson.Parser()
    try:
        doc = _simd_parser.parse(data)
    except (ValueError, RuntimeError):  # UnicodeDecodeError is a ValueError
        return None
    if type(doc) is not simdjson.Object or len(doc) != 1:
        return None
    ok = doc.get("ok")
    if type(ok) is simdjson.Object:
        if list(ok.keys()).count("result") == 1:
            text = ok["result"]
            if type(text) is str:
                return text
        return None
    error = doc.get("error")
    return ErrorResult(error) if type(error) is str else None


def parse_response(data: bytes) -> str | ErrorResult:
    """The response (``ok.result``, untrimmed) or the ``error`` of a result file, with
    exactly the verdict of :func:`kag.results.parse_result`: it raises UnreadableResult
    with the same message for the same files.

    Faster (no ``ok.stats`` model is built and, through :func:`_simd_response`, no Python
    object for the stats at all): the two well-formed shapes are recognised here, and
    anything else goes to :func:`kag.results.result_from_json`, which holds the rules and
    the messages. Exact because readability never depends on ``ok.stats`` (missing or
    mistyped optional fields count as absent), and orjson builds plain ``dict``/``str``
    objects.
    """
    fast = _simd_response(data)
    if fast is not None:
        return fast
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        parse_result(data)  # raises UnreadableResult with the canonical message
        raise  # not reached: parse_result rejects what orjson rejects
    if type(raw) is dict and len(raw) == 1:
        ok = raw.get("ok")
        if type(ok) is dict:
            text = ok.get("result")
            if type(text) is str:
                return text
        else:
            error = raw.get("error")
            if type(error) is str:
                return ErrorResult(error)
    result = result_from_json(raw)
    return result if isinstance(result, ErrorResult) else result.result


def _search_path(path: str, m: _Matcher) -> _Raw:
    try:
        data = _read(path)
    except OSError as exc:
        return (FileStatus.UNREADABLE.value, (), False, exc.strerror or str(exc))
    except _TooLarge as exc:
        return (FileStatus.UNREADABLE.value, (), False, str(exc))
    try:
        response = parse_response(data)
    except UnreadableResult as exc:
        return (FileStatus.UNREADABLE.value, (), False, str(exc))
    if type(response) is not str:
        return (FileStatus.ERROR_RESULT.value, (), False, None)
    hits, timed_out = _match_text(rust_trim(response), m)
    if hits:
        return (FileStatus.MATCHED.value, tuple(hits), timed_out, None)
    if timed_out:
        return (FileStatus.TIMED_OUT.value, (), True, None)
    return None


@dataclass(frozen=True)
class _Job:
    """Everything a worker needs, sent once when the pool starts."""

    root: str
    options: SearchOptions
    matcher: _Matcher


# Found = a walked file with something to report; files searched without a hit are only
# counted. What a chunk of units gives: files walked per setup, and the found ones.
_Found = tuple[_Entry, tuple[str, tuple[_RawHit, ...], bool, str | None]]
_ChunkResult = tuple[dict[str, int], list[_Found]]


class _Searcher:
    """Walks and searches chunks of units, in one process (this one, or a pool worker)."""

    def __init__(self, job: _Job) -> None:
        self.job = job
        self.entries = _Entries(job.root, job.options)

    def __call__(self, units: list[_Unit]) -> _ChunkResult:
        totals: dict[str, int] = {}
        found: list[_Found] = []
        prefix, matcher = self.job.options.prefix, self.job.matcher
        for unit in units:
            for path in _expand(unit, prefix):
                entry = self.entries(path)
                if entry is None:
                    continue
                bad = undecodable_part(self.job.root, path)
                if bad is not None:
                    found.append((entry, (FileStatus.BAD_NAME.value, (), False, bad)))
                    continue
                totals[entry[3]] = totals.get(entry[3], 0) + 1
                raw = _search_path(path, matcher)
                if raw is not None:
                    found.append((entry, raw))
        return totals, found


def _worker_main(conn: Connection, job: _Job, inherited: list[Connection]) -> None:
    """A worker process: search each chunk of units it is sent and send back ``(True,
    result)``, or ``(False, message)`` when the search raised; stop when the parent's end
    of the pipe closes (the search is over, or the parent is gone)."""
    for end in inherited:  # the parent's ends, copied by fork: held here, no EOF would come
        end.close()
    # Ctrl-C reaches the whole process group: the parent alone handles it and stops the
    # workers, so they must not die printing their own tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    searcher = _Searcher(job)
    while True:
        try:
            units = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[bool, Any] = (True, searcher(units))
        except Exception as exc:  # noqa: BLE001 - the parent reports it and stops the search
            reply = (False, str(exc) if isinstance(exc, KagError) else f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:
            return


def _outcome(entry: _Entry, raw: tuple[str, tuple[_RawHit, ...], bool, str | None]) -> FileOutcome:
    status, raw_hits, timed_out, message = raw
    file = ResultFile(*entry)
    return FileOutcome(file, FileStatus(status), tuple(Hit(file, *h) for h in raw_hits), timed_out, message)


# ---------------------------------------------------------------- the search


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# Units per task, by weight: a folder unit (a question: one file per setup) weighs
# FOLDER_WEIGHT files. A pool task is large, so that its round trip and the parent's share
# of the work stay small (a fifth of the parent's CPU time at 256); the first tasks,
# searched here before any pool starts, are small, so a small tree stays small.
CHUNK_WEIGHT = 1024
HEAD_CHUNK_WEIGHT = 128
FOLDER_WEIGHT = 8


def _chunks(units: Iterator[_Unit], limit: int) -> Iterator[list[_Unit]]:
    chunk: list[_Unit] = []
    weight = 0
    for unit in units:
        chunk.append(unit)
        weight += FOLDER_WEIGHT if unit[1] else 1
        if weight >= limit:
            yield chunk
            chunk, weight = [], 0
    if chunk:
        yield chunk


def _iter_chunks(units: Iterator[_Unit], job: _Job, jobs: int | None) -> Iterator[_ChunkResult]:
    """The result of each chunk of units, in walk order.

    With ``jobs`` None the first chunks are searched here, and worker processes start
    only once ``POOL_MIN_FILES`` files have been walked with more to come: a small tree
    never pays for starting processes. The order of the results never depends on the
    number of workers.
    """
    workers = default_jobs() if jobs is None else max(1, jobs)
    if workers == 1:
        yield from map(_Searcher(job), _chunks(units, CHUNK_WEIGHT))
        return
    if jobs is None:
        here, walked = _Searcher(job), 0
        for head in _chunks(units, HEAD_CHUNK_WEIGHT):
            result = here(head)
            yield result
            walked += sum(result[0].values())
            if walked >= POOL_MIN_FILES:
                break
        else:
            return
    yield from _in_workers(_chunks(units, CHUNK_WEIGHT), job, workers)


def _worker_died() -> KagError:
    return KagError(
        "a search worker process died unexpectedly (out of memory?); the search stopped and its output is incomplete"
    )


def _in_workers(chunks: Iterator[list[_Unit]], job: _Job, workers: int) -> Iterator[_ChunkResult]:
    """Search the chunks in ``workers`` processes; the results in chunk order.

    Each worker has a pipe of its own, written only by the parent (chunks) and by that
    worker (results), and works on one chunk at a time; the parent hands the next chunk
    to whichever worker is free (``multiprocessing.connection.wait``) and yields the
    results in order, holding at most ``2 x workers`` chunks ahead. The walk of the top
    of the tree runs here, between hand-outs.

    Not ``multiprocessing.Pool``: stopping a Pool early (the reader of ``find | head -1``
    went away, Ctrl-C) goes through ``Pool.terminate``, which deadlocks when a worker is
    killed while it sends a large result: the lock of the shared result queue stays held
    and the pool's task thread waits for it forever (7 hangs in 150 runs of ``find |
    head -1``). Here nothing is shared and there is no thread: when the consumer stops,
    for whatever reason, the workers are terminated and reaped, and that is all.
    """
    first = next(chunks, None)
    if first is None:  # nothing left after the chunks searched here: no process to start
        return
    chunks = chain([first], chunks)
    context = multiprocessing.get_context()
    forked = context.get_start_method() == "fork"
    processes: list[multiprocessing.process.BaseProcess] = []
    ends: list[Connection] = []  # the parent's end of each worker's pipe
    finished = False
    try:
        for _ in range(workers):
            mine, theirs = context.Pipe()
            ends.append(mine)
            inherited = list(ends) if forked else []
            process = context.Process(target=_worker_main, args=(theirs, job, inherited), daemon=True)
            process.start()
            theirs.close()
            processes.append(process)
        idle = list(ends)
        sentinels = [process.sentinel for process in processes]
        busy: dict[Connection, int] = {}  # pipe -> the chunk its worker is searching
        ready: dict[int, _ChunkResult] = {}
        sent = given = 0
        more = True
        while more or given < sent:
            while more and idle and sent - given < 2 * workers:
                chunk = next(chunks, None)
                if chunk is None:
                    more = False
                    break
                conn = idle.pop()
                try:
                    conn.send(chunk)
                except OSError:  # its worker is gone
                    raise _worker_died() from None
                busy[conn] = sent
                sent += 1
            if given in ready:
                yield ready.pop(given)
                given += 1
                continue
            # A worker exits only when told to: any sentinel here is a death (an idle
            # worker's too, which no pipe would show until the next hand-out).
            for event in wait([*busy, *sentinels]):
                if event not in busy:  # a sentinel (an int); pipes are PipeConnection on Windows
                    raise _worker_died()
                try:
                    done, value = event.recv()  # type: ignore[union-attr]
                except EOFError:
                    raise _worker_died() from None
                if not done:
                    raise KagError(f"a search worker failed: {value}")
                ready[busy.pop(event)] = value
                idle.append(event)
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


class _Tally:
    def __init__(self, keep_hits: bool) -> None:
        self.keep_hits = keep_hits
        self.total = 0
        self.setup_totals: Counter[str] = Counter()
        self.setup_matches: Counter[str] = Counter()
        self.paths: list[str] = []
        self.hits: list[Hit] = []
        self.unreadable: list[str] = []
        self.error_files = 0
        self.timed_out: list[str] = []

    def count(self, totals: dict[str, int]) -> None:
        self.total += sum(totals.values())
        self.setup_totals.update(totals)

    def add(self, outcome: FileOutcome) -> None:
        if outcome.status is FileStatus.MATCHED:
            self.setup_matches[outcome.file.setup] += 1
            self.paths.append(outcome.file.path)
            if self.keep_hits:
                self.hits.extend(outcome.hits)
        elif outcome.status is FileStatus.UNREADABLE:
            self.unreadable.append(outcome.file.path)
        elif outcome.status is FileStatus.ERROR_RESULT:
            self.error_files += 1
        if outcome.timed_out:
            self.timed_out.append(outcome.file.path)

    def result(self) -> SearchResult:
        return SearchResult(
            total=self.total,
            paths=tuple(self.paths),
            hits=tuple(self.hits),
            unreadable=tuple(self.unreadable),
            error_files=self.error_files,
            timed_out=tuple(self.timed_out),
            per_setup={s: SetupCount(n, self.setup_matches[s]) for s, n in sorted(self.setup_totals.items())},
        )


def _report(outcome: FileOutcome, timeout: float) -> None:
    path = escape_controls(outcome.file.path)
    if outcome.status is FileStatus.UNREADABLE:
        log.warning("%s: unreadable result file, skipped: %s", path, outcome.message)
    elif outcome.status is FileStatus.ERROR_RESULT:
        log.info("%s: error result file, skipped (no response to search)", path)
    elif outcome.timed_out and outcome.hits:
        log.warning(
            "%s: pattern timed out (--timeout %g s of CPU) after %d match(es); later ones not shown",
            path,
            timeout,
            len(outcome.hits),
        )
    elif outcome.timed_out:
        log.warning("%s: pattern timed out (--timeout %g s of CPU), file skipped", path, timeout)


def search(
    root: str | os.PathLike[str],
    options: SearchOptions,
    jobs: int | None = None,
    on_outcome: Callable[[FileOutcome], Any] | None = None,
    keep_hits: bool = True,
) -> SearchResult:
    """Search every file of the tree (see the module docstring) and return the counts and
    hits, sorted by path.

    ``jobs``: None = one process per CPU once there are ``POOL_MIN_FILES`` files or more;
    1 = this process only; n > 1 = a pool of n processes whatever the file count.

    ``on_outcome`` is called, in path order and as soon as each is known, for every file
    with something to report (selected, unreadable, ``error`` or timed out) so a caller
    can stream output before the search ends; files searched without a hit are only
    counted. Unreadable and timed-out files are warned about one by one; ``error`` files
    are listed at info level (``-v``) and summed up in one warning at the end.

    A file whose path is not valid UTF-8 is skipped, with one warning per such folder or
    file, and not counted: no output could name it exactly (JSON holds UTF-8 only).

    ``keep_hits=False`` leaves ``SearchResult.hits`` empty: a caller that streams the hits
    through ``on_outcome`` need not hold millions of them (``-C0 .`` on a large tree).

    Raises UsageError for an invalid pattern (before any file is read) and InputError
    when ``root`` is not a folder.
    """
    pattern = compile_pattern(options.pattern, options.ignore_case)
    matcher = _Matcher(
        pattern,
        options.invert,
        options.context,
        options.hits_per_file,
        options.timeout,
        literal_of(options.pattern, options.ignore_case),
    )
    job = _Job(os.fspath(root), options, matcher)
    units = iter_units(job.root, options.prefix, keep_top=_Globs(options.datasets))
    tally = _Tally(keep_hits)
    chunks = _iter_chunks(units, job, jobs)
    warned_bad: str | None = None
    try:  # closed at once on any exit, so that the workers stop with the consumer
        for totals, found in chunks:
            tally.count(totals)
            for entry, raw in found:
                outcome = _outcome(entry, raw)
                if outcome.status is FileStatus.BAD_NAME:
                    # Paths come sorted: the files below one bad folder follow each other.
                    if outcome.message != warned_bad:
                        warned_bad = outcome.message
                        log.warning(
                            "%s: skipped: its name is not valid UTF-8", escape_controls(outcome.message or "")
                        )
                    continue
                _report(outcome, options.timeout)
                tally.add(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
    finally:
        chunks.close()
    if tally.error_files:
        log.warning(
            "%d error result file(s) counted and skipped (no response to search; "
            "kag -v stats find lists them)",
            tally.error_files,
        )
    return tally.result()


# ---------------------------------------------------------------- rendering (strings only)

_LINE_BREAK = regex.compile(r"\r\n|[\r\n]")
_COLOR = {"path": "\x1b[35m", "offset": "\x1b[32m", "match": "\x1b[1;31m", "reset": "\x1b[0m"}


def flatten(text: str) -> str:
    """One printable line: newlines become ``⏎``, tabs spaces, and other control
    characters (a model may emit ESC) ``\\xNN`` (:func:`kag.textsafe.escape_controls`) so
    no response can drive the terminal."""
    return escape_controls(_LINE_BREAK.sub("⏎", text).replace("\t", " "))


def format_hit(hit: Hit, root: str, color: bool = False) -> str:
    """``<dataset>/<question>/<file>:<offset>: …before[match]after…`` (``…`` marks cut
    context); with ``color`` the path, offset and match get grep's colours."""
    rel = escape_controls(relative_path(root, hit.file.path))
    # An inverted hit shows the head of the response, with no brackets.
    body = "" if hit.match is None else f"[{flatten(hit.match)}]"
    if color and body:
        body = f"{_COLOR['match']}{body}{_COLOR['reset']}"
    lead, tail = ("…" if hit.cut_before else ""), ("…" if hit.cut_after else "")
    text = f"{lead}{flatten(hit.before)}{body}{flatten(hit.after)}{tail}"
    if color:
        return (
            f"{_COLOR['path']}{rel}{_COLOR['reset']}:{_COLOR['offset']}{hit.offset}{_COLOR['reset']}: {text}"
        )
    return f"{rel}:{hit.offset}: {text}"


def hit_to_json(hit: Hit) -> dict[str, Any]:
    """The ``--format jsonl`` object (and an item of the JSON document's ``hits``)."""
    return {
        "path": hit.file.path,
        "dataset": hit.file.dataset,
        "question": hit.file.question,
        "setup": hit.file.setup,
        "offset": hit.offset,
        "match": hit.match,
        "context": hit.context,
    }


def result_to_json(result: SearchResult, counts: bool = False) -> dict[str, Any]:
    """The Rust tool's document ``{matches, total, paths}`` plus additive ``hits``,
    ``unreadable_files``, ``error_files``, ``timed_out`` and, with ``counts``, per-setup
    ``counts``."""
    doc: dict[str, Any] = {
        "matches": result.matches,
        "total": result.total,
        "paths": list(result.paths),
        "hits": [hit_to_json(h) for h in result.hits],
        "unreadable_files": len(result.unreadable),
        "error_files": result.error_files,
        "timed_out": list(result.timed_out),
    }
    if counts:
        doc["counts"] = {s: {"matches": c.matched, "total": c.total} for s, c in result.per_setup.items()}
    return doc


class SearchFormat(StrEnum):
    """The output formats of ``kag stats find``; each has one renderer in ``RENDERERS``."""

    TEXT = "text"
    JSON = "json"
    JSONL = "jsonl"


@dataclass(frozen=True)
class View:
    """How a search is shown: the format, and the ``-c``/``-l``/colour choices."""

    format: SearchFormat
    root: str
    color: bool = False
    files_only: bool = False
    counts: bool = False
    null: bool = False  # -0: the paths of -l, each ended by NUL instead of a newline


def _text_stream(outcome: FileOutcome, view: View) -> list[str]:
    if view.counts:
        return []
    if view.files_only:  # for xargs: the exact path (shown escaped, it would name no file)
        return [outcome.file.path]
    return [format_hit(hit, view.root, view.color) for hit in outcome.hits]


def _text_finish(result: SearchResult, view: View) -> list[str]:
    if not view.counts:
        return []
    return [f"{escape_controls(setup)}:{count.matched}" for setup, count in result.per_setup.items()]


def _jsonl_stream(outcome: FileOutcome, view: View) -> list[str]:
    return [] if view.counts else [orjson.dumps(hit_to_json(hit)).decode() for hit in outcome.hits]


def _jsonl_finish(result: SearchResult, view: View) -> list[str]:
    if not view.counts:
        return []
    return [
        orjson.dumps({"setup": setup, "matches": count.matched, "total": count.total}).decode()
        for setup, count in result.per_setup.items()
    ]


def _json_stream(outcome: FileOutcome, view: View) -> list[str]:
    return []  # one document at the end


def _json_finish(result: SearchResult, view: View) -> list[str]:
    return [orjson.dumps(result_to_json(result, counts=view.counts), option=orjson.OPT_INDENT_2).decode()]


Renderer = tuple[Callable[[FileOutcome, View], list[str]], Callable[[SearchResult, View], list[str]]]

RENDERERS: dict[SearchFormat, Renderer] = {
    SearchFormat.TEXT: (_text_stream, _text_finish),
    SearchFormat.JSON: (_json_stream, _json_finish),
    SearchFormat.JSONL: (_jsonl_stream, _jsonl_finish),
}


def stream_lines(outcome: FileOutcome, view: View) -> list[str]:
    """Output lines for one file as it is searched (only selected files have any)."""
    if outcome.status is not FileStatus.MATCHED:
        return []
    return RENDERERS[view.format][0](outcome, view)


def final_lines(result: SearchResult, view: View) -> list[str]:
    """Output lines once the search is over (the JSON document, the ``-c`` counts)."""
    return RENDERERS[view.format][1](result, view)
