"""Prediction files: one row per query with scored candidates, as CSV or JSON Lines.

CSV (the reference format): no header, ``ent,rid,cand,score,cand,score,...`` per line.
JSON Lines: ``{"query": [ent, rid], "predictions": [[cand, score], ...]}`` per line.
The format is recognised by the first byte of the file (``{`` means JSON Lines); gzip is
recognised by its magic bytes. Ids must be integers in the 64-bit range, scores numbers
that are not NaN (infinities are allowed, as ``float()`` in the reference accepts them).

Parsing is per block of lines. The CSV fast path hands a whole block to simdjson as one
JSON array (a block of plain JSON numbers is valid JSON once newlines become commas),
which parses every number into a float64 buffer, correctly rounded as ``float()`` rounds,
without building a Python object per number. An id is exact in a float64 up to 2**53; a
block with a larger id is parsed by orjson instead, whose Python ints hold any 64-bit
id. A block the fast path cannot take (an error, or number spellings JSON lacks such as
``+1``, ``.5``, ``inf`` or ``1_000``) goes through the line-by-line path, which follows
Python's ``int``/``float`` and reports the first problem with file, line and field.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from kag.errors import InputError
from kag.grading.irt2.io.files import BLOCK_BYTES, iter_line_blocks
from kag.grading.irt2.io.numbers import json_numbers

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_NUMBER_BYTES = b"0123456789.,-+eE \t\r\n"
# simdjson keeps buffers of about 13 bytes per byte of the largest text it has parsed: a
# block above this size (a line of many MiB) goes to orjson, whose memory follows the values.
SIMD_MAX_BYTES = 4 << 20


@dataclass(frozen=True, eq=False)
class RowBlock:
    """Consecutive prediction rows of one file, CSR layout.

    Row ``i`` comes from line ``lines[i]``, asks query ``(entity[i], relation[i])`` and
    scores ``candidates[offsets[i]:offsets[i + 1]]`` with the matching ``scores`` (row order
    kept, at least one pair per row).
    """

    lines: np.ndarray  # int64
    entity: np.ndarray  # int64
    relation: np.ndarray  # int64
    offsets: np.ndarray  # int64, len rows + 1
    candidates: np.ndarray  # int64
    scores: np.ndarray  # float64

    @property
    def rows(self) -> int:
        return len(self.lines)

    def head(self, rows: int) -> RowBlock:
        """The first ``rows`` rows."""
        end = int(self.offsets[rows])
        return RowBlock(
            self.lines[:rows],
            self.entity[:rows],
            self.relation[:rows],
            self.offsets[: rows + 1],
            self.candidates[:end],
            self.scores[:end],
        )


def iter_prediction_blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[RowBlock]:
    """Parse ``path`` (CSV or JSON Lines, optionally gzip) into blocks of rows."""
    parse = None
    for first_line, block in iter_line_blocks(path, "predictions file", block_bytes):
        if parse is None:
            parse = _parse_jsonl if block.lstrip()[:1] == b"{" else _parse_csv
        rows, error = parse(block, first_line, path)
        # The rows before a malformed line are handed out first, so that an error in
        # them (say, an unknown query) is reported before the later malformed line.
        if rows.rows:
            yield rows
        if error is not None:
            raise error


# ------------------------------------------------------------------------------- CSV


def _parse_csv(block: bytes, first_line: int, path: Path) -> tuple[RowBlock, InputError | None]:
    fast = _csv_fast(block, first_line)
    return (fast, None) if fast is not None else _csv_slow(block, first_line, path)


def _csv_fast(block: bytes, first_line: int) -> RowBlock | None:
    """The whole block at C speed, or None when any line needs a closer look."""
    body = block[:-1] if block.endswith(b"\n") else block
    # Brackets are the one thing JSON would take and the reader not: simdjson flattens a
    # nested array. Strings, true, false and null fail as_buffer; other bytes fail JSON.
    if not body or b"[" in body or b"]" in body:
        return None
    buf = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero((buf == 0x2C) | (buf == 0x0A))  # where each field but the last ends
    line_ends = np.flatnonzero(buf[ends] == 0x0A)
    fields = np.diff(np.concatenate(([-1], line_ends, [len(ends)])))
    if (fields & 1).any() or (fields < 4).any():
        return None
    # Every row has an even field count, so across the block the even positions are the
    # ids (entity, candidates) and the odd ones the relation and the scores.
    row_start = np.cumsum(fields) - fields
    text = b"[" + body.replace(b"\n", b",") + b"]"
    if len(text) > SIMD_MAX_BYTES:
        return _csv_fast_wide_ids(body, text, first_line, fields, row_start)
    values = json_numbers(text, "float64")
    if values is None or len(values) != len(ends) + 1:
        return None
    score = np.zeros(len(values), dtype=bool)
    score[1::2] = True
    score[row_start + 1] = False  # the relation
    if not _marks_only_in(score, body, buf, ends):
        return None
    id_values, relation = values[0::2], values[row_start + 1]
    if _exact_in_float(id_values, relation):
        return _row_block(
            first_line, fields, id_values.astype(np.int64), relation.astype(np.int64), values[1::2]
        )
    return _csv_fast_wide_ids(body, text, first_line, fields, row_start)


_EXACT = float(2**53)


def _marks_only_in(score: np.ndarray, body: bytes, buf: np.ndarray, ends: np.ndarray) -> bool:
    """Whether every ``.``, ``e`` and ``E`` of the block lies in a score field (``score[t]``
    for field ``t``, which ends at byte ``ends[t]``): an id spelled ``1.0`` or ``1e3`` is an
    error for ``int()``, though its double is integral."""
    dots = np.flatnonzero(buf == 0x2E)
    fields = np.flatnonzero(score)
    if len(dots) == len(fields):
        # The usual case, every score with one dot: the k-th dot must sit in the k-th score.
        bounds = np.concatenate(([-1], ends, [len(buf)]))  # field t lies between bounds[t], [t + 1]
        if not ((bounds[fields] < dots).all() and (dots < bounds[fields + 1]).all()):
            return False
    elif not score[np.searchsorted(ends, dots)].all():
        return False
    if b"e" not in body and b"E" not in body:
        return True
    exponents = np.flatnonzero((buf | 0x20) == 0x65)
    return bool(score[np.searchsorted(ends, exponents)].all())


def _exact_in_float(*arrays: np.ndarray) -> bool:
    return all(not len(a) or float(np.abs(a).max()) <= _EXACT for a in arrays)


def _csv_fast_wide_ids(
    body: bytes, text: bytes, first_line: int, fields: np.ndarray, row_start: np.ndarray
) -> RowBlock | None:
    """As ``_csv_fast`` through orjson, whose Python ints hold any 64-bit id exactly."""
    if body.translate(None, _NUMBER_BYTES):  # orjson would read true as an id
        return None
    try:
        flat = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    try:
        # array('q') takes Python ints only: a float (an id spelled 1.0 or 1e3) or an id
        # outside the 64-bit range raises, and the line-by-line path says where.
        id_values = np.frombuffer(array("q", flat[0::2]), dtype=np.int64)
        relation = np.frombuffer(array("q", [flat[i + 1] for i in row_start.tolist()]), dtype=np.int64)
    except (TypeError, OverflowError):
        return None
    values = np.fromiter(flat[1::2], dtype=np.float64, count=len(flat) // 2)
    return _row_block(first_line, fields, id_values, relation, values)


def _row_block(
    first_line: int, fields: np.ndarray, id_values: np.ndarray, relation: np.ndarray, odd_values: np.ndarray
) -> RowBlock:
    """A RowBlock from the even-position values (ids) and odd-position values of the block."""
    starts = (np.cumsum(fields) - fields) // 2  # row starts in id_values / odd_values
    keep = np.ones(len(id_values), dtype=bool)
    keep[starts] = False
    pairs = fields // 2 - 1
    return RowBlock(
        lines=first_line + np.arange(len(fields), dtype=np.int64),
        entity=id_values[starts],
        relation=relation,
        offsets=np.concatenate(([0], np.cumsum(pairs))).astype(np.int64),
        candidates=id_values[keep],
        scores=odd_values[keep],
    )


def _csv_slow(block: bytes, first_line: int, path: Path) -> tuple[RowBlock, InputError | None]:
    """Line by line; returns the rows before the first malformed line and its error."""
    return _line_by_line(
        block, first_line, path, lambda raw, where, number: _csv_line(raw, where, number == 1)
    )


_Row = tuple[int, int, list[int], list[float]]


def _line_by_line(
    block: bytes, first_line: int, path: Path, parse: Callable[[bytes, str, int], _Row]
) -> tuple[RowBlock, InputError | None]:
    """The rows of ``block``, one ``parse(line, "path:number", number)`` a line, up to the
    first malformed line, and that line's error (None when every line parsed)."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    builder = _Builder()
    for number, line in enumerate(lines, start=first_line):
        try:
            builder.add(number, *parse(line, f"{path}:{number}", number))
        except InputError as exc:
            return builder.build(), exc
    return builder.build(), None


