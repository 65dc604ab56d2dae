"""The rows of the index: what one result file becomes (graded by kag's rule, as `kag
stats` grades it), and the work of a scan on a chunk of question folders (listed, compared
with the index's stamps, the changed files read), which worker processes share.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import astuple, dataclass, field, replace
from typing import Any, NamedTuple, cast
from urllib.parse import quote

import orjson

from kag.datasets import Datasets, Question
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
from kag.grading.retrieval_quality import QualityRecord, fields_quality, similarity_for
from kag.results.codec import GradingFields
from kag.results.io import read_result_stamped
from kag.textsafe import is_utf8
from kag.view.fields import ANSWER_CHARS, answer_vote, read_grading_fields
from kag.view.walk import NO_STAMP, Stamp, fill_stamps, iter_entries, list_folder, signature

ERROR_CHARS = 2000


def shown_name(name: str) -> str:
    """A name read from the file system as text SQLite (and a page) can hold: a byte that
    is not UTF-8 written ``\\xff``."""
    if is_utf8(name):
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


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
    #: The file's retrieval quality against the gold evidence (QualityRecord's fields in
    #: order, the seed ranks a list), or None: see kag.grading.retrieval_quality.
    quality: list[Any] | None = None


def pack_detail(detail: Detail) -> bytes:
    """``detail`` as JSON (a number past 64 bits, a time read from a hostile file, in the
    standard library's JSON behind a NUL: orjson neither writes nor reads it exactly)."""
    try:
        return orjson.dumps(tuple(detail))
    except orjson.JSONEncodeError:
        return b"\0" + json.dumps(detail).encode()


def pack_quality(record: QualityRecord | None) -> list[Any] | None:
    """A quality record as the index keeps it (its fields in order, the seed ranks a list)."""
    if record is None:
        return None
    seeds = list(record.seed_ranks) if record.seed_ranks is not None else None
    return [*astuple(record)[:6], seeds, record.correct]


def unpack_quality(packed: list[Any] | None) -> QualityRecord | None:
    """The record :func:`pack_quality` kept."""
    if packed is None:
        return None
    e, ef, t, tf, r, rm, seeds, correct = packed
    return QualityRecord(e, ef, t, tf, r, rm, tuple(seeds) if seeds is not None else None, correct)


def unpack_detail(data: bytes) -> Detail:
    return Detail(*(json.loads(data[1:]) if data[:1] == b"\0" else orjson.loads(data)))


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


def scan_chunk(ctx: ScanContext, chunk: Chunk) -> Part:
    """The changes of some question folders of one tree: each folder listed and its result
    files stat'ed; one whose signature is the index's is done; in another, the files new
    or changed since the index's rows are read (every file, in a tree new to the index)."""
    root, new, jobs = chunk
    part = Part()
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
            named = is_utf8(path)  # a folder whose name is not UTF-8 holds no question's files
            for frel, epoch, setup, file_stamp, slot in iter_entries(folder, rel, ctx.prefix):
                part.seen += 1
                if not named or not is_utf8(frel):
                    frel, setup = shown_name(frel), None
                present.add(frel)
                if setup is None:
                    # An ignored entry's row has no stamp: one with a stamp was a result file.
                    if known.get(frel, ()) != NO_STAMP:
                        part.rows.append(make_row(root, frel, dataset, question, None, epoch, IGNORED))
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
        return make_row(root, rel, dataset, question, setup, epoch, IGNORED, _known_stamp(stamp, path))
    if q.mcq is not None and q.mcq.answer is None:
        return make_row(root, rel, dataset, question, setup, epoch, SKIPPED, _known_stamp(stamp, path))
    try:
        data, st = read_result_stamped(path)
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the scan
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        stamp = _known_stamp(stamp, path)
        return make_row(root, rel, dataset, question, setup, epoch, UNREADABLE, stamp, reason=reason)
    stamp = (st.st_size, st.st_mtime_ns)
    try:
        fields = read_grading_fields(data, bool(q.evidence or q.evidence_triples))
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the scan
        return make_row(root, rel, dataset, question, setup, epoch, UNREADABLE, stamp, reason=str(exc))
    if q.open is not None:
        exact, f1 = grade_open_response(fields.response, q.open.answers)
        graded = grade_fields(fields, AnswerKey("", ()), dataset, question, setup, abstention)
        quality = _quality(q, fields, exact == 1)
        if tallies is not None and epoch == 1:
            record = replace(graded, exact_match=exact, f1=f1, retrieval_quality=quality)
            _tally(tallies, setup, dataset).add_open_record(record)
        return make_row(
            root,
            rel,
            dataset,
            question,
            setup,
            epoch,
            OPEN,
            stamp,
            graded=graded,
            open_=(exact, f1),
            quality=quality,
        )
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
    graded = replace(graded, retrieval_quality=_quality(q, fields, graded.outcome is Outcome.OK))
    if tallies is not None and epoch == 1:
        _tally(tallies, setup, dataset).add(graded)
    found = evidence_record(q.evidence, fields.retrieval_text, graded.outcome is Outcome.OK)
    bits = "".join("1" if f else "0" for f in found.found) if found is not None else None
    return make_row(
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
        quality=graded.retrieval_quality,
    )


def _quality(q: Question, fields: GradingFields, correct: bool) -> QualityRecord | None:
    """The file's retrieval quality against the question's gold evidence, as `kag stats`
    measures it by default (exact matching, nodes named by ``name``); None without gold
    evidence or a retrieval."""
    return fields_quality(q.evidence, q.evidence_triples, fields, correct, similarity_for("exact"))


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
    graded: object = None,
    open_: tuple[float, float] | None = None,
    evidence: str | None = None,
    extracted_key: str | None = None,
    quality: QualityRecord | None = None,
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
        pack_quality(quality),
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
