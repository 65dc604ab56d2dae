"""The SQLite index of a result tree: one row per file at the result level of every
question folder (epoch 1's files and the later epochs' ``epochs/<n>/`` files).

Each row is the graded record `kag stats` makes of the file (:mod:`kag.view.rows`, stored
by :mod:`kag.view.record_rows`): every field whole but the response and the error text,
whose heads alone are kept unless a registered measure reads them; prompts and retrieval
texts are read from the file when a question is opened. A rescan reads again only the
files whose (size, mtime) changed: each question folder's listing and stamps are compared
at once with the signature kept of them, by worker processes for a large tree, and only a
folder whose signature differs is compared file by file with the rows. The index lives
outside the tree (the user cache folder, keyed by the tree's real path, unless a file is
named); the tree is never written to.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from kag.datasets import Datasets, Question, count_questions
from kag.errors import InputError
from kag.gcpause import collector_paused
from kag.grading.mcq.extracted import compile_spec
from kag.grading.mcq.metrics import Tally
from kag.grading.open_grading import usable_open_gold
from kag.grading.verdicts import JudgeKey
from kag.results.tree import check_results_root
from kag.textsafe import is_utf8
from kag.view.bulk import insert_many, insert_rows, insert_statement
from kag.view.record_rows import (
    COLUMNS,
    NAMES,
    RECORD_VERSION,
    whole_fields,
)
from kag.view.rows import (
    CHUNK_FOLDERS,
    GRADED,
    IGNORED,
    OPEN,
    POOL_FOLDERS,
    SKIPPED,
    UNREADABLE,
    Chunk,
    FolderJob,
    Part,
    ScanContext,
    folder_span,
    make_row,
    scan_chunk,
    shown_name,
)
from kag.view.verdict_rows import cache_state, judge_fingerprint, sync_verdicts
from kag.view.walk import iter_top

__all__ = ["GRADED", "IGNORED", "NAMES", "OPEN", "SKIPPED", "UNREADABLE", "folder_span"]

#: The layout of the index: its tables' (10), and the graded record's, from which its rows
#: are made (kag.view.record_rows): a field added to the record makes another version,
#: and an index of another version is rebuilt.
SCHEMA_VERSION = f"11.{RECORD_VERSION}"
_T = TypeVar("_T")
# The rows are kept in the order of their key, (tree, rel), with no rowid: a lookup by key
# needs no second copy of the paths beside them (a tenth of a small file's row).
_FILES = f"CREATE TABLE IF NOT EXISTS files ({COLUMNS}, PRIMARY KEY (tree, rel)) WITHOUT ROWID"
# The write-ahead log is cut back to this size once a transaction is checkpointed: a first
# scan writes the whole index through it, which would otherwise stay on disk beside it.
JOURNAL_LIMIT = 4 << 20
BUSY_MS = 60_000  # how long a write waits for another connection's
# The size of a new index's pages: a first build writes its rows with ~0.02 s less CPU per
# 100k small files than with SQLite's 4 KiB pages (fewer pages to fill, split and hand to
# the file system), for 3% more bytes; a question's rows, read by a page, sit in one or two.
PAGE_BYTES = 16 << 10
_INSERT = insert_statement("files", NAMES, 1)
_DELETE = "DELETE FROM files WHERE tree=? AND rel=?"
# One row per question folder (and one for the tree's top, rel ""): the signature of its
# listing when it was last scanned (kag.view.walk.signature).
FOLDER_COLUMNS = (
    "tree TEXT NOT NULL, rel TEXT NOT NULL, dataset TEXT NOT NULL, question TEXT NOT NULL, "
    "sig BLOB NOT NULL, files INTEGER NOT NULL, PRIMARY KEY (tree, rel)"
)
_FOLDERS = f"CREATE TABLE IF NOT EXISTS folders ({FOLDER_COLUMNS}) WITHOUT ROWID"
_FOLDER_NAMES = ("tree", "rel", "dataset", "question", "sig", "files")
_INSERT_FOLDER = insert_statement("folders", _FOLDER_NAMES, 1)
# The index and the files SQLite keeps beside it (a first build's rollback journal, the
# write-ahead log and its index): each is written, so none may be a link (SQLite follows
# one, and would write through it wherever it points).
_SIDE_FILES = ("", "-journal", "-wal", "-shm")
_LINK = "{}: a symbolic link where kag view keeps its index: kag writes through no link; remove it"
_DELETE_FOLDER = "DELETE FROM folders WHERE tree=? AND rel=?"


def open_questions(datasets: Datasets) -> int:
    """How many questions of ``datasets`` are open ones (counted without making each one)."""
    return sum(count_questions(questions, _is_open) for questions in datasets.datasets.values())


def _is_open(question: Question) -> bool:
    return question.open is not None


def default_index_path(roots: list[str], fingerprint: str) -> Path:
    """``<user cache>/kag/view/<hash>.sqlite``: one index per set of trees and settings."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256("\0".join([*roots, fingerprint]).encode("utf-8", "surrogatepass")).hexdigest()
    return Path(base) / "kag" / "view" / f"{key[:32]}.sqlite"


