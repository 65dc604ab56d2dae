"""The index row of a graded record: :func:`to_row` and :func:`from_row`, generated from the
fields of :class:`~kag.grading.record.GradedFile`, and the version of that layout.

A row holds the columns the pages filter and sort on (:data:`COLUMNS`: the file's place,
kind and stamp, its grades, the head of its response and error, its vertex count, its
evidence bits, the key of its judge's verdict), and every other field of the record in one
``detail`` column: the record's remaining fields in their declared order, each nested
record (the retrieval sample, the model's config, the usage, the retrieval quality) as the
list of its own fields, an enum as its value, the last fields the record has not (None)
left out. Nothing names a field by hand: a field added to the record is stored and read
back, and :data:`RECORD_VERSION`, a digest of the record's field names and types, nested
ones included, changes with it, so that an index of an older layout is rebuilt, never
misread (:mod:`kag.view.index` keeps it in the index's fingerprint).

The response and the error text are kept whole when a registered measure needs them
(:func:`whole_fields`); otherwise their heads, so that the index stays small.
"""

from __future__ import annotations

import hashlib
import json
import os
import types
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from enum import Enum
from operator import attrgetter, itemgetter
from typing import Any, Union, get_args, get_origin, get_type_hints

import orjson

from kag.grading.record import GradedFile, Outcome
from kag.grading.rule import rust_trim
from kag.results.codec import RetrievalSample
from kag.results.model import ModelConfig
from kag.textsafe import ascii_fold

ANSWER_CHARS = 200  # the head of a response kept when no measure needs it whole
ERROR_CHARS = 2000  # the head of an error file's text, likewise

COLUMNS = (
    "tree TEXT NOT NULL, rel TEXT NOT NULL, dataset TEXT NOT NULL, question TEXT NOT NULL, "
    "setup TEXT, epoch INTEGER NOT NULL, kind TEXT NOT NULL, size INTEGER, mtime INTEGER, "
    "outcome TEXT, extracted TEXT, answer TEXT, error TEXT, reason TEXT, vertices INTEGER, "
    "evidence TEXT, detail BLOB, vote TEXT, judged TEXT"
)
#: The columns in the order of a row (the snapshot reads rows by position).
NAMES = tuple(c.split()[0] for c in COLUMNS.split(", "))
TREE, REL, DATASET, QUESTION, SETUP, EPOCH, KIND, SIZE, MTIME = range(9)
OUTCOME, EXTRACTED, ANSWER, ERROR, REASON, VERTICES, EVIDENCE, DETAIL, VOTE, JUDGED = range(9, 19)

# The record's fields held in a column of their own (by the column's position), or made
# from the row (the setup's name, given by the reader; the path, from the tree and rel).
_IN_COLUMNS = {"dataset": DATASET, "question": QUESTION, "outcome": OUTCOME, "extracted": EXTRACTED}
_TEXTS = {"response": (ANSWER, ANSWER_CHARS), "error": (ERROR, ERROR_CHARS)}
_FROM_ROW = {"setup", "path"}

Decoder = Callable[[Any], Any] | None  # None: the JSON value is the field's value


