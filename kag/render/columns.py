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

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from kag.grading.measures import registered
from kag.grading.measures.declarations import Block, Column, Fmt, Shown, Table
from kag.grading.measures.layout import STATS_HEADERS, in_layout
from kag.grading.percent import pct

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
    "headers_for",
    "shown_ks",
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


def shown_ks(n: int) -> list[int]:
    """The k whose pass@k the text shows: the powers of two below ``n``, and ``n``."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n]


_TEXT: frozenset[Fmt] = frozenset(("text",))


def _epochs(header: str, cell: Callable[[EpochSummary], str | None], width: int = 0) -> Column[EpochSummary]:
    return Column(header, cell, _TEXT, width, table="epochs", measure="epochs")


#: The epochs tables of the text report, one row per epoch block (a setup's, or one of its
#: datasets'); PASS@k% is last, left-aligned (its width varies with the number of epochs).
EPOCH_COLUMNS: tuple[Column[EpochSummary], ...] = (
    _epochs("EPOCHS", lambda e: str(e.n), 6),
    _epochs("Q", lambda e: str(e.questions), 4),
    _epochs("INC", lambda e: str(e.incomplete), 4),
    _epochs("MEAN%", lambda e: pct(e.mean_accuracy), 7),
    _epochs("SE%", lambda e: pct(e.stderr), 6),
    _epochs("MAJ%", lambda e: pct(e.maj_at_k), 7),
    _epochs("CONS%", lambda e: pct(e.consistent), 7),
    _epochs("PASS@k%", lambda e: " ".join(f"{k}:{pct(e.pass_at[k])}" for k in shown_ks(e.n))),
)


def columns_for(table: tuple[Column[B], ...], fmt: Fmt, shown: Shown) -> tuple[Column[B], ...]:
    """The columns of ``table`` that ``fmt`` draws for a run that has ``shown``, in the
    declared order."""
    return tuple(c for c in table if fmt in c.formats and c.when(shown))


def headers_for(fmt: Fmt, columns: tuple[Column[B], ...]) -> tuple[str, ...]:
    return tuple(c.header_in(fmt) for c in columns)


def cells_for(fmt: Fmt, columns: tuple[Column[B], ...], block: B) -> tuple[str | None, ...]:
    """The cells of ``block`` (None where it has no value)."""
    return tuple(c.cell_in(fmt)(block) for c in columns)
