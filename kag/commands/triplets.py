"""`kag triplets GOLD PRED [PRED ...]`: grade predicted knowledge-graph triplets against gold."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kag.console import info, stdout_console, warn
from kag.grading.triplets.model import MatchMode

if TYPE_CHECKING:
    from kag.grading.triplets.model import TripletReport


class OutputFormat(str, Enum):
    TEXT = "text"
    JSON = "json"


def register(app: typer.Typer) -> None:
    @app.command("triplets")
    def triplets(
        gold: Annotated[
            Path,
            typer.Argument(
                metavar="GOLD", help="Gold entries (JSON array or JSON Lines).", show_default=False
            ),
        ],
        predictions: Annotated[
            list[Path],
            typer.Argument(
                metavar="PRED", help="One or more prediction files, graded side by side.", show_default=False
            ),
        ],
        output_format: Annotated[OutputFormat, typer.Option("--format", help="Report format on stdout.")] = (
            OutputFormat.TEXT
        ),
        details: Annotated[
            Path | None, typer.Option("--details", help="Write one JSON line per entry and file here.")
        ] = None,
        match: Annotated[
            MatchMode, typer.Option("--match", help="How differing normalized strings compare.")
        ] = MatchMode.EXACT,
        fuzzy_gate: Annotated[
            float | None,
            typer.Option(
                "--fuzzy-gate",
                min=0.0,
                max=1.0,
                help="Similarities below this count as 0 (default 0.70 fuzzy, 0.85 embedding).",
                show_default=False,
            ),
        ] = None,
        relations: Annotated[
            Path | None,
            typer.Option("--relations", help="JSON list of valid relation names (default: 20 types)."),
        ] = None,
        embedding_model: Annotated[
            str | None,
            typer.Option(
                "--embedding-model",
                help="fastembed model name or local folder for --match embedding (default: bundled MiniLM).",
                show_default=False,
            ),
        ] = None,
        allow_download: Annotated[
            bool, typer.Option("--allow-download", help="Let fastembed download a model it does not have.")
        ] = False,
    ) -> None:
        """Grade predicted knowledge-graph triplets against gold triplets (schema, entities,
        relations, weights, grounding; micro P/R/F1; hallucinations)."""
        from kag.grading.triplets.io import load_relations
        from kag.grading.triplets.model import DEFAULT_RELATIONS
        from kag.grading.triplets.report import write_details
        from kag.grading.triplets.score import grade_triplets

        if match is MatchMode.EXACT and fuzzy_gate is not None:
            warn("--fuzzy-gate has no effect with --match exact")
        if match is not MatchMode.EMBEDDING and embedding_model is not None:
            warn("--embedding-model has no effect without --match embedding")
        relation_names = load_relations(relations) if relations is not None else DEFAULT_RELATIONS
        report = grade_triplets(
            gold,
            predictions,
            mode=match,
            gate=fuzzy_gate,
            relations=relation_names,
            embedding_model=embedding_model,
            allow_download=allow_download,
        )
        if details is not None:
            lines = write_details(details, report)
            info(f"kag: wrote {lines} detail lines to {details}")
        RENDERERS[output_format](report)


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


RENDERERS: dict[OutputFormat, Callable[[TripletReport], None]] = {
    OutputFormat.TEXT: _render_text,
    OutputFormat.JSON: _render_json,
}
