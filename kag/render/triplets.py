"""`kag triplets` reports on stdout: two rich tables (one column per prediction file), or the
JSON document of :mod:`kag.grading.triplets.report`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from kag.console import stdout_console
from kag.grading.triplets.model import TripletReport
from kag.render.formats import TripletsFormat


def _render_json(report: TripletReport) -> None:
    from kag.grading.triplets.report import report_json_bytes

    sys.stdout.write(report_json_bytes(report).decode())


def _render_text(report: TripletReport) -> None:
    """The report as two tables on stdout, one column per prediction file."""
    from rich.table import Table

    from kag.grading.triplets.report import relation_rows, report_rows
    from kag.textsafe import escape_controls, escape_message

    gate = "" if report.gate is None else f", gate {report.gate:.2f}"
    mode = f"match: {report.match_mode.value}, similarity: {report.similarity_backend}{gate}"
    header = escape_message(f"gold: {report.gold}\n{mode}")
    # Relations come from model output, names from the command line: neither may drive the terminal.
    names = [escape_controls(run.predictions) for run in report.runs]
    short = [Path(name).name for name in names]
    if len(set(short)) == len(short):
        names = short
    console = stdout_console()
    console.print(header, markup=False)
    console.print()
    for heading, label, rows in (
        (None, "metric", report_rows(report)),
        ("Predicted relations", "relation", relation_rows(report)),
    ):
        if not rows:  # no valid triplet in any file: a table of headers only says nothing
            console.print(f"{heading}: none (no valid triplet was predicted)", markup=False)
            console.print()
            continue
        table = Table(title=heading, title_justify="left", show_edge=False, pad_edge=False)
        table.add_column(label)
        for name in names:
            table.add_column(name, justify="right")
        for row_label, cells in rows:
            if cells:
                table.add_row(escape_controls(row_label), *cells)
            else:
                table.add_section()
        console.print(table)
        console.print()


RENDERERS: dict[TripletsFormat, Callable[[TripletReport], None]] = {
    TripletsFormat.TEXT: _render_text,
    TripletsFormat.JSON: _render_json,
}
