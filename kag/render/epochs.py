"""The epochs section of the `kag stats` text report: the measures over repeated samples of
every setup with later epochs in the tree (:mod:`kag.grading.mcq.epoch_walk`).

A tree without an ``epochs`` folder gives no section, so its report stays byte for byte
the compatible one (docs/architecture.md). With ``--extract`` a second table gives the
same measures under the extracted grade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kag.grading.epochs import EpochSummary
from kag.grading.mcq.epoch_walk import SetupEpochs
from kag.grading.mcq.summary import Summary
from kag.render.columns import EPOCH_COLUMNS, Shown, cells_for, columns_for, headers_for
from kag.textsafe import escape_controls

_COLUMNS = columns_for(EPOCH_COLUMNS, "text", Shown())

#: One line per column that explains itself (some explain their neighbours too).
EPOCHS_LEGEND = "\n".join(c.legend for c in _COLUMNS if c.legend)


def _cells(block: EpochSummary | None) -> list[str]:
    if block is None:
        return ["-"] * len(_COLUMNS)
    return [c or "" for c in cells_for("text", _COLUMNS, block)]


def _table(title: str, setups: Sequence[str], epochs: Mapping[str, SetupEpochs]) -> list[str]:
    rows: list[tuple[str, list[str]]] = []
    for setup in setups:
        found = epochs.get(setup)
        if found is None:
            continue
        rows.append((escape_controls(setup), _cells(found.overall)))
        rows += [(f"  └ {escape_controls(d)}", _cells(b)) for d, b in found.per_dataset.items()]
    width = max([5, *(len(label) for label, _ in rows)])
    headers = list(headers_for("text", _COLUMNS))
    # A column without a declared width is as wide as its widest cell, left-aligned; the
    # last is not padded, so that no line ends in spaces.
    widths = [
        c.width or max(len(h), *(len(cells[i]) for _, cells in rows))
        for i, (c, h) in enumerate(zip(_COLUMNS, headers, strict=True))
    ]
    lines = [title, "", f"{'SETUP':<{width}}" + _cols(headers, widths)]
    lines += [f"{label:<{width}}" + _cols(cells, widths) for label, cells in rows]
    return lines


def _cols(cells: Sequence[str], widths: Sequence[int]) -> str:
    out = []
    for i, (cell, width, column) in enumerate(zip(cells, widths, _COLUMNS, strict=True)):
        if column.width:
            out.append(f"  {cell:>{width}}")
        elif i == len(cells) - 1:
            out.append(f"  {cell}")
        else:
            out.append(f"  {cell:<{width}}")
    return "".join(out)


def render_epochs_text(summary: Summary) -> str:
    """The section (tables, then the legend), or "" when no graded setup has later epochs."""
    if not any(s.setup in summary.epochs for s in summary.setups):
        return ""
    setups = [s.setup for s in summary.setups]
    lines = _table("Epochs (strict grade)", setups, summary.epochs)
    if summary.extracted_epochs:
        lines += [
            "",
            *_table(
                f"Epochs (extracted grade: {escape_controls(summary.extract or '')})",
                setups,
                summary.extracted_epochs,
            ),
        ]
    lines += ["", EPOCHS_LEGEND]
    return "\n".join(lines) + "\n"
