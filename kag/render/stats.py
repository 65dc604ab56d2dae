"""Render a stats :class:`~kag.grading.mcq.Summary` as text, markdown or JSON.

One renderer per output format, chosen through :class:`~kag.render.formats.TableFormat`
(``RENDERERS`` maps every member; a test checks the mapping is exhaustive). Every renderer returns the complete
document as a string ending in a newline and never emits terminal escape codes.

The text and markdown tables draw their columns from :data:`kag.render.columns.STATS_COLUMNS`
(as does the HTML ranking), and a JSON block is the registered measures' keys
(:func:`block_keys`), each with its measure's condition: a column or a key is declared once,
by its measure (:mod:`kag.grading.measures`), in the order of :mod:`kag.grading.measures.layout`.

- text: the compatible table (docs/architecture.md), column for column:
  header line, one row per setup, ``  └ <dataset>`` sub-rows, legend lines. The RAG
  columns appear only when some setup retrieved, blank for rows without retrieval.
- markdown: a GitHub table for CI step summaries (same numbers, plus the 95% interval).
- json: the compatible document field for field (pretty-printed, 2 spaces) plus the
  additive fields ``unreadable_files``, ``ignored_files`` and, per block,
  ``accuracy_ci95``, ``abstentions``, ``non_option_answers``, and ``usage`` when a file of
  the run has token usage or prices were given; ``epochs`` in every block of a setup with
  later epochs in the tree, ``evidence`` in every block when the datasets file lists
  evidence names (absent otherwise, so that such trees give the same document).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from kag.grading.mcq.metrics import Metrics
from kag.grading.mcq.summary import SetupSummary, SmallSample, Summary
from kag.grading.measures import registered
from kag.grading.measures.declarations import JsonKey
from kag.grading.measures.layout import BLOCK_KEYS, in_layout
from kag.grading.percent import pct
from kag.grading.usage import Costs
from kag.render.columns import STATS_COLUMNS, Block, Shown, cells_for, columns_for, headers_for
from kag.render.epochs import render_epochs_text
from kag.render.formats import TableFormat
from kag.render.open import render_open_markdown, render_open_text
from kag.render.table import Align, Table, table_markdown
from kag.render.usage import usage_legend
from kag.textsafe import escape_controls

LEGEND = (
    "ACC% = correct / scored, PREC% = correct / committed, COVER% = committed / scored\n"
    "GEN(s)/RET(s) = mean generation/retrieval time per question, in seconds\n"
    "CTX_LEN = average context length"
)
EMPTY = "No scorable results were found."
XACC_LEGEND = "XACC% = correct after answer extraction ({spec}) / scored"


# ---------------------------------------------------------------- text


def _cols(cells: Sequence[str | None], widths: Sequence[int]) -> str:
    """The cells right-aligned in their widths; a cell without a value ends the line."""
    out = []
    for cell, width in zip(cells, widths, strict=True):
        if cell is None:
            break
        out.append(f"  {cell:>{width}}")
    return "".join(out)


def _blocks(s: SetupSummary, costs: Costs | None) -> list[tuple[str | None, Block]]:
    """(dataset, block) of a setup's row (dataset None) and of its graded datasets' rows."""
    rows = [(None, s.overall)] + [(name, m) for name, m in s.per_dataset.items() if m.total]
    return [
        (name, Block(s.setup, name, m, costs.of(s.setup, name) if costs is not None else None))
        for name, m in rows
    ]


def render_text(summary: Summary) -> str:
    """The aligned table (names padded to the longest setup name, min 5).
    Control characters in names are escaped (``\\x1b``) and padded as escaped."""
    lines = [
        (
            f"Datasets: {summary.datasets} | Scorable questions: {summary.scorable_questions} "
            f"| Skipped files: {summary.skipped_files}"
        )
        # Appended only when non-zero: a tree without such files gives the compatible header.
        + (f" | Ignored files: {summary.ignored_files}" if summary.ignored_files else "")
        + (f" | Unreadable files: {summary.unreadable_files}" if summary.unreadable_files else ""),
        "",
    ]
    # A block with no MCQ file (only open questions graded) has no row here: see kag.render.open.
    setups = [s for s in summary.setups if s.overall.total]
    if not setups:
        lines.append(EMPTY)
        return "\n".join(lines) + "\n" + _open_text(summary)
    width = max(5, *(len(escape_controls(s.setup)) for s in setups))
    sub_width = max(0, width - 4)
    xacc = summary.extract is not None
    columns = columns_for(STATS_COLUMNS, "text", Shown.of(summary))
    widths = [c.width for c in columns]
    lines.append(f"{'SETUP':<{width}}" + _cols(headers_for("text", columns), widths))
    for s in setups:
        for name, block in _blocks(s, None):
            label = (
                f"{escape_controls(s.setup):<{width}}"
                if name is None
                else f"  └ {escape_controls(name):<{sub_width}}"
            )
            lines.append(label + _cols(cells_for("text", columns, block), widths))
    lines.append("")
    lines.append(LEGEND)
    if xacc:
        lines.append(XACC_LEGEND.format(spec=summary.extract))
    return "\n".join(lines) + "\n" + _epochs_text(summary) + _open_text(summary)


def _epochs_text(summary: Summary) -> str:
    text = render_epochs_text(summary)
    return "\n" + text if text else ""


def _open_text(summary: Summary) -> str:
    text = render_open_text(summary)
    return "\n" + text if text else ""


def small_samples_note(smalls: Sequence[SmallSample], minimum: int) -> str:
    """One warning naming every setup graded on few files, with its accuracy's 95% interval."""
    items = []
    for small in smalls:
        ci = "" if small.ci95 is None else f" (ACC 95% CI {pct(small.ci95[0], 1)}–{pct(small.ci95[1], 1)}%)"
        items.append(f"{escape_controls(small.setup)} {small.total}{ci}")
    largest = smalls[0].largest if smalls else 0
    half = any(2 * small.total < largest for small in smalls)
    also = f" (or under half of the largest setup's {largest})" if half else ""
    return (
        f"few graded files: {'; '.join(items)}; an accuracy from under {minimum} files{also} "
        "is too uncertain to rank on"
    )


