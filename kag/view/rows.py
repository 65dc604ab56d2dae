"""The rows of the index: what one result file becomes (read and graded by the grading
walk's own :class:`~kag.grading.mcq.question_files.FileGrader`, as `kag stats` grades it,
and stored by :func:`kag.view.record_rows.to_row`), and the work of a scan on a chunk of
question folders (listed, compared with the index's stamps, the changed files read), which
worker processes share.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import quote

from kag.datasets import Datasets
from kag.gcpause import collector_paused
from kag.grading.mcq.metrics import Tally
from kag.grading.mcq.question_files import (
    FileGrader,
    QuestionKind,
    QuestionTask,
    question_task,
    unreadable_reason,
)
from kag.grading.mcq.request import GradeRequest
from kag.grading.verdicts import JudgeKey
from kag.results.simd_fields import read_grading_fields
from kag.textsafe import is_utf8
from kag.view.record_rows import COLUMNS, MTIME, NAMES, SIZE, to_row
from kag.view.verdict_rows import judged_key
from kag.view.walk import (
    NO_STAMP,
    Stamp,
    fill_stamps,
    iter_entries,
    list_open_folder,
    open_folder,
    signature,
)

__all__ = ["COLUMNS", "NAMES"]


def shown_name(name: str) -> str:
    """A name read from the file system as text SQLite (and a page) can hold: a byte that
    is not UTF-8 written ``\\xff``."""
    if is_utf8(name):
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def folder_span(dataset: str, question: str) -> tuple[str, str]:
    """The bounds of the relative paths of a question folder's rows: every row of the
    folder, and no other, has ``low <= rel < high`` (the rows are kept in (tree, rel)
    order, so this is a range of them, with no lookup of its own)."""
    return f"{dataset}/{question}/", f"{dataset}/{question}0"  # "0" follows "/"


# Row kinds: what a file is to `kag stats` (graded, ignored, skipped, unreadable, open).
GRADED, IGNORED, SKIPPED, UNREADABLE, OPEN = "graded", "ignored", "skipped", "unreadable", "open"


# Question folders per chunk of work (about ten files each), and from how many a pool is used.
CHUNK_FOLDERS = 100
POOL_FOLDERS = 400

#: (path, relative path, dataset, question, the signature the index holds or None, and
#: the folder's count of file-level entries with it)
FolderJob = tuple[str, str, str, str, bytes | None, int]
#: (tree root, whether the index holds nothing of the tree, question folders)
Chunk = tuple[str, bool, list[FolderJob]]


@dataclass(frozen=True)
class ScanContext:
    datasets: Datasets
    extract: str | None
    prefix: str
    index: str  # the index file, read by a worker for the rows of a folder that changed
    #: The record's texts kept whole (those a registered measure reads; kag.view.record_rows).
    whole: frozenset[str] = frozenset()
    #: The judge whose cached verdicts the records carry (`kag stats --judge`), if one is named.
    judge: JudgeKey | None = None

    def grader(self, root: str) -> FileGrader:
        """The grader of the files of the tree at ``root``: `kag stats`'s default request
        (with the ``--extract`` spec and the judge), every record's details read, long
        files through simdjson."""
        request = GradeRequest(prefix=self.prefix, extract=self.extract, judge=self.judge)
        return FileGrader(request, root, details=True, read=read_grading_fields, stamped=True, tuples=True)


@dataclass
class Part:
    """What a chunk of question folders changes in the index."""

    rows: list[tuple[object, ...]] = field(default_factory=list)  # to insert or replace
    gone: list[str] = field(default_factory=list)  # rows to delete (relative paths)
    # (rel, dataset, question, signature, file-level entries) of each folder read again
    folders: list[tuple[str, str, str, bytes, int]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # folders that could not be listed: no signature
    tallies: dict[tuple[str, str], Tally] = field(
        default_factory=dict
    )  # epoch 1 files read, by (setup, dataset)
    warnings: list[str] = field(default_factory=list)
    seen: int = 0
    read: int = 0

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """A part sent from a worker to the parent: its rows (texts, numbers, bytes and None
        in tuples) as one :mod:`marshal` string, which the worker writes with a third fewer
        instructions than pickle's rows (in about the same time) and the parent reads a
        tenth to a fifth faster (the same rows come out; a value marshal cannot write sends
        them as they are)."""
        others = [getattr(self, f.name) for f in fields(self)[1:]]  # rows first
        try:
            rows: bytes | list[tuple[object, ...]] = marshal.dumps(self.rows)
        except ValueError:
            rows = self.rows
        return _part, (rows, *others)


def _part(rows: bytes | list[tuple[object, ...]], *others: Any) -> Part:
    return Part(marshal.loads(rows) if isinstance(rows, bytes) else rows, *others)


class _KnownRows:
    """The index's (size, mtime) of each file of a question folder, read through a
    read-only connection of the worker's own, opened when a folder first needs it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.db: sqlite3.Connection | None = None

    def of(self, root: str, dataset: str, question: str) -> dict[str, Stamp]:
        if self.db is None:
            self.db = sqlite3.connect(f"file:{quote(self.path)}?mode=ro", uri=True)
        rows = self.db.execute(
            "SELECT rel, size, mtime FROM files WHERE tree=? AND rel>=? AND rel<?",
            (root, *folder_span(dataset, question)),
        )
        return {rel: (size, mtime) for rel, size, mtime in rows}

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


