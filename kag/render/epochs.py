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

EPOCHS_LEGEND = (
    "EPOCHS = epochs measured (N), Q = questions with all N epochs, INC = questions left out for having fewer\n"
    "MEAN% = mean over every answer, SE% = its standard error clustered by question\n"
    "MAJ% = most frequent answer right, CONS% = all N answers right or all wrong\n"
    "PASS@k% = unbiased pass@k (Chen et al. 2021) for k = 1, 2, 4, 8, … and N (every k in --format json)"
)


_COLUMNS = columns_for(EPOCH_COLUMNS, "text", Shown())


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
    lines = [title, "", f"{'SETUP':<{width}}" + _cols(headers_for("text", _COLUMNS))]
    lines += [f"{label:<{width}}" + _cols(cells) for label, cells in rows]
    return lines


def _cols(cells: Sequence[str]) -> str:
    *head, last = cells
    widths = [c.width for c in _COLUMNS[:-1]]
    return "".join(f"  {c:>{w}}" for c, w in zip(head, widths, strict=True)) + f"  {last}"


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
