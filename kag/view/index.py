"""The SQLite index of a result tree: one row per file at the result level of every
question folder (epoch 1's files and the later epochs' ``epochs/<n>/`` files).

Only the small fields are kept (the grade, the extracted answer's head, tokens, times,
retrieval sizes, size and mtime); responses, prompts and retrieval texts are read from the
file when a question is opened. A rescan reads again only the files whose (size, mtime)
changed. The index lives outside the tree (the user cache folder, keyed by the tree's real
path, unless a file is named); the tree is never written to.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any, TypeVar

from kag.datasets import Datasets
from kag.errors import InputError
from kag.grading.evidence import evidence_record
from kag.grading.mcq.extracted import compile_spec, extracted_grade
from kag.grading.mcq.metrics import Tally
from kag.grading.mcq.rule import (
    DEFAULT_ABSTENTION,
    AnswerKey,
    Outcome,
    compile_abstention,
    grade_fields,
    rust_trim,
)
from kag.grading.open_grading import grade_open_response
from kag.results.codec import parse_grading_fields
from kag.results.io import read_result_bytes
from kag.results.model import TMP_SUFFIX
from kag.results.tree import EPOCHS_FOLDER, check_results_root, result_file_setup, sorted_entries
from kag.textsafe import ascii_fold

SCHEMA_VERSION = 4
ANSWER_CHARS = 200  # the head of a response kept for the grid
ERROR_CHARS = 2000
_T = TypeVar("_T")

# Row kinds: what a file is to `kag stats` (graded, ignored, skipped, unreadable, open).
GRADED, IGNORED, SKIPPED, UNREADABLE, OPEN = "graded", "ignored", "skipped", "unreadable", "open"

COLUMNS = (
    "tree TEXT NOT NULL, rel TEXT NOT NULL, dataset TEXT NOT NULL, question TEXT NOT NULL, "
    "setup TEXT, epoch INTEGER NOT NULL, kind TEXT NOT NULL, size INTEGER, mtime INTEGER, "
    "outcome TEXT, abstained INTEGER, non_option INTEGER, extracted TEXT, answer TEXT, "
    "error TEXT, reason TEXT, gen_ns INTEGER, ctx_len INTEGER, ret_ns INTEGER, vertices INTEGER, "
    "relationships INTEGER, properties INTEGER, provider TEXT, model TEXT, temperature REAL, "
    "max_tokens INTEGER, ag_retriever TEXT, ag_database TEXT, prompt_tokens INTEGER, "
    "completion_tokens INTEGER, open_exact REAL, open_f1 REAL, evidence TEXT, vote TEXT, extracted_key TEXT, "
    "PRIMARY KEY (tree, rel)"
)
_NAMES = tuple(c.split()[0] for c in COLUMNS.split(", PRIMARY KEY")[0].split(", "))
_BY_QUESTION = "CREATE INDEX IF NOT EXISTS by_question ON files (dataset, question)"
_INSERT = f"INSERT OR REPLACE INTO files ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})"


def default_index_path(roots: list[str], fingerprint: str) -> Path:
    """``<user cache>/kag/view/<hash>.sqlite``: one index per set of trees and settings."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256("\0".join([*roots, fingerprint]).encode("utf-8", "surrogatepass")).hexdigest()
    return Path(base) / "kag" / "view" / f"{key[:32]}.sqlite"


@dataclass(frozen=True)
class ScanStats:
    """What one scan did: files seen, files (re)read, rows removed."""

    seen: int
    read: int
    removed: int


