"""Reading gold, prediction and relation files, and parsing raw model output.

Files are a JSON array of entry objects, or JSON Lines (one object per non-blank line);
the first non-blank character decides (``[`` → array). Every error names the file and the
line (JSON Lines) or the entry number (array, counted from 1).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import orjson

from kag.errors import InputError
from kag.grading.triplets.model import GoldEntry, Prediction
from kag.grading.triplets.normalize import normalize_prompt
from kag.grading.triplets.scan import MAX_DEPTH, TooDeep, next_bracket, scan_container, too_deep
from kag.grading.triplets.validate import validate_items
from kag.textfile import read_text_file

log = logging.getLogger(__name__)

_THINK_NAMED = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_END = {name: re.compile(rf"</{name}>", re.IGNORECASE) for name in ("think", "thinking", "reasoning")}
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*")
_DECODER = json.JSONDecoder()
_DECODE_FIRST = 1  # brackets per text tried by the C decoder before the linear scan


class DuplicateId(InputError):
    """Two entries of one file share an id."""


def _loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # orjson rejects NaN/Infinity and integers past 64 bits; Python's json does not, and
        # such a weight is then rejected by validation rather than failing the whole file.
        try:
            return json.loads(data)
        except RecursionError:  # orjson stops at 1,024 levels, Python's json before that
            raise ValueError("nested too deeply") from None


class UnreadableLine(str):
    """In place of a JSON Lines entry that is not valid JSON (``lenient`` reading): the message."""


def read_records(path: Path, what: str, lenient: bool = False) -> list[tuple[str, Any]]:
    """The entries of a JSON array or JSON Lines file (``what`` it is, for messages), each
    with a ``where`` for messages.

    A JSON Lines line that is not valid JSON raises `InputError`, unless ``lenient``: then
    its entry is an `UnreadableLine` holding the message.
    """
    text = read_text_file(path, what, bom=True)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = _loads(stripped)
        except (json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"{path}: not a valid JSON array ({exc})") from None
        return [(f"{path} entry {number}", value) for number, value in enumerate(data, start=1)]
    records: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((f"{path}:{number}", _loads(line)))
        except (json.JSONDecodeError, ValueError) as exc:
            message = f"{path}:{number}: not valid JSON ({exc})"
            if not lenient:
                raise InputError(message) from None
            records.append((f"{path}:{number}", UnreadableLine(message)))
    return records


def _entry_id(where: str, record: Any) -> str:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected an object with an 'id', got {type(record).__name__}")
    if "id" not in record:
        raise InputError(f"{where}: the entry has no 'id'")
    value = record["id"]
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"{where}: 'id' must be a string or an integer, got {type(value).__name__}")
    return str(value)


def _within(path: Path, where: str) -> str:
    """``FILE:3: …`` as ``line 3: …`` and ``FILE entry 3: …`` as ``entry 3: …``, for a
    message that already names FILE."""
    if where.startswith(f"{path}:"):
        return "line " + where.removeprefix(f"{path}:")
    return where.removeprefix(f"{path} ")


def _check_unique(path: Path, seen: dict[str, str], entry_id: str, where: str) -> None:
    first = seen.get(entry_id)
    if first is not None:
        raise DuplicateId(f"{where}: duplicate id {entry_id!r} (first at {_within(path, first)})")
    seen[entry_id] = where


def load_gold(path: Path) -> list[GoldEntry]:
    """Gold entries: ``{"id", "prompt"?, "triplets": [TRIPLET, ...]}``; every triplet must be valid."""
    entries: list[GoldEntry] = []
    seen: dict[str, str] = {}
    for where, record in read_records(path, "gold file"):
        entry_id = _entry_id(where, record)
        _check_unique(path, seen, entry_id, where)
        triplets = record.get("triplets")
        if not isinstance(triplets, list):
            kind = "missing" if triplets is None else f"a {type(triplets).__name__}, not a list"
            raise InputError(f"{where}: 'triplets' is {kind}")
        prompt = record.get("prompt", "")
        if prompt is None:
            prompt = ""
        if not isinstance(prompt, str):
            raise InputError(f"{where}: 'prompt' is not a string")
        valid, invalid = validate_items(tuple(triplets))
        if invalid:
            index, problem = invalid[0]
            raise InputError(f"{where}: gold triplet {index}: {problem}")
        checked = tuple(triplet for _, triplet in valid)
        entries.append(GoldEntry.build(entry_id, where, normalize_prompt(prompt), checked))
    if not entries:
        raise InputError(f"{path}: no gold entries")
    return entries


def _drop_reasoning(text: str) -> str:
    """Each ``<name>…</name>`` block (nearest closing tag of the same name) replaced by a space.

    What ``re.sub(r"<(think|thinking|reasoning)>.*?</\\1>", " ", text, flags=I|S)`` gives, in
    linear time: that pattern re-reads the rest of the text for every opening tag that is
    never closed. Once a name has no closing tag past some opening one, later openings of
    that name cannot close either and are passed over.
    """
    pieces: list[str] = []
    kept = position = 0
    unclosed: set[str] = set()
    while True:
        opened = _THINK_NAMED.search(text, position)
        if opened is None:
            break
        name = opened.group(1).lower()
        closed = None if name in unclosed else _THINK_END[name].search(text, opened.end())
        if closed is None:
            unclosed.add(name)
            position = opened.start() + 1
            continue
        pieces += (text[kept : opened.start()], " ")
        kept = position = closed.end()
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def parse_model_output(text: str) -> list[Any] | None:
    """The triplet list in raw model text, or ``None`` when there is none.

    Reasoning blocks (``<think>…</think>``, also ``thinking``/``reasoning``) go first; an
    unclosed one runs to the end of the text, and a closing tag without an opening one
    (chat templates that put ``<think>`` in the prompt) drops everything before it. Code
    fence markers go next. Then the first JSON value starting at a ``[`` or ``{`` that is
    an array, or an object with a ``triplets`` array, is taken; other objects are skipped
    whole. Brackets nested more than `scan.MAX_DEPTH` deep end the search: when no usable
    value came before them the text is unparseable. Time is linear in the text's length.
    """
    text = _drop_reasoning(text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened is not None:
        text = text[: opened.start()]
    text = _FENCE.sub(" ", text)
    known: dict[int, int] = {}
    decode_first = _DECODE_FIRST
    position = 0
    while True:
        found = next_bracket(text, position)
        if found is None:
            return None
        start, end = found
        end = known.get(start, end)
        value: Any = None
        if end is None and decode_first:
            # The usual output is one valid array: the C decoder takes it 5x faster than the
            # scan. A failure may cost it the rest of the text, so only the first bracket is tried.
            decode_first -= 1
            try:
                value, end = _DECODER.raw_decode(text, start)
            except (ValueError, RecursionError):
                pass
            else:
                # Fewer brackets than levels allowed cannot nest too deep (the usual case).
                brackets = text.count("[", start, end) + text.count("{", start, end)
                if brackets > MAX_DEPTH and too_deep(value):
                    return None
        if end is None:
            try:
                end = scan_container(text, start, known)
            except TooDeep:
                return None
        if end < 0:
            position = start + 1
            continue
        if value is None:
            try:
                value, end = _DECODER.raw_decode(text, start)
            except (ValueError, RecursionError):  # not expected: the scan checked the same grammar
                position = start + 1
                continue
        if isinstance(value, list):
            return value
        triplets = value.get("triplets")
        if isinstance(triplets, list):
            return triplets
        position = end


def _prediction(entry_id: str, record: dict[str, Any]) -> Prediction:
    if "triplets" in record:
        items = record["triplets"]
    elif "output" in record:
        output = record["output"]
        if not isinstance(output, str):
            items = output.get("triplets") if isinstance(output, dict) else output
        else:
            parsed = parse_model_output(output)
            if parsed is None:
                return Prediction(entry_id, "unparseable", ())
            items = parsed
    else:
        items = None
    if not isinstance(items, list):
        return Prediction(entry_id, "malformed", ())
    return Prediction(entry_id, "ok", tuple(items))


def load_predictions(path: Path) -> dict[str, Prediction]:
    """Prediction entries by id: ``{"id", "triplets": [...]}`` or ``{"id", "output": "text"}``.

    An entry with neither key, or whose triplets are not a list, is *malformed*; an
    ``output`` that is already a list or a ``{"triplets": [...]}`` object is taken as is.
    Lines that cannot be joined to gold (not valid JSON, not an object, no usable ``id``:
    a run cut short, a stray log line) are left out with one warning for the file, and the
    gold entries they were meant for count as missing; when no line at all could be read,
    the file is not predictions (another file given by mistake, a log): `InputError`. A
    file without any entry (empty) gives no prediction and no error. Duplicate ids raise
    `DuplicateId`.
    """
    skipped: list[str] = []
    predictions: dict[str, Prediction] = {}
    seen: dict[str, str] = {}
    for where, record in read_records(path, "predictions file", lenient=True):
        if isinstance(record, UnreadableLine):
            skipped.append(str(record))
            continue
        try:
            entry_id = _entry_id(where, record)
        except InputError as exc:
            skipped.append(str(exc))
            continue
        _check_unique(path, seen, entry_id, where)
        predictions[entry_id] = _prediction(entry_id, record)
    if skipped:
        shown = "; ".join(_within(path, message) for message in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        if not predictions:
            raise InputError(
                f"{path}: no line could be read as predictions ({len(skipped)} "
                f"entr{'y' if len(skipped) == 1 else 'ies'} skipped: {shown}{more})"
            )
        log.warning(
            "%s: %d entr%s skipped (%s%s)",
            path,
            len(skipped),
            "y" if len(skipped) == 1 else "ies",
            shown,
            more,
        )
    return predictions


def load_relations(path: Path) -> tuple[str, ...]:
    """A relation set: a JSON list of non-empty strings (at least one)."""
    text = read_text_file(path, "relations file", bom=True)
    try:
        data = _loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: --relations expects a JSON list of relation names ({exc})") from None
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: --relations expects a non-empty JSON list of relation names")
    for index, value in enumerate(data):
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{path}: relation {index} is not a non-empty string: {value!r}")
    return tuple(data)
