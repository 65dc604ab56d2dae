"""The columns of the `kag stats` tables, drawn for every format from the measures'
declarations (:class:`kag.grading.measures.declarations.Column`).

:data:`STATS_COLUMNS` is the stats table: every registered measure's columns of that
table, in the compatible order of :mod:`kag.grading.measures.layout` (a column it does not
name after, in registration order). Each column names the measure that declares it, its
header, how a block becomes a cell, the formats that show it and when a run shows it at all
(:class:`Shown`: the extracted grade, retrieval, token usage, prices). The text table, the
markdown table and the HTML ranking each take, in that order, the columns of their format
whose condition holds (:func:`columns_for`); the row labels (setup, ``└ dataset``, rank)
are the renderer's own. :data:`OPEN_COLUMNS` is the open-answer table of the text and
markdown reports, :data:`EPOCH_COLUMNS` the epochs tables of the text report, gathered
the same way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from kag.grading.measures import registered
from kag.grading.measures.declarations import Block, Column, Fmt, Shown, Table
from kag.grading.measures.layout import EPOCH_HEADERS, STATS_HEADERS, in_layout

if TYPE_CHECKING:
    from kag.grading.epochs import EpochSummary

__all__ = [
    "EPOCH_COLUMNS",
    "OPEN_COLUMNS",
    "STATS_COLUMNS",
    "Block",
    "Column",
    "Fmt",
    "Shown",
    "cells_for",
    "columns_for",
    "epoch_columns",
    "headers_for",
    "table_columns",
]

B = TypeVar("B")


def table_columns(table: Table, layout: tuple[str, ...] = ()) -> tuple[Column[Block], ...]:
    """The registered measures' columns of ``table``, in ``layout`` order (by header), the
    columns it does not name after, in registration order."""
    declared = [c for m in registered() for c in m.columns if c.table == table]
    return in_layout(declared, lambda c: c.header, layout)


#: The stats table, in its order (text: ``width`` characters, right-aligned).
STATS_COLUMNS: tuple[Column[Block], ...] = table_columns("stats", STATS_HEADERS)

#: The open-answer table (a block without open-question files has no row there).
OPEN_COLUMNS: tuple[Column[Block], ...] = table_columns("open")


def _reduced(key: str, column: Column[Any]) -> Column[EpochSummary]:
    """A reducer's column over the epoch blocks: its cell of the block's value under ``key``."""

    def cell(e: EpochSummary) -> str | None:
        return column.cell(e.reduced[key])

    return replace(column, cell=cell, cells={})


def epoch_columns() -> tuple[Column[EpochSummary], ...]:
    """The epochs table: the measures' columns of that table (over epoch blocks) and their
    reducers' (over the reduced values), in :data:`~kag.grading.measures.layout.EPOCH_HEADERS`
    order, the columns it does not name after, in registration order."""
    declared: list[Column[EpochSummary]] = []
    for m in registered():
        declared += [c for c in m.columns if c.table == "epochs"]
        declared += [_reduced(r.key, c) for r in m.reducers for c in r.columns]
    return in_layout(declared, lambda c: c.header, EPOCH_HEADERS)


#: The epochs tables of the text report, one row per epoch block (a setup's, or one of its
#: datasets'). A column without a width (PASS@k%) is left-aligned, as wide as its widest cell.
EPOCH_COLUMNS: tuple[Column[EpochSummary], ...] = epoch_columns()


def columns_for(table: tuple[Column[B], ...], fmt: Fmt, shown: Shown) -> tuple[Column[B], ...]:
    """The columns of ``table`` that ``fmt`` draws for a run that has ``shown``, in the
    declared order."""
    return tuple(c for c in table if fmt in c.formats and c.when(shown))


def headers_for(fmt: Fmt, columns: tuple[Column[B], ...]) -> tuple[str, ...]:
    return tuple(c.header_in(fmt) for c in columns)


def cells_for(fmt: Fmt, columns: tuple[Column[B], ...], block: B) -> tuple[str | None, ...]:
    """The cells of ``block`` (None where it has no value)."""
    return tuple(c.cell_in(fmt)(block) for c in columns)