def _optional(tp: Any) -> tuple[Any, bool]:
    """``tp`` without ``| None``, and whether it had it."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) < len(get_args(tp)):
            return (args[0] if len(args) == 1 else Union[tuple(args)]), True  # noqa: UP007
    return tp, False


def describe(tp: Any) -> str:
    """A type as the layout's version sees it: a record by its name and its fields' names
    and types, an enum by its values, a generic by its arguments."""
    inner, optional = _optional(tp)
    if optional:
        return describe(inner) + "|None"
    if isinstance(tp, type) and is_dataclass(tp):
        hints = get_type_hints(tp)
        return f"{tp.__name__}({','.join(f'{f.name}:{describe(hints[f.name])}' for f in fields(tp))})"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return f"{tp.__name__}{{{','.join(str(m.value) for m in tp)}}}"
    args = get_args(tp)
    if args:
        shown = ",".join("..." if a is Ellipsis else describe(a) for a in args)
        return f"{getattr(get_origin(tp), '__name__', str(get_origin(tp)))}[{shown}]"
    return getattr(tp, "__name__", str(tp))


def decoder(tp: Any) -> Decoder:
    """How a field of type ``tp`` is made again from its JSON value (None: it is that value)."""
    inner, optional = _optional(tp)
    if optional:
        made = decoder(inner)
        if made is None:
            return None
        return lambda v: None if v is None else made(v)
    if isinstance(tp, type) and is_dataclass(tp):
        hints = get_type_hints(tp)
        parts = [decoder(hints[f.name]) for f in fields(tp)]
        if all(p is None for p in parts):
            return lambda v: tp(*v)
        return lambda v: tp(*[x if d is None else d(x) for d, x in zip(parts, v, strict=True)])
    if isinstance(tp, type) and issubclass(tp, Enum):
        table = {m.value: m for m in tp}
        return table.__getitem__
    if get_origin(tp) is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = decoder(args[0])
            return tuple if item is None else (lambda v: tuple(map(item, v)))
        items = [decoder(a) for a in args]
        return lambda v: tuple(x if d is None else d(x) for d, x in zip(items, v, strict=True))
    return None


_HINTS = get_type_hints(GradedFile)
_FIELDS = tuple(f.name for f in fields(GradedFile))
#: The record's fields kept in the ``detail`` column, in declared order.
DETAIL_FIELDS = tuple(n for n in _FIELDS if n not in _IN_COLUMNS and n not in _TEXTS and n not in _FROM_ROW)
#: A digest of the record's layout: its field names and types, nested records included.
RECORD_VERSION = hashlib.blake2b(describe(GradedFile).encode(), digest_size=6).hexdigest()
_DECODERS = {name: decoder(_HINTS[name]) for name in _FIELDS}
# How each argument of GradedFile is found in a row: ("column", position), ("detail", index),
# ("setup", 0) or ("path", 0), with its decoder.
_SOURCES = tuple(
    (
        ("column", _IN_COLUMNS[n])
        if n in _IN_COLUMNS
        else ("column", _TEXTS[n][0])
        if n in _TEXTS
        else (n, 0)
        if n in _FROM_ROW
        else ("detail", DETAIL_FIELDS.index(n))
    )
    + (_DECODERS[n],)
    for n in _FIELDS
)


def whole_fields() -> frozenset[str]:
    """The record's text fields a registered measure reads (``response``, ``error``): a row
    keeps those whole, the others' heads."""
    from kag.grading.measures import needs, registered

    return needs(frozenset(m.name for m in registered())) & frozenset(_TEXTS)


_GETTERS: dict[type, Callable[[Any], Any]] = {}
Getter = Callable[[Any], tuple[Any, ...]]
_DETAIL: Getter = attrgetter(*DETAIL_FIELDS)


def _detail_getter(tp: type) -> Getter:
    """The getter of the detail's fields of a record of type ``tp``: by position when it is
    a named tuple holding them (as :data:`~kag.grading.mcq.question_files.TupleRecord`
    does; an item is read without looking its name up), else by name."""
    names = getattr(tp, "_fields", None)
    if issubclass(tp, tuple) and isinstance(names, tuple) and set(DETAIL_FIELDS) <= set(names):
        return itemgetter(*(names.index(name) for name in DETAIL_FIELDS))
    return _DETAIL


# The positions in the detail of the retrieval sample and of the model's config (the
# fields declared of those types), which to_row writes without orjson's call back.
_SAMPLE_AT, _CONFIG_AT = (
    next(at for at, name in enumerate(DETAIL_FIELDS) if _optional(_HINTS[name])[0] is tp)
    for tp in (RetrievalSample, ModelConfig)
)
# The detail's getter of each type of record met, made once.
_DETAIL_OF: dict[type, Getter] = {}
# A grade's value, looked up (an enum's ``value`` is a property: a call per row).
_VALUES = {outcome: outcome.value for outcome in Outcome}