def _csv_line(raw: bytes, where: str, header: bool) -> tuple[int, int, list[int], list[float]]:
    """One CSV row, following csv.reader + int/float as the reference does (no quoting)."""
    line = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text") from None
    if not text.strip():
        raise InputError(f"{where}: blank line")
    fields = text.split(",")
    count = len(fields)
    if count > 1 and not fields[-1].strip():
        raise InputError(f"{where}: trailing comma")
    if count % 2:
        raise InputError(
            f"{where}: odd number of fields ({count}); a row is ent,rid followed by cand,score pairs"
        )
    if count == 2:
        raise InputError(f"{where}: row without a (candidate, score) pair")
    entity = _csv_id(fields, 0, where, header)
    relation = _csv_id(fields, 1, where, header)
    candidates = [_csv_id(fields, i, where, header) for i in range(2, count, 2)]
    scores = [_csv_score(fields, i, where) for i in range(3, count, 2)]
    return entity, relation, candidates, scores


def _csv_id(fields: list[str], index: int, where: str, header: bool) -> int:
    text = fields[index]
    try:
        value = int(text)
    except ValueError:
        if not text.strip():
            raise InputError(f"{where}: field {index + 1} is empty") from None
        hint = " (prediction files have no header line)" if header else ""
        raise InputError(f"{where}: field {index + 1}: not an integer id: {text.strip()!r}{hint}") from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"{where}: field {index + 1}: id {value} is out of the 64-bit range")
    return value