@dataclass(frozen=True)
class Tree:
    """A result tree and the label its setups show under (``""``: unlabelled)."""

    label: str
    root: str


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
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (self.fingerprint,))
            self.db.execute(f"CREATE TABLE IF NOT EXISTS files ({COLUMNS})")
            self.db.execute(_BY_QUESTION)
            self.db.commit()
        except sqlite3.Error as exc:
            raise InputError(f"{path}: cannot open the index: {exc}") from None

    def close(self) -> None:
        self.db.close()

    def scan(self) -> ScanStats:
        """Bring the index up to date with the trees: new and changed files read, gone ones dropped."""
        seen = read = removed = 0
        tallies: dict[tuple[str, str, str], Tally] | None = {}
        if self.extract is not None:
            compile_spec(self.extract)  # a bad pattern is a usage error before any file is read
        empty = self.db.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None
        if empty:  # filled at once: the question lookup is built after, in one pass
            self.db.execute("DROP INDEX IF EXISTS by_question")
        for tree in self.trees:
            check_results_root(tree.root)
            known = {
                rel: (size, mtime)
                for rel, size, mtime in self.db.execute(
                    "SELECT rel, size, mtime FROM files WHERE tree=?", (tree.root,)
                )
            }
            walk = _TreeWalk(tree.root, self.prefix, known)
            # A tree new to the index: its folders are walked by the worker processes too.
            for part in self._graded(walk.jobs()) if known else self._first(walk):
                self.db.executemany(_INSERT, part)
            if known:
                tallies = None
            elif tallies is not None:
                tallies.update({(tree.root, *key): t for key, t in walk.tallies.items()})
            self.db.executemany(_INSERT, walk.rows)
            seen += walk.seen
            read += walk.read
            gone = [(tree.root, rel) for rel in known if rel not in walk.present]
            removed += len(gone)
            self.db.executemany("DELETE FROM files WHERE tree=? AND rel=?", gone)
        live = [t.root for t in self.trees]
        self.db.execute(f"DELETE FROM files WHERE tree NOT IN ({', '.join('?' * len(live))})", live)
        self.db.execute(_BY_QUESTION)
        self.db.commit()
        self.tallies = tallies
        return ScanStats(seen, read, removed)

    def _graded(self, jobs: Iterator[_Job]) -> Iterator[list[tuple[object, ...]]]:
        """The rows of the files to read, in chunks; a pool of worker processes for many
        files, fed as the walk finds them (the walk and the reading overlap)."""
        from functools import partial

        from kag.workers import default_workers, ordered_map

        work = partial(_grade_chunk, _Context(self.datasets, self.extract))
        head = list(islice(jobs, POOL_FROM))
        chunks = _batched(chain(head, jobs), CHUNK_FILES)
        workers = default_workers() if len(head) >= POOL_FROM else 1
        if workers == 1:
            yield from map(work, chunks)
            return
        yield from ordered_map(
            work, chunks, workers, died="a worker process died while indexing", failed="indexing failed"
        )

    def _first(self, walk: _TreeWalk) -> Iterator[list[tuple[object, ...]]]:
        """The rows of a tree the index has none of, in chunks: its question folders are
        listed here, and each one's files listed, stat'ed and read by a pool of worker
        processes (as `kag stats` shares the walk) when there are many."""
        from functools import partial

        from kag.workers import default_workers, ordered_map

        folders = _folders(walk)
        head = list(islice(folders, POOL_FOLDERS))
        chunks = ((walk.root, chunk) for chunk in _batched(chain(head, folders), CHUNK_FOLDERS))
        work = partial(_walk_chunk, _Context(self.datasets, self.extract, self.prefix))
        workers = default_workers() if len(head) >= POOL_FOLDERS else 1
        parts = (
            map(work, chunks)
            if workers == 1
            else ordered_map(
                work, chunks, workers, died="a worker process died while indexing", failed="indexing failed"
            )
        )
        for part, tallies in parts:
            walk.seen += len(part)
            walk.read += sum(1 for row in part if row[4] is not None)
            for (setup, dataset), tally in tallies.items():  # merged in chunk order
                _tally(walk.tallies, setup, dataset).merge(tally)
            yield part


def _folders(walk: _TreeWalk) -> Iterator[tuple[str, str, str, str]]:
    """(path, relative path, dataset, question) of each question folder of ``walk``'s
    tree; the entries at the wrong level go to its rows as ignored."""
    for rel, dataset, question, entry in _top(walk.root):
        if question:
            yield entry.path, rel, dataset, question
        else:
            walk.seen += 1
            walk.rows.append(_row(walk.root, rel, dataset, "", None, 1, IGNORED))


def _walk_chunk(
    ctx: _Context, chunk: tuple[str, list[tuple[str, str, str, str]]]
) -> tuple[list[tuple[object, ...]], dict[tuple[str, str], Tally]]:
    """The rows of every file of some question folders of the tree ``chunk[0]``, and the
    tallies of their epoch 1 files by (setup, dataset)."""
    root, folders = chunk
    tallies: dict[tuple[str, str], Tally] = {}
    keys: dict[tuple[str, str], AnswerKey] = {}
    abstention = compile_abstention(DEFAULT_ABSTENTION)
    spec = compile_spec(ctx.extract) if ctx.extract is not None else None
    datasets, rows = ctx.datasets, []
    for path, rel, dataset, question in folders:
        for frel, _, _, epoch, entry, setup in _files(path, rel, dataset, question, ctx.prefix):
            if setup is None:
                rows.append(_row(root, frel, dataset, question, None, epoch, IGNORED))
            else:
                stamp = _stamp(entry)
                rows.append(
                    _grade_one(
                        datasets,
                        root,
                        frel,
                        dataset,
                        question,
                        setup,
                        epoch,
                        entry.path,
                        stamp,
                        abstention,
                        spec,
                        tallies,
                        keys,
                    )
                )
    return rows, tallies