@dataclass(frozen=True)
class ScanStats:
    """What one scan did: files seen, files (re)read, rows removed, rows written (the
    files read and the ignored entries new to the index), and the folders it could not
    list (a warning each)."""

    seen: int
    read: int
    removed: int
    warnings: tuple[str, ...] = ()
    written: int = 0
    #: Whether another process (another `kag view` on the same index) changed the index
    #: since this one last scanned it: what this one shows is then read from it again.
    elsewhere: bool = False

    @property
    def changed(self) -> bool:
        """Whether the index's rows changed (and with them what a page shows)."""
        return bool(self.read or self.removed or self.written or self.elsewhere)


@dataclass(frozen=True)
class Tree:
    """A result tree and the label its setups show under (``""``: unlabelled)."""

    label: str
    root: str


def tree_labels(trees: list[Tree]) -> dict[str, tuple[str, ...]]:
    """Each root's labels, in the order given (a root given twice shows under both)."""
    labels: dict[str, tuple[str, ...]] = {}
    for t in trees:
        if t.label not in labels.get(t.root, ()):
            labels[t.root] = (*labels.get(t.root, ()), t.label)
    return labels


def _settings_fingerprint(
    datasets: Datasets, prefix: str, extract: str | None, whole: frozenset[str], judge: JudgeKey | None
) -> str:
    st = os.stat(datasets.path)
    kept = ",".join(sorted(whole))
    judged = "" if judge is None else f"|judge={judge_fingerprint(judge)}"
    return (
        f"v{SCHEMA_VERSION}|{os.path.realpath(datasets.path)}|{st.st_size}|{st.st_mtime_ns}|{prefix}|{extract}"
        f"|whole={kept}{judged}"
    )