# The records, rows and stamps a chunk makes hold no cycle: the collector is not run over them.
@collector_paused()
def scan_chunk(ctx: ScanContext, chunk: Chunk) -> Part:
    """The changes of some question folders of one tree: each folder listed and its result
    files stat'ed; one whose signature is the index's is done; in another, the files new
    or changed since the index's rows are read (every file, in a tree new to the index)."""
    root, new, jobs = chunk
    part = Part()
    row_of = _file_rows(ctx, root, part.tallies if new else None)
    known_rows = _KnownRows(ctx.index)
    seen = read = 0
    try:
        for path, rel, dataset, question, old, count in jobs:
            fd = open_folder(path, part.warnings)  # its files are opened in it, once listed
            try:
                # A tree new to the index has every file read: its stamp is taken as it is read.
                folder = None if fd is None else list_open_folder(fd, path, part.warnings, not new)
                if fd is None or folder is None:
                    if old is not None:
                        part.gone.extend(known_rows.of(root, dataset, question))
                        part.dropped.append(rel)
                    continue
                sig = signature(folder) if not new else b""
                if sig == old:  # nothing in the folder changed
                    seen += count
                    continue
                known = known_rows.of(root, dataset, question) if not new else {}
                present = set()
                named = is_utf8(path)  # a folder whose name is not UTF-8 holds no question's files
                task = question_task(
                    ctx.datasets.get(dataset, question), path, dataset, question, ctx.judge is not None
                )
                stamps, made, start, inside = folder.stamps, part.rows, len(rel) + 1, path + "/"
                for frel, epoch, setup, file_stamp, slot in iter_entries(folder, rel, ctx.prefix):
                    seen += 1
                    # A result file's name is UTF-8 (iter_entries): only an ignored entry's may not be.
                    if not named or (setup is None and not is_utf8(frel)):
                        frel, setup = shown_name(frel), None
                    present.add(frel)
                    if setup is None:
                        # An ignored entry's row has no stamp: one with a stamp was a result file.
                        if known.get(frel, ()) != NO_STAMP:
                            made.append(make_row(root, frel, dataset, question, None, epoch, IGNORED))
                        continue
                    if not new and known.get(frel) == file_stamp:
                        continue
                    read += 1
                    name = frel[start:]  # frel is rel + "/" + the entry's name in the folder's listing
                    row = row_of(task, frel, setup, epoch, inside + name, file_stamp, (fd, name))
                    made.append(row)
                    if new:
                        stamps[slot], stamps[slot + 1] = row[SIZE], row[MTIME]  # type: ignore[call-overload]
                if new:
                    fill_stamps(folder, path)
                    sig = signature(folder)
                part.gone.extend(r for r in known if r not in present)
                part.folders.append((rel, dataset, question, sig, len(present)))
            finally:
                if fd is not None:
                    os.close(fd)
    finally:
        known_rows.close()
    part.seen, part.read = seen, read
    return part


