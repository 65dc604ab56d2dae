"""The one table helper: a :class:`Table` of strings rendered as aligned text, a GitHub
markdown table or an HTML table, so every format of a report shows the same cells; and the
cell formatting shared by the comparison reports.

The stats text table is not built here: its column widths are fixed for compatibility
(docs/architecture.md), in :mod:`kag.render.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from markupsafe import Markup

from kag.grading.percent import pct
from kag.textsafe import escape_controls, escape_markdown

Align = Literal["l", "r"]


# ---------------------------------------------------------------- number formatting


def signed_pp(value: float | None, digits: int = 2) -> str:
    """A difference of fractions in percentage points with its sign (-0.2 -> "-20.00")."""
    return pct(value, digits, signed=True)


def interval_pct(ci: tuple[float, float] | None, digits: int = 1, signed: bool = False) -> str:
    if ci is None:
        return "-"
    return f"[{pct(ci[0], digits, signed=signed)}, {pct(ci[1], digits, signed=signed)}]"


def pvalue(p: float | None) -> str:
    """4 decimals, or 2 significant digits in scientific notation below 0.0001."""
    if p is None:
        return "-"
    if p == 0:
        return "0"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def one_line(text: str, max_chars: int) -> str:
    """Whitespace runs collapsed to one space; cut to ``max_chars`` with an ellipsis (0 = no cut)."""
    flat = " ".join(text.split())
    if max_chars > 0 and len(flat) > max_chars:
        return flat[: max(1, max_chars - 1)] + "…"
    return flat


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class Table:
    """A table of strings; ``sub`` marks indented sub-rows (per-dataset rows of a setup)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: tuple[Align, ...]
    sub: tuple[bool, ...] = ()

    def is_sub(self, index: int) -> bool:
        return bool(self.sub) and self.sub[index]


def table_text(table: Table) -> str:
    """Aligned columns separated by two spaces; text left-aligned, numbers right-aligned.
    Control characters of names and responses are escaped (``\\x1b``), then aligned."""
    rows = [[escape_controls(cell) for cell in row] for row in table.rows]
    widths = [len(h) for h in table.headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, table.align, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(table.headers), *(line(r) for r in rows)])


def _md_cell(text: str) -> str:
    return escape_markdown(escape_controls(text.replace("\n", " ")))


def table_markdown(table: Table, explicit_left: bool = False) -> str:
    """A GitHub-flavoured markdown table (pipes escaped, newlines flattened); with
    ``explicit_left`` the left-aligned columns say so (``:---``, the stats report's rule)."""
    head = "| " + " | ".join(_md_cell(h) for h in table.headers) + " |"
    left = ":---" if explicit_left else "---"
    rule = "|" + "|".join("---:" if a == "r" else left for a in table.align) + "|"
    body = ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join([head, rule, *body])


def table_html(table: Table, css_class: str = "") -> Markup:
    """The table as HTML (``table.html.j2``): every header and cell escaped by the template."""
    from kag.render.templating import render_template

    return render_template("table.html.j2", table=table, css_class=css_class)