class Index:
    """The index file: opened (created when missing), then :meth:`scan` brings it up to date."""

    def __init__(
        self,
        path: Path,
        datasets: Datasets,
        trees: list[Tree],
        prefix: str,
        extract: str | None,
        on_wait: Callable[[str], None] | None = None,
        judge: JudgeKey | None = None,
    ):
        self.path = path
        self.datasets = datasets
        #: The datasets as the files are graded: without the accepted answers that
        #: normalize to nothing (a question left with none is not scored), as `kag stats`.
        self.graded = usable_open_gold(datasets)[0] if open_questions(datasets) else datasets
        self.trees = trees
        self.prefix = prefix
        self.extract = extract
        #: The record's texts the rows keep whole: those a registered measure reads (another
        #: set, as when a measure that reads the response is added, rebuilds the index).
        self.whole = whole_fields()
        #: The judge whose cached verdicts the records carry (:mod:`kag.view.verdict_rows`).
        self.judge = judge
        self.fingerprint = _settings_fingerprint(datasets, prefix, extract, self.whole, judge)
        #: After a scan that read every file (the first), the tallies of the epoch 1 files
        #: by (tree, setup, dataset), made by the workers as they graded them; else None.
        self.tallies: dict[tuple[str, str, str], Tally] | None = None
        #: The index's generation (a token each scan that changes it writes) this process
        #: last saw; another one means another process changed the index since.
        self.generation: str | None = None
        #: Told, once, when another process holds the index (its scan runs): this one waits.
        self.on_wait = on_wait
        self._lock_fd: int | None = None
        self._written = False  # whether the scan to commit changed the index
        self._direct = False  # whether the scan to commit writes the index without its log
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._acquire()
            try:
                self.db = sqlite3.connect(str(path), check_same_thread=False, timeout=BUSY_MS / 1000)
                # Unsynced from the first statement: switching a new file to the log would
                # otherwise wait for the disk (~15 ms, before any worker starts).
                self.db.execute("PRAGMA synchronous=OFF")
                # A new index's pages (an index of its own keeps its size).
                self.db.execute(f"PRAGMA page_size={PAGE_BYTES}")
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute(f"PRAGMA journal_size_limit={JOURNAL_LIMIT}")
                self._prepare()
                self.db.commit()
            finally:
                self._release()
        except sqlite3.Error as exc:
            raise InputError(f"{path}: cannot open the index: {exc}") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot open the index: {exc.strerror or exc}") from None

    def _prepare(self) -> bool:
        """Create the tables; drop the rows first when they were made with other settings
        (another datasets file, ``--prefix`` or ``--extract``: every file is graded again).
        Whether they were dropped."""
        db = self.db
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        row = db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
        dropped = row is None or row[0] != self.fingerprint
        if dropped:
            db.execute("DROP TABLE IF EXISTS files")
            db.execute("DROP TABLE IF EXISTS folders")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (self.fingerprint,))
        db.execute(_FILES)
        db.execute(_FOLDERS)
        return dropped

    def _acquire(self) -> None:
        """Hold the index's lock file (``<index>.lock``, beside it): one process at a time
        scans it, the others wait for it (told through :attr:`on_wait`)."""
        import fcntl

        lock = f"{self.path}.lock"
        if os.path.islink(lock):
            raise InputError(_LINK.format(lock))
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if self.on_wait is not None:
                    self.on_wait(f"{self.path}: another kag view is scanning this index: waiting for it")
                fcntl.flock(fd, fcntl.LOCK_EX)
            # Held: no other kag view creates these files from here on.
            for name in (f"{self.path}{suffix}" for suffix in _SIDE_FILES):
                if os.path.islink(name):
                    raise InputError(_LINK.format(name))
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases its lock
            self._lock_fd = None

    def commit(self) -> None:
        """Commit a scan made with ``commit=False`` and let other processes scan."""
        try:
            self.db.commit()
            if self._direct:
                self._direct = self._written = False
                self._journal("WAL")
            if self._written:
                # The log held every page the scan wrote: copied into the index, it is cut
                # back to nothing rather than left beside it at its largest.
                # A reader of an older state (a page of this server, another process)
                # is not waited for: the log is then cut back when next restarted.
                self._written = False
                self.db.execute("PRAGMA busy_timeout=0")
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self.db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        finally:
            self._release()

    def rollback(self) -> None:
        """Drop a scan made with ``commit=False`` (the index stays as it was)."""
        try:
            self._written = False
            self.db.rollback()
            if self._direct:
                self._direct = False
                self._journal("WAL")
        finally:
            self._release()

    def _journal(self, mode: str) -> bool:
        """Set the index's journal mode; whether it is set (it is not while another
        connection has the index open: that one is not waited for)."""
        self.db.execute("PRAGMA busy_timeout=0")
        try:
            return bool(self.db.execute(f"PRAGMA journal_mode={mode}").fetchone()[0] == mode.lower())
        except sqlite3.OperationalError:
            return False
        finally:
            self.db.execute(f"PRAGMA busy_timeout={BUSY_MS}")

    def _write_direct(self) -> bool:
        """Before the first scan of an index that holds nothing yet (no scan ever
        committed, so no page nor other process reads it, and none has it open): write it
        with a rollback journal instead of the write-ahead log, which would take every page
        of the build and then copy it into the index. The pages past the index's end are
        not journaled: the build is written once; a build stopped half way is rolled back,
        as from the log, the next time the index is opened. The log is back at the commit."""
        if self.generation is not None or self.db.execute("SELECT 1 FROM folders LIMIT 1").fetchone():
            return False
        return self._journal("DELETE")

    def reader(self) -> sqlite3.Connection:
        """A read-only connection of its own: it sees what was committed, never a scan in
        progress."""
        return sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True, check_same_thread=False)

    def close(self) -> None:
        self.db.close()
        self._release()

    def scan(
        self, on_rows: Callable[[list[tuple[object, ...]]], None] | None = None, *, commit: bool = True
    ) -> ScanStats:
        """Bring the index up to date with the trees: new and changed files read, gone ones
        dropped. ``on_rows`` is given the rows stored, as they are, each question's in one call.
        The index is held (its lock file) from the start of the scan to its commit: with
        ``commit`` False, until :meth:`commit` or :meth:`rollback`."""
        if self.extract is not None:
            compile_spec(self.extract)  # a bad pattern is a usage error before any file is read
        self._acquire()
        try:
            self._direct = self._write_direct()
            # A scan makes a row, a cell and a pickled part's objects per file, none in a
            # cycle: the collector would walk the grid growing under them again and again
            # (15% of the process's time in a first build).
            with collector_paused():
                stats = self._scan(on_rows)
        except BaseException:
            self.rollback()
            raise
        if commit:
            self.commit()
        return stats

    def _scan(self, on_rows: Callable[[list[tuple[object, ...]]], None] | None) -> ScanStats:
        seen = read = removed = written = 0
        warnings: list[str] = []
        tallies: dict[tuple[str, str, str], Tally] | None = {}
        db = self.db
        # Another process may have changed the index since this one last read it (another
        # `kag view` of the same trees), or filled it under other settings (the same --index).
        row = db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        now = row[0] if row is not None else None
        elsewhere = self.generation is not None and now != self.generation
        if self._prepare():
            elsewhere = self.generation is not None
        if elsewhere:
            warnings.append(
                f"{self.path}: another kag view changed this index since this one read it: "
                "the pages now show what it holds"
            )
        # A tree given under several labels is scanned once: its rows show under each label.
        for root in tree_labels(self.trees):
            check_results_root(root)
            if not is_utf8(root):
                raise InputError(
                    f"{shown_name(root)}: the results folder's name is not valid UTF-8: rename it"
                )
            stored = {
                rel: (sig, count)
                for rel, sig, count in db.execute("SELECT rel, sig, files FROM folders WHERE tree=?", (root,))
            }
            new = not stored  # every scan stores the signature of the tree's top ("")
            # Listed before any file is read: a verdict written meanwhile is read next time.
            cached = cache_state(root, self.judge) if self.judge is not None else None
            top: list[tuple[str, str]] = []
            # The question folders as they are listed: the workers start on the first ones
            # while the parent lists the rest (a tree's top holds 100,000 of them at 1M files).
            listing = self._folders(root, stored, top)
            head = list(islice(listing, POOL_FOLDERS))
            ctx = ScanContext(self.graded, self.extract, self.prefix, str(self.path), self.whole, self.judge)
            chunks = ((root, new, chunk) for chunk in _batched(chain(head, listing), CHUNK_FOLDERS))
            for part in self._parts(partial(scan_chunk, ctx), chunks, len(head), new):
                seen += part.seen
                read += part.read
                removed += len(part.gone)
                warnings.extend(part.warnings)
                if part.gone:
                    db.executemany(_DELETE, [(root, rel) for rel in part.gone])
                insert_rows(db, part.rows)
                written += len(part.rows)
                if on_rows is not None:
                    on_rows(part.rows)
                insert_many(db, "folders", _FOLDER_NAMES, [(root, *f) for f in part.folders])
                if part.dropped:
                    db.executemany(_DELETE_FOLDER, [(root, rel) for rel in part.dropped])
                if new and tallies is not None:
                    for (setup, dataset), tally in part.tallies.items():  # merged in chunk order
                        key = (root, setup, dataset)
                        if key not in tallies:
                            tallies[key] = Tally()
                        tallies[key].merge(tally)
            if not new:
                tallies = None
            seen += len(top)
            gone, added = self._top(root, top, stored.pop("", None), on_rows)
            removed += gone
            written += added
            if cached is not None and self.judge is not None:
                written += sync_verdicts(db, root, self.judge, cached, fresh=new)
            for rel in stored:  # question folders gone
                dataset, question = rel.split("/", 1)
                removed += db.execute(
                    "DELETE FROM files WHERE tree=? AND rel>=? AND rel<?",
                    (root, *folder_span(dataset, question)),
                ).rowcount
                db.execute(_DELETE_FOLDER, (root, rel))
        # The rows of trees no longer given: those between the trees given, in key order,
        # each range found through the key (not a pass over every row of the index: 0.2-0.5 s
        # at the end of every scan of a million files).
        live = sorted({t.root for t in self.trees})
        for table in ("files", "folders"):
            for low, high in zip([None, *live], [*live, None], strict=True):
                bounds = [
                    (clause, b) for clause, b in (("tree > ?", low), ("tree < ?", high)) if b is not None
                ]
                where = " AND ".join(clause for clause, _ in bounds) or "true"  # no tree: every row
                db.execute(f"DELETE FROM {table} WHERE {where}", [b for _, b in bounds])
        if read or removed or written or now is None:
            now = secrets.token_hex(8)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (now,))
        self.generation = now
        self.tallies = tallies
        self._written = bool(read or removed or written)
        return ScanStats(seen, read, removed, tuple(warnings), written, elsewhere)

    @staticmethod
    def _folders(
        root: str, stored: dict[str, tuple[bytes, int]], top: list[tuple[str, str]]
    ) -> Iterator[FolderJob]:
        """The jobs of the tree's question folders, in the order of their names; each
        one's signature taken out of ``stored`` (what is left there is gone), and the
        entries at the dataset and question levels that are no question folder put in
        ``top``."""
        for raw, dataset, question, entry in iter_top(root):
            # A name that is not UTF-8 is kept as text SQLite can hold (its bytes
            # escaped); such a folder is no question of a datasets file: its files are ignored.
            rel, dataset, question = shown_name(raw), shown_name(dataset), shown_name(question)
            if question:
                old = stored.pop(rel, None)
                sig, count = old if old is not None else (None, 0)
                yield (entry.path, rel, dataset, question, sig, count)
            else:
                top.append((rel, dataset))

    def _top(
        self,
        root: str,
        top: list[tuple[str, str]],
        old: tuple[bytes, int] | None,
        on_rows: Callable[[list[tuple[object, ...]]], None] | None,
    ) -> tuple[int, int]:
        """Bring the rows of the entries at the dataset and question levels (ignored) up to
        date; returns the numbers of rows removed and written."""
        text = "\n".join(rel for rel, _ in top)
        sig = hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).digest()
        if old is not None and old[0] == sig:
            return 0, 0
        known = set()
        if old is not None:
            known = {
                rel
                for (rel,) in self.db.execute("SELECT rel FROM files WHERE tree=? AND question=''", (root,))
            }
        present = {rel for rel, _ in top}
        rows = [
            make_row(root, rel, dataset, "", None, 1, IGNORED) for rel, dataset in top if rel not in known
        ]
        insert_rows(self.db, rows)
        if on_rows is not None:
            on_rows(rows)
        gone = [(root, rel) for rel in known - present]
        self.db.executemany(_DELETE, gone)
        self.db.execute(_INSERT_FOLDER, (root, "", "", "", sig, len(top)))
        return len(gone), len(rows)

    def _parts(
        self, work: Callable[[Chunk], Part], chunks: Iterator[Chunk], folders: int, new: bool
    ) -> Iterator[Part]:
        """``map(work, chunks)``, in a pool of worker processes for a tree of many question
        folders (each one listed, stat'ed and, where changed, read by a worker, as `kag
        stats` shares its walk). A rescan (``new`` False) from a process with threads (the
        server's reload) stays in this process: a pool there starts through a forkserver,
        which costs more than a rescan's stat calls save."""
        from kag.workers import default_workers, mp_context, ordered_map

        if folders < POOL_FOLDERS or (workers := default_workers()) == 1:
            return map(work, chunks)
        if not new and mp_context().get_start_method() != "fork":
            return map(work, chunks)
        return ordered_map(
            work, chunks, workers, died="a worker process died while indexing", failed="indexing failed"
        )


def _batched(items: Iterator[_T], size: int) -> Iterator[list[_T]]:
    while chunk := list(islice(items, size)):
        yield chunk