def _csv_score(fields: list[str], index: int, where: str) -> float:
    text = fields[index]
    try:
        value = float(text)
    except ValueError:
        if not text.strip():
            raise InputError(f"{where}: field {index + 1} is empty") from None
        raise InputError(f"{where}: field {index + 1}: score is not a number: {text.strip()!r}") from None
    if math.isnan(value):
        raise InputError(f"{where}: field {index + 1}: score is NaN")
    return value


# ------------------------------------------------------------------------ JSON Lines


def _parse_jsonl(block: bytes, first_line: int, path: Path) -> tuple[RowBlock, InputError | None]:
    return _line_by_line(block, first_line, path, lambda line, where, _number: _jsonl_line(line, where))


def _jsonl_line(line: bytes, where: str) -> tuple[int, int, list[int], list[float]]:
    """One JSON Lines row: ``{"query": [ent, rid], "predictions": [[cand, score], ...]}``."""
    if not line.strip():
        raise InputError(f"{where}: blank line")
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{where}: invalid JSON: {exc.args[0].split(':')[0]}") from None
    if not isinstance(obj, dict):
        raise InputError(f'{where}: expected an object {{"query": [ent, rid], "predictions": [...]}}')
    for key in ("query", "predictions"):
        if key not in obj:
            raise InputError(f"{where}: missing key {key!r}")
    query = obj["query"]
    if not (isinstance(query, list) and len(query) == 2 and all(type(v) is int for v in query)):
        raise InputError(f"{where}: 'query' must be [ent, rid] with integer ids")
    entity, relation = (_json_id(v, where, "query") for v in query)
    candidates, scores = _json_pairs(obj["predictions"], where)
    return entity, relation, candidates, scores


def _json_id(value: int, where: str, key: str) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"{where}: {key}: id {value} is out of the 64-bit range")
    return value


def _json_pairs(predictions: object, where: str) -> tuple[list[int], list[float]]:
    if not isinstance(predictions, list):
        raise InputError(f"{where}: 'predictions' must be a list of [candidate, score] pairs")
    if not predictions:
        raise InputError(f"{where}: row without a (candidate, score) pair")
    try:
        candidates = [pair[0] for pair in predictions]
        scores = [pair[1] for pair in predictions]
        shapes_ok = set(map(type, predictions)) == {list} and set(map(len, predictions)) == {2}
    except (TypeError, IndexError, KeyError):
        shapes_ok = False
    if shapes_ok and set(map(type, candidates)) <= {int} and set(map(type, scores)) <= {int, float}:
        for value in candidates:
            if not INT64_MIN <= value <= INT64_MAX:
                _json_id(value, where, "predictions")
        return candidates, [float(s) for s in scores]
    for index, pair in enumerate(predictions):
        at = f"{where}: predictions[{index}]"
        if not (isinstance(pair, list) and len(pair) == 2):
            raise InputError(f"{at}: expected a [candidate, score] pair")
        if type(pair[0]) is not int:
            raise InputError(f"{at}: candidate is not an integer id: {orjson.dumps(pair[0]).decode()}")
        if type(pair[1]) not in (int, float):
            raise InputError(f"{at}: score is not a number: {orjson.dumps(pair[1]).decode()}")
    raise AssertionError("unreachable: a malformed pair was not found")  # pragma: no cover


# ---------------------------------------------------------------------------- shared


class _Builder:
    """Collects parsed rows (Python values) and turns them into a RowBlock."""

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.entity: list[int] = []
        self.relation: list[int] = []
        self.sizes: list[int] = []
        self.candidates: list[int] = []
        self.scores: list[float] = []

    def add(self, line: int, entity: int, relation: int, candidates: list[int], scores: list[float]) -> None:
        self.lines.append(line)
        self.entity.append(entity)
        self.relation.append(relation)
        self.sizes.append(len(candidates))
        self.candidates.extend(candidates)
        self.scores.extend(scores)

    def build(self) -> RowBlock:
        return RowBlock(
            lines=np.array(self.lines, dtype=np.int64),
            entity=np.array(self.entity, dtype=np.int64),
            relation=np.array(self.relation, dtype=np.int64),
            offsets=np.concatenate(([0], np.cumsum(self.sizes, dtype=np.int64))).astype(np.int64),
            candidates=np.array(self.candidates, dtype=np.int64),
            scores=np.array(self.scores, dtype=np.float64),
        )
