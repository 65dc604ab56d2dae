"""The walk of a search: the tree cut into units (:func:`kag.results.tree.iter_units`),
units grouped into chunks, and each chunk listed and searched, in this process or in the
ordered pool of :mod:`kag.workers`. The chunks come back in order, so outcomes, hits and
warnings always come out sorted by path whatever the number of workers.
"""

from __future__ import annotations

__all__ = ["list_search_files", "undecodable_part"]

import os
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

from kag.gcpause import collector_paused
from kag.grading.search import match as _match
from kag.grading.search.match import Matcher, Raw, RawHit
from kag.grading.search.options import FileOutcome, FileStatus, Hit, SearchOptions
from kag.results.tree import (
    ResultFile,
    Unit,
    expand_unit,
    glob_filter,
    iter_walk,
    relative_path,
    setup_from_name,
)
from kag.textsafe import is_utf8
from kag.workers import default_workers, ordered_map

# Below this many files a process pool costs more to start than it saves.
POOL_MIN_FILES = 1000


# A unit of the walk: (path, is_folder). A folder unit stands for every result file of
# its whole subtree, listed by the worker that searches it, so the parent lists only the
# top of the tree.


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


_Entry = tuple[str, str, str, str]
_NAMES_KEPT = 4096


class _Entries:
    """The dataset, question and setup of each walked path, with the ``--setup`` and
    ``--dataset`` filters (None = filtered out). Dataset = the first folder below
    ``root``, question = the folders between it and the file (exactly one in the normal
    layout); a file too shallow for either gets ``""``. Memoised for the last folder (the
    walk gives a folder's files one after the other) and per name (a tree has many files
    but few setups): nothing kept grows with the number of folders."""

    def __init__(self, root: str, options: SearchOptions) -> None:
        self.root, self.prefix = root, options.prefix
        self.keep_setup, self.keep_dataset = glob_filter(options.setups), glob_filter(options.datasets)
        # the last folder's path and (dataset, question, kept); file name -> (setup, kept),
        # or None for a name that is not a result file's
        self.folder: str | None = None
        self.where: tuple[str, str, bool] = ("", "", False)
        self.names: dict[str, tuple[str, bool] | None] = {}

    def __call__(self, path: str) -> _Entry | None:
        head, _, name = path.rpartition(os.sep)
        where = self.where if head == self.folder else self.place(head, path)
        known = self.setup(name)
        if where[2] and known is not None and known[1]:
            return (path, where[0], where[1], known[0])
        return None

    def place(self, head: str, path: str) -> tuple[str, str, bool]:
        """The (dataset, question, kept) of ``path``, a file of the folder ``head``."""
        if head != self.folder:
            dataset, _, question = relative_path(self.root, path).rpartition("/")[0].partition("/")
            self.where = (dataset, question, self.keep_dataset(dataset))
            self.folder = head
        return self.where

    def setup(self, name: str) -> tuple[str, bool] | None:
        """The (setup, kept) of a file named ``name``; None when the name is not
        ``<prefix>…json`` with a setup."""
        try:
            return self.names[name]
        except KeyError:
            pass
        if len(self.names) >= _NAMES_KEPT:  # not a tree of few setups: start over
            self.names.clear()
        setup = setup_from_name(name, self.prefix)
        known = self.names[name] = None if setup is None else (setup, self.keep_setup(setup))
        return known


def list_search_files(root: str | os.PathLike[str], options: SearchOptions) -> list[ResultFile]:
    """The files a search covers, sorted by path (see :class:`_Entries` for the dataset
    and question of each); raises InputError when ``root`` is not a folder."""
    entries = _Entries(os.fspath(root), options)
    found = (entries(path) for path in iter_walk(os.fspath(root), options.prefix, hidden=options.hidden))
    return [ResultFile(*entry) for entry in found if entry is not None]


@dataclass(frozen=True)
class Job:
    """Everything a worker needs, sent once when the pool starts."""

    root: str
    options: SearchOptions
    matcher: Matcher


# Found = a walked file with something to report; files searched without a hit are only
# counted. What a chunk of units gives: files walked per setup, and the found ones.
_Found = tuple[_Entry, tuple[str, tuple[RawHit, ...], bool, str | None]]
ChunkResult = tuple[dict[str, int], list[_Found]]
_SearchPath = Callable[[str, Matcher, int | None], Raw]
# A folder opened to be listed and to open its files by name: never through a link.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HELD_FOLDERS = os.open in os.supports_dir_fd and os.scandir in os.supports_fd