def _stamp(entry: os.DirEntry[str]) -> tuple[int | None, int | None]:
    """(size, mtime) of a file, what tells a rescan it changed; (None, None) when it cannot be stat'ed."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return (None, None)
    return (st.st_size, st.st_mtime_ns)


def _batched(items: Iterator[_T], size: int) -> Iterator[list[_T]]:
    while chunk := list(islice(items, size)):
        yield chunk


class _TreeWalk:
    """One tree's walk for a scan: the files to read (new or changed since ``known``), and
    what it saw on the way (the rows of ignored entries, every path present, the counts)."""

    def __init__(self, root: str, prefix: str, known: dict[str, tuple[int | None, int | None]]) -> None:
        self.root, self.prefix, self.known = root, prefix, known
        self.rows: list[tuple[object, ...]] = []
        self.tallies: dict[tuple[str, str], Tally] = {}
        self.present: set[str] = set()
        self.seen = self.read = 0

    def jobs(self) -> Iterator[_Job]:
        root, known = self.root, self.known
        for rel, dataset, question, epoch, entry, setup in _walk(root, self.prefix):
            self.seen += 1
            self.present.add(rel)
            if setup is None:
                if rel not in known:
                    self.rows.append(_row(root, rel, dataset, question, None, epoch, IGNORED))
                continue
            stamp = _stamp(entry)
            if known.get(rel) == stamp:
                continue
            self.read += 1
            yield (root, rel, dataset, question, setup, epoch, entry.path, stamp)


CHUNK_FILES = 1000
POOL_FROM = 4000  # files to read from which worker processes are started
# The same for a tree new to the index, counted in question folders (about ten files each).
CHUNK_FOLDERS = 100
POOL_FOLDERS = 400

_Job = tuple[str, str, str, str, str, int, str, tuple[int | None, int | None]]


@dataclass(frozen=True)
class _Context:
    datasets: Datasets
    extract: str | None
    prefix: str = ""


def _grade_chunk(ctx: _Context, jobs: list[_Job]) -> list[tuple[object, ...]]:
    abstention = compile_abstention(DEFAULT_ABSTENTION)
    spec = compile_spec(ctx.extract) if ctx.extract is not None else None
    keys: dict[tuple[str, str], AnswerKey] = {}
    return [_grade_one(ctx.datasets, *job, abstention, spec, None, keys) for job in jobs]


def _grade_one(
    datasets: Datasets,
    root: str,
    rel: str,
    dataset: str,
    question: str,
    setup: str,
    epoch: int,
    path: str,
    stamp: tuple[int | None, int | None],
    abstention: Any,
    spec: Any,
    tallies: dict[tuple[str, str], Tally] | None = None,
    keys: dict[tuple[str, str], AnswerKey] | None = None,
) -> tuple[object, ...]:
    """The row of one result file: graded by kag's grading rule against its question; an
    epoch 1 file graded is also added to its (setup, dataset) tally in ``tallies``."""
    q = datasets.get(dataset, question)
    if q is None or (q.mcq is None and q.open is None):
        return _row(root, rel, dataset, question, setup, epoch, IGNORED, stamp)
    if q.mcq is not None and q.mcq.answer is None:
        return _row(root, rel, dataset, question, setup, epoch, SKIPPED, stamp)
    try:
        fields = parse_grading_fields(read_result_bytes(path), True, retrieval_text=bool(q.evidence))
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the scan
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        return _row(root, rel, dataset, question, setup, epoch, UNREADABLE, stamp, reason=reason)
    if q.open is not None:
        exact, f1 = grade_open_response(fields.response, q.open.answers)
        graded = grade_fields(fields, AnswerKey("", ()), dataset, question, setup, abstention)
        if tallies is not None and epoch == 1:
            _tally(tallies, setup, dataset).add_open(exact, f1, graded.outcome is Outcome.ERR)
        return _row(root, rel, dataset, question, setup, epoch, OPEN, stamp, graded=graded, open_=(exact, f1))
    assert q.mcq is not None and q.mcq.answer is not None
    key = keys.get((dataset, question)) if keys is not None else None
    if key is None:  # folded once per question of a chunk, not once per file
        key = AnswerKey(q.mcq.answer, tuple(q.mcq.options))
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


def _tally(tallies: dict[tuple[str, str], Tally], setup: str, dataset: str) -> Tally:
    tally = tallies.get((setup, dataset))
    if tally is None:
        tally = tallies[(setup, dataset)] = Tally()
    return tally


def answer_vote(response: str | None) -> str | None:
    """What a response longer than the grid's head votes for in maj@k
    (:func:`kag.grading.epochs.majority_correct` compares the answers trimmed and ASCII
    case folded): the SHA-256 of that form, so that it is compared whole without being
    kept; that form itself when it is no longer than the head (so that it votes with the
    short responses it equals). None for a shorter response (the head is all of it) and
    for an error file."""
    if response is None or len(response) <= ANSWER_CHARS:
        return None
    folded = ascii_fold(rust_trim(response))
    if len(folded) <= ANSWER_CHARS:
        return folded
    return "\0sha256:" + hashlib.sha256(folded.encode("utf-8", "surrogatepass")).hexdigest()


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
    base: list[object] = [root, rel, dataset, question, setup, epoch, kind, stamp[0], stamp[1]]
    if g is None:
        return (*base, None, None, None, None, None, None, reason, *([None] * 19))
    from kag.grading.mcq.rule import GradedFile

    assert isinstance(g, GradedFile)
    r, c, u = g.retrieval, g.config, g.usage
    ag = c.augmented_generation if c is not None else None
    return (
        *base,
        g.outcome.value,
        int(g.abstained),
        int(g.non_option),
        g.extracted.value if g.extracted is not None else None,
        g.response[:ANSWER_CHARS] if g.response is not None else None,
        g.error[:ERROR_CHARS] if g.error is not None else None,
        reason,
        g.generation_ns,
        g.context_length,
        r.time_ns if r is not None else None,
        r.vertices if r is not None else None,
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
        evidence,
        answer_vote(g.response),
        extracted_key,
    )


def _walk(root: str, prefix: str) -> Iterator[tuple[str, str, str, int, os.DirEntry[str], str | None]]:
    """(relative path, dataset, question, epoch, entry, setup or None when ignored) of every
    file-level entry, as `kag stats` walks them: no link followed, hidden dataset folders
    and ``.tmp`` writes passed over, entries at the wrong level ignored (question "")."""
    for rel, dataset, question, entry in _top(root):
        if question:
            yield from _files(entry.path, rel, dataset, question, prefix)
        else:
            yield rel, dataset, "", 1, entry, None


def _top(root: str) -> Iterator[tuple[str, str, str, os.DirEntry[str]]]:
    """(relative path, dataset, question, entry) of every question folder, and of every
    entry at the dataset or question level that is not one (question "": ignored)."""
    for d in sorted_entries(root):
        if d.name.startswith(".") and d.is_dir(follow_symlinks=False):
            continue
        if not d.is_dir(follow_symlinks=False):
            if not d.name.endswith(TMP_SUFFIX):
                yield d.name, "", "", d
            continue
        try:
            questions = sorted_entries(d.path)
        except OSError:
            continue
        for q in questions:
            if q.is_dir(follow_symlinks=False):
                yield f"{d.name}/{q.name}", d.name, q.name, q
            elif not q.name.endswith(TMP_SUFFIX):
                yield f"{d.name}/{q.name}", d.name, "", q


def _files(
    path: str, rel: str, dataset: str, question: str, prefix: str
) -> Iterator[tuple[str, str, str, int, os.DirEntry[str], str | None]]:
    """The file-level entries of one question folder (see :func:`_walk`), its later epochs' too."""
    try:
        entries = sorted_entries(path)
    except OSError:
        return
    for e in entries:
        if e.name == EPOCHS_FOLDER and e.is_dir(follow_symlinks=False):
            yield from _epochs(e.path, f"{rel}/{EPOCHS_FOLDER}", dataset, question, prefix)
            continue
        if e.name.endswith(TMP_SUFFIX):
            continue
        yield f"{rel}/{e.name}", dataset, question, 1, e, result_file_setup(e, prefix)


def _epochs(
    folder: str, rel: str, dataset: str, question: str, prefix: str
) -> Iterator[tuple[str, str, str, int, os.DirEntry[str], str | None]]:
    """The later epochs' files (``epochs/<n>/``, n >= 2 in decimal): never counted as ignored."""
    for n in sorted_entries(folder):
        # An epoch folder's name is n >= 2 in ASCII decimal, as `kag stats` reads them.
        if not (n.name.isascii() and n.name.isdigit() and not n.name.startswith("0")):
            continue
        if not n.is_dir(follow_symlinks=False):
            continue
        epoch = int(n.name)
        if epoch < 2:
            continue
        for e in sorted_entries(n.path):
            setup = result_file_setup(e, prefix)
            if setup is not None and not e.name.endswith(TMP_SUFFIX):
                yield f"{rel}/{n.name}/{e.name}", dataset, question, epoch, e, setup
