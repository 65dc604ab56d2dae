"""The SQLite index of a result tree: one row per file at the result level of every
question folder (epoch 1's files and the later epochs' ``epochs/<n>/`` files).

Only the small fields are kept (the grade, the extracted answer's head, tokens, times,
retrieval sizes, size and mtime); responses, prompts and retrieval texts are read from the
file when a question is opened. A rescan reads again only the files whose (size, mtime)
changed: each question folder's listing and stamps are compared at once with the
signature kept of them, by worker processes for a large tree, and only a folder whose
signature differs is compared file by file with the rows. The index lives outside the tree (the user cache folder, keyed by the tree's real
path, unless a file is named); the tree is never written to.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast
from urllib.parse import quote

import orjson

from kag.datasets import Datasets
from kag.errors import InputError
from kag.grading.evidence import evidence_record
from kag.grading.mcq.extracted import compile_spec, extracted_grade
from kag.grading.mcq.metrics import Tally
from kag.grading.mcq.rule import (
    DEFAULT_ABSTENTION,
    AnswerKey,
    GradedFile,
    Outcome,
    compile_abstention,
    grade_fields,
)
from kag.grading.open_grading import grade_open_response
from kag.results.io import read_result_stamped
from kag.results.tree import check_results_root
from kag.view.fields import ANSWER_CHARS, answer_vote, read_grading_fields
from kag.view.walk import NO_STAMP, Stamp, fill_stamps, iter_entries, iter_top, list_folder, signature

SCHEMA_VERSION = 7
ERROR_CHARS = 2000
_T = TypeVar("_T")

# Row kinds: what a file is to `kag stats` (graded, ignored, skipped, unreadable, open).
GRADED, IGNORED, SKIPPED, UNREADABLE, OPEN = "graded", "ignored", "skipped", "unreadable", "open"

COLUMNS = (
    "tree TEXT NOT NULL, rel TEXT NOT NULL, dataset TEXT NOT NULL, question TEXT NOT NULL, "
    "setup TEXT, epoch INTEGER NOT NULL, kind TEXT NOT NULL, size INTEGER, mtime INTEGER, "
    "outcome TEXT, extracted TEXT, answer TEXT, error TEXT, reason TEXT, vertices INTEGER, "
    "evidence TEXT, detail BLOB"
)


class Detail(NamedTuple):
    """The fields of a graded file that no query filters on, kept in one column (``detail``):
    a row costs a parameter per column to store, and most pages read none of these."""

    abstained: int
    non_option: int
    generation_ns: int | None
    context_length: int | None
    retrieval_ns: int | None
    relationships: int | None
    properties: int | None
    provider: str | None
    model: str | None
    temperature: float | None
    max_tokens: int | None
    retriever: str | None
    database: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    open_exact: float | None
    open_f1: float | None
    vote: str | None  # see answer_vote
    extracted_key: str | None


def pack_detail(detail: Detail) -> bytes:
    """``detail`` as JSON (a number past 64 bits, a time read from a hostile file, in the
    standard library's JSON behind a NUL: orjson neither writes nor reads it exactly)."""
    try:
        return orjson.dumps(tuple(detail))
    except orjson.JSONEncodeError:
        return b"\0" + json.dumps(detail).encode()


def unpack_detail(data: bytes) -> Detail:
    return Detail(*(json.loads(data[1:]) if data[:1] == b"\0" else orjson.loads(data)))


#: The columns in the order of a row (kag.view.query reads rows by position).
NAMES = tuple(c.split()[0] for c in COLUMNS.split(", "))
# The lookups, made after the rows when an empty index is filled at once (a sorted build
# costs less than keeping them up to date row by row); by_rel makes a row's (tree, rel) unique.
_LOOKUPS = (
    "CREATE UNIQUE INDEX IF NOT EXISTS by_rel ON files (tree, rel)",
    "CREATE INDEX IF NOT EXISTS by_question ON files (dataset, question)",
)
_INSERT = f"INSERT OR REPLACE INTO files ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})"
_DELETE = "DELETE FROM files WHERE tree=? AND rel=?"
# One row per question folder (and one for the tree's top, rel ""): the signature of its
# listing when it was last scanned (kag.view.walk.signature).
FOLDER_COLUMNS = (
    "tree TEXT NOT NULL, rel TEXT NOT NULL, dataset TEXT NOT NULL, question TEXT NOT NULL, "
    "sig BLOB NOT NULL, files INTEGER NOT NULL, PRIMARY KEY (tree, rel)"
)
_INSERT_FOLDER = "INSERT OR REPLACE INTO folders VALUES (?, ?, ?, ?, ?, ?)"
_DELETE_FOLDER = "DELETE FROM folders WHERE tree=? AND rel=?"


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

    @property
    def changed(self) -> bool:
        """Whether the index's rows changed (and with them what a page shows)."""
        return bool(self.read or self.removed or self.written)


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


def _settings_fingerprint(datasets: Datasets, prefix: str, extract: str | None) -> str:
    st = os.stat(datasets.path)
    return f"v{SCHEMA_VERSION}|{os.path.realpath(datasets.path)}|{st.st_size}|{st.st_mtime_ns}|{prefix}|{extract}"


class Index:
    """The index file: opened (created when missing), then :meth:`scan` brings it up to date."""

    def __init__(self, path: Path, datasets: Datasets, trees: list[Tree], prefix: str, extract: str | None):
        self.path = path
        self.datasets = datasets
        self.trees = trees
        self.prefix = prefix
        self.extract = extract
        self.fingerprint = _settings_fingerprint(datasets, prefix, extract)
        #: After a scan that read every file (the first), the tallies of the epoch 1 files
        #: by (tree, setup, dataset), made by the workers as they graded them; else None.
        self.tallies: dict[tuple[str, str, str], Tally] | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=OFF")
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self.db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
            if row is None or row[0] != self.fingerprint:
                # Other settings (datasets file changed, --prefix, --extract): grade again.
                self.db.execute("DROP TABLE IF EXISTS files")
                self.db.execute("DROP TABLE IF EXISTS folders")
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (self.fingerprint,))
            self.db.execute(f"CREATE TABLE IF NOT EXISTS files ({COLUMNS})")
            self.db.execute(f"CREATE TABLE IF NOT EXISTS folders ({FOLDER_COLUMNS})")
            for lookup in _LOOKUPS:
                self.db.execute(lookup)
            self.db.commit()
        except sqlite3.Error as exc:
            raise InputError(f"{path}: cannot open the index: {exc}") from None

    def close(self) -> None:
        self.db.close()

    def scan(self, on_rows: Callable[[list[tuple[object, ...]]], None] | None = None) -> ScanStats:
        """Bring the index up to date with the trees: new and changed files read, gone ones
        dropped. ``on_rows`` is given the rows stored, as they are, each question's in one call."""
        seen = read = removed = written = 0
        warnings: list[str] = []
        tallies: dict[tuple[str, str, str], Tally] | None = {}
        if self.extract is not None:
            compile_spec(self.extract)  # a bad pattern is a usage error before any file is read
        db = self.db
        if db.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None:
            db.execute("DROP INDEX IF EXISTS by_rel")
            db.execute("DROP INDEX IF EXISTS by_question")
        # A tree given under several labels is scanned once: its rows show under each label.
        for root in tree_labels(self.trees):
            check_results_root(root)
            stored = {
                rel: (sig, count)
                for rel, sig, count in db.execute("SELECT rel, sig, files FROM folders WHERE tree=?", (root,))
            }
            new = not stored  # every scan stores the signature of the tree's top ("")
            top: list[tuple[str, str]] = []
            folders: list[_FolderJob] = []
            for rel, dataset, question, entry in iter_top(root):
                if question:
                    old = stored.pop(rel, None)
                    sig, count = old if old is not None else (None, 0)
                    folders.append((entry.path, rel, dataset, question, sig, count))
                else:
                    top.append((rel, dataset))
            seen += len(top)
            gone, added = self._top(root, top, stored.pop("", None), on_rows)
            removed += gone
            written += added
            ctx = _Context(self.datasets, self.extract, self.prefix, str(self.path))
            chunks = ((root, new, chunk) for chunk in _batched(iter(folders), CHUNK_FOLDERS))
            for part in self._parts(partial(_scan_chunk, ctx), chunks, len(folders), new):
                seen += part.seen
                read += part.read
                removed += len(part.gone)
                warnings.extend(part.warnings)
                db.executemany(_DELETE, [(root, rel) for rel in part.gone])
                db.executemany(_INSERT, part.rows)
                written += len(part.rows)
                if on_rows is not None:
                    on_rows(part.rows)
                db.executemany(_INSERT_FOLDER, [(root, *f) for f in part.folders])
                db.executemany(_DELETE_FOLDER, [(root, rel) for rel in part.dropped])
                if new and tallies is not None:
                    for (setup, dataset), tally in part.tallies.items():  # merged in chunk order
                        key = (root, setup, dataset)
                        if key not in tallies:
                            tallies[key] = Tally()
                        tallies[key].merge(tally)
            if not new:
                tallies = None
            for rel in stored:  # question folders gone
                dataset, question = rel.split("/", 1)
                removed += db.execute(
                    "DELETE FROM files WHERE tree=? AND dataset=? AND question=?",
                    (root, dataset, question),
                ).rowcount
                db.execute(_DELETE_FOLDER, (root, rel))
        live = [t.root for t in self.trees]
        for table in ("files", "folders"):
            db.execute(f"DELETE FROM {table} WHERE tree NOT IN ({', '.join('?' * len(live))})", live)
        for lookup in _LOOKUPS:
            db.execute(lookup)
        db.commit()
        self.tallies = tallies
        return ScanStats(seen, read, removed, tuple(warnings), written)

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
        rows = [_row(root, rel, dataset, "", None, 1, IGNORED) for rel, dataset in top if rel not in known]
        self.db.executemany(_INSERT, rows)
        if on_rows is not None:
            on_rows(rows)
        gone = [(root, rel) for rel in known - present]
        self.db.executemany(_DELETE, gone)
        self.db.execute(_INSERT_FOLDER, (root, "", "", "", sig, len(top)))
        return len(gone), len(rows)

    def _parts(
        self, work: Callable[[_Chunk], _Part], chunks: Iterator[_Chunk], folders: int, new: bool
    ) -> Iterator[_Part]:
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