class _Searcher:
    """Walks and searches chunks of units, in one process (this one, or a pool worker)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.entries = _Entries(job.root, job.options)

    def __call__(self, units: list[Unit]) -> ChunkResult:
        # What a chunk allocates holds no cycle: the cyclic collector's passes (now and then
        # a full one, over every object the process has loaded) wait for the chunk's end.
        with collector_paused():
            return self._search(units)

    def _search(self, units: list[Unit]) -> ChunkResult:
        totals: dict[str, int] = {}
        found: list[_Found] = []
        search_path = _match.search_path  # looked up per chunk, so that a test can replace it
        for unit in units:
            if not (unit[1] and self._folder(unit[0], totals, found, search_path)):
                paths = expand_unit(unit, self.job.options.prefix, self.job.options.hidden)
                self._paths(paths, totals, found, search_path)
        return totals, found

    def _folder(
        self, folder: str, totals: dict[str, int], found: list[_Found], search_path: _SearchPath
    ) -> bool:
        """Search a folder of files (a question folder, the common unit) from one listing,
        held open so that each file is opened by its name alone (the kernel looks up none
        of the folders above it), the dataset and question named once for all its files.
        False, having searched nothing, when it holds a folder or cannot be opened as one
        (a link put in its place): the deep walk then takes the unit."""
        if not _HELD_FOLDERS:
            return False
        try:
            dir_fd = os.open(folder, _FOLDER_FLAGS)
        except OSError:
            return False
        try:
            return self._held_folder(folder, dir_fd, totals, found, search_path)
        finally:
            os.close(dir_fd)

    def _held_folder(
        self, folder: str, dir_fd: int, totals: dict[str, int], found: list[_Found], search_path: _SearchPath
    ) -> bool:
        files: list[tuple[str, str]] = []
        setup_of = self.entries.setup
        try:
            with os.scandir(dir_fd) as listing:
                for entry in listing:
                    if entry.is_file(follow_symlinks=False):
                        known = setup_of(entry.name)
                        if known is not None and known[1]:
                            files.append((entry.name, known[0]))
                    elif entry.is_dir(follow_symlinks=False):
                        return False
        except OSError:
            return False
        if not files:
            return True
        files.sort()  # by name, the deep walk's order (the names differ: setups are never compared)
        base = folder if folder.endswith(os.sep) else folder + os.sep
        dataset, question, kept = self.entries.place(folder, base + files[0][0])
        if not kept:
            return True
        matcher, plain = self.job.matcher, folder.isascii()
        for name, setup in files:
            if not (plain and name.isascii()):  # the usual name costs no call
                bad = undecodable_part(self.job.root, base + name)
                if bad is not None:
                    found.append(
                        ((base + name, dataset, question, setup), (FileStatus.BAD_NAME.value, (), False, bad))
                    )
                    continue
            totals[setup] = totals.get(setup, 0) + 1
            raw = search_path(name, matcher, dir_fd)
            if raw is not None:
                found.append(((base + name, dataset, question, setup), raw))
        return True

    def _paths(
        self, paths: list[str], totals: dict[str, int], found: list[_Found], search_path: _SearchPath
    ) -> None:
        """Search the files at ``paths`` (a unit's deep walk, sorted)."""
        root, matcher, entries = self.job.root, self.job.matcher, self.entries
        for path in paths:
            entry = entries(path)
            if entry is None:
                continue
            if not path.isascii():  # the usual path costs no call
                bad = undecodable_part(root, path)
                if bad is not None:
                    found.append((entry, (FileStatus.BAD_NAME.value, (), False, bad)))
                    continue
            setup = entry[3]
            totals[setup] = totals.get(setup, 0) + 1
            raw = search_path(path, matcher, None)
            if raw is not None:
                found.append((entry, raw))


_STATUSES = {status.value: status for status in FileStatus}  # a lookup costs less than the Enum's call


def to_outcome(entry: _Entry, raw: tuple[str, tuple[RawHit, ...], bool, str | None]) -> FileOutcome:
    status, raw_hits, timed_out, message = raw
    file = ResultFile(*entry)
    hits = tuple([Hit(file, *h) for h in raw_hits]) if len(raw_hits) != 1 else (Hit(file, *raw_hits[0]),)
    return FileOutcome(file, _STATUSES[status], hits, timed_out, message)


CHUNK_WEIGHT = 1024
HEAD_CHUNK_WEIGHT = 128
FOLDER_WEIGHT = 8


def _chunks(units: Iterator[Unit], limit: int) -> Iterator[list[Unit]]:
    chunk: list[Unit] = []
    weight = 0
    for unit in units:
        chunk.append(unit)
        weight += FOLDER_WEIGHT if unit[1] else 1
        if weight >= limit:
            yield chunk
            chunk, weight = [], 0
    if chunk:
        yield chunk


def iter_chunks(units: Iterator[Unit], job: Job, jobs: int | None) -> Generator[ChunkResult, None, None]:
    """The result of each chunk of units, in walk order.

    With ``jobs`` None the first chunks are searched here, and worker processes start
    only once ``POOL_MIN_FILES`` files have been walked with more to come: a small tree
    never pays for starting processes. The order of the results never depends on the
    number of workers.
    """
    workers = default_workers() if jobs is None else max(1, jobs)
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
    searched = ordered_map(
        _Searcher(job),
        _chunks(units, CHUNK_WEIGHT),
        workers,
        died=(
            "a search worker process died unexpectedly (out of memory?); the search stopped and its output"
            " is incomplete"
        ),
        failed="a search worker failed",
    )
    try:  # closed at once on any exit, so that the workers stop with the consumer
        yield from searched
    finally:
        searched.close()