# ---------------------------------------------------------------- markdown


def render_markdown(summary: Summary) -> str:
    """A GitHub-flavoured table: one row per setup, ``└ dataset`` rows, RAG columns when any."""
    lines = [
        (
            f"**Datasets:** {summary.datasets} · **Scorable questions:** {summary.scorable_questions} "
            f"· **Skipped files:** {summary.skipped_files} · **Unreadable files:** {summary.unreadable_files} "
            f"· **Ignored files:** {summary.ignored_files}"
        ),
        "",
    ]
    setups = [s for s in summary.setups if s.overall.total]
    if not setups:
        lines.append(f"_{EMPTY}_")
        return "\n".join(lines) + "\n" + _open_markdown(summary)
    xacc = summary.extract is not None
    usage, costs = summary.shows_usage, summary.costs
    columns = columns_for(STATS_COLUMNS, "markdown", Shown.of(summary))
    headers = ("Setup", *headers_for("markdown", columns))
    body: list[tuple[str, ...]] = []
    for s in setups:
        for name, block in _blocks(s, costs):
            label = f"**{s.setup}**" if name is None else f"└ {name}"
            cells = cells_for("markdown", columns, block)
            body.append((label, *("" if c is None else c for c in cells)))
    right: Align = "r"
    align: tuple[Align, ...] = ("l", *((right,) * (len(headers) - 1)))
    lines.append(table_markdown(Table(headers, tuple(body), align), explicit_left=True))
    lines.append("")
    lines.append(
        "ACC% = correct / scored (95% CI: Wilson score interval), PREC% = correct / committed, "
        "COVER% = committed / scored; GEN(s)/RET(s) = mean generation/retrieval time per question, "
        "in seconds; CTX_LEN = average prompt length, in bytes."
        + (f" {XACC_LEGEND.format(spec=summary.extract)}." if xacc else "")
    )
    if usage:
        lines.append("")
        lines.append(usage_legend(costs is not None) + ".")
    return "\n".join(lines) + "\n" + _open_markdown(summary)


def _open_markdown(summary: Summary) -> str:
    text = render_open_markdown(summary)
    return "\n" + text if text else ""


# ---------------------------------------------------------------- JSON


def block_keys() -> tuple[JsonKey, ...]:
    """The registered measures' keys of a block, in the compatible order."""
    return in_layout((k for m in registered() for k in m.json), lambda k: k.key, BLOCK_KEYS)


def block_to_json(block: Block, keys: Sequence[JsonKey] | None = None) -> dict[str, Any]:
    """One block of the document: each measure's keys that the block has (a block outside a
    report, ``block.report`` None, has only those every block has)."""
    return {
        k.key: k.value(block)
        for k in (block_keys() if keys is None else keys)
        if k.when is None or (block.report is not None and k.when(block))
    }


def metrics_to_json(m: Metrics) -> dict[str, Any]:
    """The keys every block has, of the metrics ``m`` alone."""
    return block_to_json(Block("", None, m))


def summary_to_json(summary: Summary) -> dict[str, Any]:
    """The whole JSON document as plain Python values.

    ``extract`` (top level) and ``extracted`` (per block) appear only with ``--extract``;
    ``scorable_open_questions`` (top level) and ``open`` (per block) only when the datasets
    file has open questions; per block ``usage`` only when :attr:`Summary.shows_usage`: so
    that every other document keeps its shape (each key's condition is its measure's).
    """
    keys = block_keys()
    costs = summary.costs

    def block(setup: str, dataset: str | None, m: Metrics) -> dict[str, Any]:
        cost = costs.of(setup, dataset) if costs is not None else None
        return block_to_json(Block(setup, dataset, m, cost, summary), keys)

    doc: dict[str, Any] = {
        "datasets": summary.datasets,
        "scorable_questions": summary.scorable_questions,
        "skipped_files": summary.skipped_files,
        "unreadable_files": summary.unreadable_files,
        "ignored_files": summary.ignored_files,
    }
    if summary.scorable_open_questions is not None:
        doc["scorable_open_questions"] = summary.scorable_open_questions
    if summary.extract is not None:
        doc["extract"] = summary.extract
    doc["setups"] = [
        {
            "setup": s.setup,
            "overall": block(s.setup, None, s.overall),
            "per_dataset": {name: block(s.setup, name, m) for name, m in s.per_dataset.items()},
        }
        for s in summary.setups
    ]
    return doc


def render_json(summary: Summary) -> str:
    """Pretty-printed (2 spaces, like serde_json's ``to_string_pretty``), newline-terminated."""
    return orjson.dumps(summary_to_json(summary), option=orjson.OPT_INDENT_2).decode() + "\n"


RENDERERS: Mapping[TableFormat, Callable[[Summary], str]] = {
    TableFormat.TEXT: render_text,
    TableFormat.JSON: render_json,
    TableFormat.MARKDOWN: render_markdown,
}


def render(summary: Summary, fmt: TableFormat) -> str:
    return RENDERERS[fmt](summary)
