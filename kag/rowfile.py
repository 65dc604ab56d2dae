"""The one reader of the rows of a CSV or JSON Lines file a user names (human labels,
questions to import): each row a dict with its line number.

A CSV file opens with a header naming its columns; a JSON Lines file holds one object a
line, blank lines passed over. Every defect is an InputError naming the file and the line
(``PATH:LINE: ...``); how a reader's own failure is worded is the caller's (``invalid``,
``not_object``), so each command keeps its messages. The caller reads the file (with
:mod:`kag.textfile`) and checks the keys of each row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from kag.errors import InputError


def iter_csv_rows(path: Path, text: str, *, invalid: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) for each row of the CSV ``text`` of ``path`` after its header, keyed by
    the header's names (a short row has None for the missing columns; ``line`` is where the
    row ends). Nothing for an empty text. InputError for a header naming a column twice, a
    row with more fields than the header names, and what the CSV reader refuses, worded
    ``invalid.format(reason)`` and named at the line where the reader stopped."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        names = reader.fieldnames
        if names is None:
            return
        if len(set(names)) != len(names):
            raise InputError(f"{path}:1: the header names a column twice")
        for row in reader:
            if None in row:
                raise InputError(f"{path}:{reader.line_num}: more fields than the header names")
            yield reader.line_num, dict(row)
    except csv.Error as exc:
        # The one csv.Error a well-formed file meets: a field over csv.field_size_limit()
        # (131,072 characters). The DictReader's line_num is still the last row's; the
        # reader's own is where the field ends.
        raise InputError(f"{path}:{reader.reader.line_num}: {invalid.format(exc)}") from None


def iter_jsonl_rows(
    path: Path, data: str | bytes, *, invalid: str, not_object: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) for each non-blank line of the JSON Lines ``data`` of ``path`` (lines
    counted from 1 at each ``\\n``). InputError for a line that is not JSON, worded
    ``invalid.format(reason)``, and for one that is no object, worded ``not_object``."""
    lines: Sequence[str | bytes] = data.split(b"\n") if isinstance(data, bytes) else data.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: {invalid.format(exc)}") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{number}: {not_object}")
        yield number, row