# Question folders per chunk of work (about ten files each), and from how many a pool is used.
CHUNK_FOLDERS = 100
POOL_FOLDERS = 400

#: (path, relative path, dataset, question, the signature the index holds or None, and
#: the folder's count of file-level entries with it)
_FolderJob = tuple[str, str, str, str, bytes | None, int]
#: (tree root, whether the index holds nothing of the tree, question folders)
_Chunk = tuple[str, bool, list[_FolderJob]]


@dataclass(frozen=True)
class _Context:
    datasets: Datasets
    extract: str | None
    prefix: str
    index: str  # the index file, read by a worker for the rows of a folder that changed


@dataclass
class _Part:
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
            "SELECT rel, size, mtime FROM files WHERE tree=? AND dataset=? AND question=?",
            (root, dataset, question),
        )
        return {rel: (size, mtime) for rel, size, mtime in rows}

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


def _scan_chunk(ctx: _Context, chunk: _Chunk) -> _Part:
    """The changes of some question folders of one tree: each folder listed and its result
    files stat'ed; one whose signature is the index's is done; in another, the files new
    or changed since the index's rows are read (every file, in a tree new to the index)."""
    root, new, jobs = chunk
    part = _Part()
    abstention = compile_abstention(DEFAULT_ABSTENTION)
    spec = compile_spec(ctx.extract) if ctx.extract is not None else None
    keys: dict[tuple[str, str], AnswerKey] = {}
    tallies = part.tallies if new else None
    known_rows = _KnownRows(ctx.index)
    try:
        for path, rel, dataset, question, old, count in jobs:
            # A tree new to the index has every file read: its stamp is taken as it is read.
            folder = list_folder(path, part.warnings, stamped=not new)
            if folder is None:
                if old is not None:
                    part.gone.extend(known_rows.of(root, dataset, question))
                    part.dropped.append(rel)
                continue
            sig = signature(folder) if not new else b""
            if sig == old:  # nothing in the folder changed
                part.seen += count
                continue
            known = known_rows.of(root, dataset, question) if not new else {}
            present = set()
            for frel, epoch, setup, file_stamp, slot in iter_entries(folder, rel, ctx.prefix):
                part.seen += 1
                present.add(frel)
                if setup is None:
                    # An ignored entry's row has no stamp: one with a stamp was a result file.
                    if known.get(frel, ()) != NO_STAMP:
                        part.rows.append(_row(root, frel, dataset, question, None, epoch, IGNORED))
                    continue
                if known.get(frel) == file_stamp:
                    continue
                part.read += 1
                row = _grade_one(
                    ctx.datasets,
                    root,
                    frel,
                    dataset,
                    question,
                    setup,
                    epoch,
                    os.path.join(path, frel[len(rel) + 1 :]),
                    file_stamp,
                    abstention,
                    spec,
                    tallies,
                    keys,
                )
                part.rows.append(row)
                if new:
                    folder.stamps[slot : slot + 2] = cast("Stamp", row[7:9])
            if new:
                fill_stamps(folder, path)
                sig = signature(folder)
            part.gone.extend(r for r in known if r not in present)
            part.folders.append((rel, dataset, question, sig, len(present)))
    finally:
        known_rows.close()
    return part


