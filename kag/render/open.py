"""The open-answer parts of the `kag stats` report: the second text table and the markdown
table (their columns: :data:`kag.render.columns.OPEN_COLUMNS`, declared by the ``open``
measure, which also fills the per-block JSON ``open``).

Only reached when the datasets file has open questions (or ``--extract`` was given), so
that every other report keeps its compatible shape byte for byte (docs/architecture.md).
"""

from __future__ import annotations

from kag.grading.mcq.summary import Summary
from kag.render.columns import OPEN_COLUMNS, Block, Fmt, Shown, cells_for, columns_for, headers_for
from kag.render.table import Align, Table, table_markdown
from kag.textsafe import escape_controls

OPEN_LEGEND = (
    "EM% = mean exact match, F1% = mean token F1 (best over the accepted answers, "
    "after lower-casing and removing punctuation and articles); error files score 0"
)


def _rows(summary: Summary, fmt: Fmt, setup_label: str, dataset_label: str) -> list[tuple[str, list[str]]]:
    """(label, cells) per setup with open files, then per dataset with open files; labels
    are formatted with ``name`` (for example ``"**{name}**"`` and ``"└ {name}"``)."""
    columns = columns_for(OPEN_COLUMNS, fmt, Shown())
    rows: list[tuple[str, list[str]]] = []
    for s in summary.setups:
        if s.overall.open_answers is None:
            continue
        blocks = [(setup_label.format(name=s.setup), Block(s.setup, None, s.overall))]
        blocks += [(dataset_label.format(name=d), Block(s.setup, d, m)) for d, m in s.per_dataset.items()]
        for label, block in blocks:
            cells = cells_for(fmt, columns, block)
            if all(c is not None for c in cells):
                rows.append((label, [c or "" for c in cells]))
    return rows


def has_open_results(summary: Summary) -> bool:
    """Whether any setup graded an open-question file."""
    return any(s.overall.open_total for s in summary.setups)


def render_open_text(summary: Summary) -> str:
    """The second text table (setups in report order, ``  └ <dataset>`` rows), or "" when no
    open-question file was graded."""
    rows = _rows(summary, "text", "{name}", "  └ {name}")
    if not rows:
        return ""
    columns = columns_for(OPEN_COLUMNS, "text", Shown())
    widths = [c.width for c in columns]
    labels = [escape_controls(label) for label, _ in rows]
    width = max(5, *(len(label) for label in labels))
    lines = [
        f"Open questions: {summary.scorable_open_questions or 0}",
        "",
        f"{'SETUP':<{width}}"
        + "".join(f"  {h:>{w}}" for h, w in zip(headers_for("text", columns), widths, strict=True)),
    ]
    for label, (_, cells) in zip(labels, rows, strict=True):
        lines.append(f"{label:<{width}}" + "".join(f"  {c:>{w}}" for c, w in zip(cells, widths, strict=True)))
    lines += ["", OPEN_LEGEND]
    return "\n".join(lines) + "\n"


def render_open_markdown(summary: Summary) -> str:
    """The open-answer table in markdown, or "" when no open-question file was graded."""
    rows = _rows(summary, "markdown", "**{name}**", "└ {name}")
    if not rows:
        return ""
    headers = headers_for("markdown", columns_for(OPEN_COLUMNS, "markdown", Shown()))
    body = tuple((label, *cells) for label, cells in rows)
    right: Align = "r"
    table = Table(("Setup", *headers), body, ("l", *((right,) * len(headers))))
    return (
        f"**Open questions:** {summary.scorable_open_questions or 0}\n\n"
        + table_markdown(table, explicit_left=True)
        + f"\n\n{OPEN_LEGEND}.\n"
    )
