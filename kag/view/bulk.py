"""Rows written to the index's SQLite tables many at a time, stored as when written one by
one. Each statement writes as many rows as its values allow; the values the sqlite3 module
binds slowly (None and bytes, through its adapters) or again and again (a value all the
rows share) are bound so that they cost little."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from functools import cache
from itertools import chain
from typing import cast

from kag.view.record_rows import ANSWER, ERROR, EVIDENCE, EXTRACTED, JUDGED, NAMES, REASON, VERTICES, VOTE

# Rows are written many to a statement (VALUES (...), (...), ...): the sqlite3 module's
# cost per statement run (a third of a small file's row) is paid once per batch. SQLite
# inserts them in their order, each replacing a row of its key as a statement of its own
# would. At most 999 values a statement (the least limit of any SQLite build).
_VALUES_PER_STATEMENT = 999
# The columns many rows hold nothing in (None): those --extract, an error, a judge, gold
# evidence or a long response fill, the response's head (none in an error file's row) and
# the vertex count (none without a retrieval). A column that none of the rows written
# together holds is left out of their statement (it is then NULL); in one that some of them
# hold, the others' None is bound as a NaN, which SQLite stores as NULL. The sqlite3 module
# binds None the slow way, through its adapters (making and dropping an AttributeError each
# time: a quarter of a first build's writing, on small files), a float at once.
_NULLABLE = (EXTRACTED, ANSWER, ERROR, REASON, VERTICES, EVIDENCE, VOTE, JUDGED)
# The columns that hold bytes (a row's detail, a folder's signature).
_BLOBS = frozenset({"detail", "sig"})
# The columns whose value is often the same in all the rows written together (a part of
# a scan is of one tree, and mostly of one dataset, kind and epoch).
_SHARED = frozenset({"tree", "dataset", "kind", "epoch"})


@cache
def insert_statement(table: str, columns: tuple[str, ...], rows: int, shared: tuple[int, ...] = ()) -> str:
    """``INSERT OR REPLACE`` of ``rows`` rows of ``columns`` into ``table``, in one statement:
    the columns at the positions ``shared`` take one value in every row, its first
    parameters; then each row's other values, one row after the other."""
    if not shared:
        values = f"({', '.join('?' * len(columns))})"
        return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES {', '.join([values] * rows)}"
    tuples = []
    at = len(shared)
    for _ in range(rows):
        params = []
        for column in range(len(columns)):
            if column in shared:
                params.append(f"?{shared.index(column) + 1}")
            else:
                at += 1
                params.append(f"?{at}")
        tuples.append(f"({', '.join(params)})")
    return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES {', '.join(tuples)}"


def insert_rows(db: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    """Insert (or replace) ``rows``, in their order (a path given twice, names alike once
    their bytes that are not UTF-8 are escaped, keeps its last row), without the nullable
    columns that none of them holds."""
    width, count = len(NAMES), len(rows)
    flat = list(chain.from_iterable(rows))  # every row's values, one row after the other
    if len(flat) != width * count:
        raise ValueError(f"an index row holds {width} values")
    empty = []
    as_null = _nan_binds_null()
    for column in _NULLABLE:
        values = flat[column::width]  # the column's values
        nones = values.count(None)
        if nones == count:
            empty.append(column)
        elif nones and as_null:
            flat[column::width] = [math.nan if value is None else value for value in values]
    names = tuple(name for column, name in enumerate(NAMES) if column not in empty)
    _insert_values(db, "files", names, _without(flat, width, empty))


@cache
def _nan_binds_null() -> bool:
    """Whether the SQLite library stores a NaN bound as NULL (as it has always done: it
    holds no NaN); else None is bound."""
    db = sqlite3.connect(":memory:")
    try:
        return bool(db.execute("SELECT typeof(?) = 'null'", (math.nan,)).fetchone()[0])
    finally:
        db.close()


def _without(flat: list[object], width: int, columns: Sequence[int]) -> list[object]:
    """``flat``, the values of rows of ``width`` columns one after the other, with the
    values of ``columns`` taken out (in place)."""
    for column in sorted(columns, reverse=True):  # a column taken out leaves those before it in place
        del flat[column::width]
        width -= 1
    return flat


def insert_many(
    db: sqlite3.Connection, table: str, columns: tuple[str, ...], rows: Sequence[Sequence[object]]
) -> None:
    """Insert (or replace) ``rows`` into ``table``, in their order: each row the values of
    ``columns``."""
    _insert_values(db, table, columns, list(chain.from_iterable(rows)))


def _insert_values(db: sqlite3.Connection, table: str, columns: tuple[str, ...], flat: list[object]) -> None:
    """Insert (or replace) the rows whose values of ``columns`` are ``flat``, one row's
    after the other, in their order, as many to a statement as its values allow. A value
    that every row holds in one of the :data:`_SHARED` columns (the tree; mostly the
    dataset, the kind and the epoch) is bound once per statement, not once per row. The
    statements of fewer rows that write the last ones are of a power of two rows each: a
    few statements, each prepared once (not a statement per row)."""
    width = len(columns)
    count = len(flat) // width
    for at, name in enumerate(columns):
        if name in _BLOBS:
            flat[at::width] = _as_bytearrays(flat[at::width])
    shared: tuple[int, ...] = ()
    if count > 1:
        shared = tuple(
            at
            for at, name in enumerate(columns)
            if name in _SHARED and flat[at::width].count(flat[at]) == count
        )
    held = [flat[at] for at in shared]
    _without(flat, width, shared)
    width -= len(shared)
    batch = max(1, (_VALUES_PER_STATEMENT - len(shared)) // width)
    step = batch * width
    whole = len(flat) - len(flat) % step
    if whole:
        db.executemany(
            insert_statement(table, columns, batch, shared),
            [held + flat[at : at + step] for at in range(0, whole, step)],
        )
    at, left = whole, (len(flat) - whole) // width
    size = 1 << left.bit_length()
    while left:
        size >>= 1
        if left & size:
            db.execute(insert_statement(table, columns, size, shared), held + flat[at : at + size * width])
            at += size * width
            left -= size


def _as_bytearrays(values: list[object]) -> list[object]:
    """``values`` with each bytes object as a bytearray of the same bytes: stored alike (a
    BLOB), but bound by the sqlite3 module as it is, where a bytes object is first looked
    up among its adapters (which triples the cost of binding it)."""
    if set(map(type, values)) == {bytes}:
        return list(map(bytearray, cast("list[bytes]", values)))
    return [bytearray(v) if type(v) is bytes else v for v in values]