def _grade_one(
    datasets: Datasets,
    root: str,
    rel: str,
    dataset: str,
    question: str,
    setup: str,
    epoch: int,
    path: str,
    stamp: Stamp,
    abstention: Any,
    spec: Any,
    tallies: dict[tuple[str, str], Tally] | None = None,
    keys: dict[tuple[str, str], AnswerKey] | None = None,
) -> tuple[object, ...]:
    """The row of one result file: graded by kag's grading rule against its question; an
    epoch 1 file graded is also added to its (setup, dataset) tally in ``tallies``. Its
    stamp is that of the file read (else ``stamp``, or the file's when ``stamp`` is none)."""
    q = datasets.get(dataset, question)
    if q is None or (q.mcq is None and q.open is None):
        return _row(root, rel, dataset, question, setup, epoch, IGNORED, _known_stamp(stamp, path))
    if q.mcq is not None and q.mcq.answer is None:
        return _row(root, rel, dataset, question, setup, epoch, SKIPPED, _known_stamp(stamp, path))
    try:
        data, st = read_result_stamped(path)
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the scan
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        stamp = _known_stamp(stamp, path)
        return _row(root, rel, dataset, question, setup, epoch, UNREADABLE, stamp, reason=reason)
    stamp = (st.st_size, st.st_mtime_ns)
    try:
        fields = read_grading_fields(data, bool(q.evidence))
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the scan
        return _row(root, rel, dataset, question, setup, epoch, UNREADABLE, stamp, reason=str(exc))
    if q.open is not None:
        exact, f1 = grade_open_response(fields.response, q.open.answers)
        graded = grade_fields(fields, AnswerKey("", ()), dataset, question, setup, abstention)
        if tallies is not None and epoch == 1:
            _tally(tallies, setup, dataset).add_open(exact, f1, graded.outcome is Outcome.ERR)
        return _row(root, rel, dataset, question, setup, epoch, OPEN, stamp, graded=graded, open_=(exact, f1))
    assert q.mcq is not None and q.mcq.answer is not None
    key = keys.get((dataset, question)) if keys is not None else None
    if key is None:  # folded once per question of a chunk, not once per file
        key = AnswerKey.of(q.mcq.answer, q.mcq.options)
        if keys is not None:
            keys[(dataset, question)] = key
    graded = grade_fields(fields, key, dataset, question, setup, abstention)
    extracted_key = None
    if spec is not None:
        extracted, extracted_key = extracted_grade(spec, graded.response, key)
        graded = replace(graded, extracted=extracted)
    if tallies is not None and epoch == 1:
        _tally(tallies, setup, dataset).add(graded)
    found = evidence_record(q.evidence, fields.retrieval_text, graded.outcome is Outcome.OK)
    bits = "".join("1" if f else "0" for f in found.found) if found is not None else None
    return _row(
        root,
        rel,
        dataset,
        question,
        setup,
        epoch,
        GRADED,
        stamp,
        graded=graded,
        evidence=bits,
        extracted_key=extracted_key,
    )