# The kinds of question, looked up once (an enum's member is a property of its class: a
# call each time it is read from there).
_NOT_GRADED, _NO_ANSWER, _OPEN = QuestionKind.NOT_GRADED, QuestionKind.NO_ANSWER, QuestionKind.OPEN
#: The row of a result file: (its question's task, its relative path, setup, epoch, path,
#: the stamp known of it, and where to open it: its open folder and its name there).
RowOf = Callable[[QuestionTask, str, str, int, str, Stamp, "tuple[int, str] | None"], tuple[object, ...]]


def _file_rows(ctx: ScanContext, root: str, tallies: dict[tuple[str, str], Tally] | None) -> RowOf:
    """The rows of the result files of the tree ``root``, each graded by the grading walk's
    rules against its question, with the epoch 1 records added to ``tallies`` (by (setup,
    dataset), as the grading walk adds them) when given. A row's stamp is that of the file
    read (else the one known, or the file's when none is)."""
    grade = ctx.grader(root).grade
    whole, judge = ctx.whole, ctx.judge

    def row_of(
        task: QuestionTask,
        rel: str,
        setup: str,
        epoch: int,
        path: str,
        stamp: Stamp,
        at: tuple[int, str] | None,
    ) -> tuple[object, ...]:
        kind = task.kind
        if kind is _NOT_GRADED or kind is _NO_ANSWER:
            shown = IGNORED if kind is _NOT_GRADED else SKIPPED
            return make_row(
                root, rel, task.dataset, task.question, setup, epoch, shown, _known_stamp(stamp, path)
            )
        got = grade(task, path, setup, at)
        st = got.stat
        record = got.record
        size: int | None
        mtime: int | None
        if st is not None:
            size, mtime = st.st_size, st.st_mtime_ns
        else:
            size, mtime = _known_stamp(stamp, path)
        if record is None:
            reason = unreadable_reason(got.failure)  # type: ignore[arg-type]
            return make_row(
                root, rel, task.dataset, task.question, setup, epoch, UNREADABLE, (size, mtime), reason=reason
            )
        dataset = task.dataset
        if tallies is not None and epoch == 1:  # as the grading walk adds it
            tally = tallies.get((setup, dataset))
            if tally is None:
                tally = tallies[(setup, dataset)] = Tally()
            if kind is _OPEN:
                tally.add_open_record(record)
            else:
                tally.add(record)
        found = got.evidence
        bits = "".join("1" if f else "0" for f in found.found) if found is not None else None
        judged = judged_key(judge, task, record) if judge is not None else None
        shown = OPEN if kind is _OPEN else GRADED
        base = (root, rel, dataset, task.question, setup, epoch, shown, size, mtime)
        return to_row(record, base, whole, bits, judged)

    return row_of


def _known_stamp(stamp: Stamp, path: str) -> Stamp:
    if stamp[0] is not None:
        return stamp
    try:
        st = os.lstat(path)
    except OSError:
        return NO_STAMP
    return (st.st_size, st.st_mtime_ns)


def make_row(
    root: str,
    rel: str,
    dataset: str,
    question: str,
    setup: str | None,
    epoch: int,
    kind: str,
    stamp: tuple[int | None, int | None] = (None, None),
    *,
    reason: str | None = None,
) -> tuple[object, ...]:
    """The row of a file with no record (ignored, skipped or unreadable: ``reason`` says why)."""
    base = (root, rel, dataset, question, setup, epoch, kind, stamp[0], stamp[1])
    return (*base, None, None, None, None, reason, None, None, None, None, None)