def _fields_getter(tp: type) -> Callable[[Any], Any]:
    """The getter of the fields of a record of type ``tp``, as a sequence."""
    names = tuple(f.name for f in fields(tp))
    # attrgetter of several names gives their tuple, in C; of one, the value alone.
    return attrgetter(*names) if len(names) > 1 else (lambda v: [getattr(v, names[0])])


def _as_list(value: Any) -> Any:
    """A nested record as the sequence of its fields, an enum as its value (orjson's
    ``default``): one getter per type, made once."""
    getter = _GETTERS.get(type(value))
    if getter is None:
        if isinstance(value, Enum):
            getter = attrgetter("value")
        elif not is_dataclass(value) or isinstance(value, type):
            raise TypeError(f"cannot store {type(value).__name__} in the index")
        else:
            getter = _fields_getter(type(value))
        _GETTERS[type(value)] = getter
    return getter(value)


_SAMPLE_FIELDS = _fields_getter(RetrievalSample)  # a sample as orjson's call back lists it
_PASSTHROUGH = orjson.OPT_PASSTHROUGH_DATACLASS


def shared_json(
    kept: int = 1024, written: dict[int, tuple[ModelConfig, Any]] | None = None
) -> Callable[[Any], Any]:
    """orjson's ``default`` for a row's detail: :func:`_as_list`, but the model's config,
    which the reader shares between files (one object for every file of a setup,
    :mod:`kag.results.codec`), written once per object and embedded in each row as it is
    (an ``orjson.Fragment``, looked up by identity in ``written``, where it is kept as
    (the config, its JSON); up to ``kept`` objects). The bytes are those orjson writes
    calling back for it; a config orjson cannot write (a number past 64 bits) is left to
    the call back, which then fails as it would (the row is written by :func:`pack`'s
    standard library JSON)."""
    if written is None:
        written = {}

    def default(value: Any) -> Any:
        if type(value) is not ModelConfig:
            return _as_list(value)
        known = written.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        if len(written) >= kept:
            written.clear()
        try:
            json_of: Any = orjson.Fragment(orjson.dumps(value, default=_as_list, option=_PASSTHROUGH))
        except orjson.JSONEncodeError:
            json_of = _as_list(value)
        written[id(value)] = (value, json_of)  # the value held: its id names no other while kept
        return json_of

    return default


# The configs written (by identity: the config and its JSON), which to_row also reads.
_CONFIG_JSON: dict[int, tuple[ModelConfig, Any]] = {}
_SHARED_JSON = shared_json(written=_CONFIG_JSON)


def pack(values: list[Any]) -> bytes:
    """``values`` as JSON (a number past 64 bits, a time read from a hostile file, in the
    standard library's JSON behind a NUL: orjson neither writes nor reads it exactly)."""
    try:
        data = orjson.dumps(values, default=_as_list, option=_PASSTHROUGH)
    except orjson.JSONEncodeError:
        return b"\0" + json.dumps(values, default=_as_list).encode()
    # orjson's bytes keep the block of its write buffer (its size only is cut): a scan holds
    # a thousand rows at a time, whose blocks then each take fresh memory (writing costs ten
    # times more). A copy of the bytes' own size lets that block go at once (formatting
    # makes it with a third of the instructions of bytes(memoryview(data))).
    return b"%b" % (data,)


def unpack(data: bytes) -> list[Any]:
    loaded: list[Any] = json.loads(data[1:]) if data[:1] == b"\0" else orjson.loads(data)
    return loaded


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


def _detail(record: GradedFile) -> list[Any]:
    """The fields of ``record`` that the detail holds, in their order, without the last
    ones it has not (None)."""
    getter = _DETAIL_OF.get(type(record))
    if getter is None:
        getter = _DETAIL_OF[type(record)] = _detail_getter(type(record))
    detail = list(getter(record))
    while detail and detail[-1] is None:  # the fields a file has not: most of the last ones
        del detail[-1]
    return detail