def _known_stamp(stamp: Stamp, path: str) -> Stamp:
    if stamp[0] is not None:
        return stamp
    try:
        st = os.lstat(path)
    except OSError:
        return NO_STAMP
    return (st.st_size, st.st_mtime_ns)


def _tally(tallies: dict[tuple[str, str], Tally], setup: str, dataset: str) -> Tally:
    tally = tallies.get((setup, dataset))
    if tally is None:
        tally = tallies[(setup, dataset)] = Tally()
    return tally


def _row(
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
    graded: object = None,
    open_: tuple[float, float] | None = None,
    evidence: str | None = None,
    extracted_key: str | None = None,
) -> tuple[object, ...]:
    g = graded
    base = (root, rel, dataset, question, setup, epoch, kind, stamp[0], stamp[1])
    if g is None:
        return (*base, None, None, None, None, reason, None, None, None)
    assert isinstance(g, GradedFile)
    r, c, u = g.retrieval, g.config, g.usage
    ag = c.augmented_generation if c is not None else None
    detail = Detail(
        int(g.abstained),
        int(g.non_option),
        g.generation_ns,
        g.context_length,
        r.time_ns if r is not None else None,
        r.relationships if r is not None else None,
        r.properties if r is not None else None,
        c.provider if c is not None else None,
        c.model if c is not None else None,
        c.temperature if c is not None else None,
        c.tokens if c is not None else None,
        ag.retriever if ag is not None else None,
        ag.database if ag is not None else None,
        u.prompt_tokens if u is not None else None,
        u.completion_tokens if u is not None else None,
        open_[0] if open_ is not None else None,
        open_[1] if open_ is not None else None,
        answer_vote(g.response),
        extracted_key,
    )
    return (
        *base,
        g.outcome.value,
        g.extracted.value if g.extracted is not None else None,
        g.response[:ANSWER_CHARS] if g.response is not None else None,
        g.error[:ERROR_CHARS] if g.error is not None else None,
        reason,
        r.vertices if r is not None else None,
        evidence,
        pack_detail(detail),
    )