def to_row(
    record: GradedFile,
    base: tuple[object, ...],
    whole: frozenset[str] = frozenset(),
    evidence: str | None = None,
    judged: str | None = None,
) -> tuple[object, ...]:
    """The row of ``record``: ``base`` (its first nine columns: tree, rel, dataset, question,
    setup, epoch, kind, size, mtime), then its grades, texts (whole when named in ``whole``,
    else their heads), vertex count, ``evidence`` bits, the other fields in ``detail``, the
    vote of a response longer than its head (:func:`answer_vote`), and the key its verdict
    is cached under when a judge is named (``judged``, :mod:`kag.view.verdict_rows`)."""
    response, error = record.response, record.error
    vote = None
    if response is not None and len(response) > ANSWER_CHARS and "response" not in whole:
        vote = answer_vote(response)
        response = response[:ANSWER_CHARS]
    if error is not None and len(error) > ERROR_CHARS and "error" not in whole:
        error = error[:ERROR_CHARS]
    detail = _detail(record)
    # The two records nearly every file holds put in their JSON form here, without a call
    # back from orjson: the retrieval sample as its fields, a config already written as
    # its fragment (the bytes are those the call back gives).
    kept = len(detail)
    if kept > _SAMPLE_AT and type(detail[_SAMPLE_AT]) is RetrievalSample:
        detail[_SAMPLE_AT] = _SAMPLE_FIELDS(detail[_SAMPLE_AT])
    if kept > _CONFIG_AT and (config := detail[_CONFIG_AT]) is not None:
        known = _CONFIG_JSON.get(id(config))
        if known is not None and known[0] is config:
            detail[_CONFIG_AT] = known[1]
    try:  # pack(detail), without its call, and each model config written once
        packed = b"%b" % (orjson.dumps(detail, default=_SHARED_JSON, option=_PASSTHROUGH),)
    except orjson.JSONEncodeError:
        packed = pack(_detail(record))  # the records as they are: the standard library's JSON
    extracted, retrieval = record.extracted, record.retrieval
    return base + (
        _VALUES[record.outcome],
        _VALUES[extracted] if extracted is not None else None,
        response,
        error,
        None,
        retrieval.vertices if retrieval is not None else None,  # record.vertices, without its call
        evidence,
        packed,
        vote,
        judged,
    )


def from_row(row: tuple[Any, ...], setup: str) -> GradedFile:
    """The record :func:`to_row` stored, named ``setup`` (its name under a tree's label),
    with the texts the row kept and its path in the tree."""
    detail = unpack(row[DETAIL])
    kept = len(detail)
    args = []
    for where, at, decode in _SOURCES:
        if where == "column":
            value = row[at]
        elif where == "detail":
            value = detail[at] if at < kept else None
        elif where == "setup":
            value = setup
        else:
            value = os.path.join(row[TREE], row[REL])
        args.append(value if decode is None or value is None else decode(value))
    return GradedFile(*args)


def detail_field(row: tuple[Any, ...], name: str) -> Any:
    """One field of the record that a row's ``detail`` keeps, decoded."""
    detail = unpack(row[DETAIL])
    at = DETAIL_FIELDS.index(name)
    value = detail[at] if at < len(detail) else None
    decode = _DECODERS[name]
    return value if decode is None or value is None else decode(value)


def detail_field_of(detail: bytes, name: str) -> Any:
    """One field of a row's ``detail`` as stored (an enum as its value)."""
    values = unpack(detail)
    at = DETAIL_FIELDS.index(name)
    return values[at] if at < len(values) else None


def with_detail_field(detail: bytes, name: str, value: Any) -> bytes | None:
    """A row's ``detail`` with the field ``name`` set to ``value`` (a value as stored: an
    enum's value), or None when it holds that value already."""
    values = unpack(detail)
    at = DETAIL_FIELDS.index(name)
    if (values[at] if at < len(values) else None) == value:
        return None
    values.extend([None] * (at + 1 - len(values)))
    values[at] = value
    while values and values[-1] is None:
        values.pop()
    return pack(values)
