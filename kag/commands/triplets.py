"""`kag triplets GOLD PRED [PRED ...]`: grade predicted knowledge-graph triplets against gold."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kag.commands._help import kag_command
from kag.commands._options import Quiet, Verbose
from kag.console import info, warn
from kag.grading.triplets.model import MatchMode
from kag.render.formats import TripletsFormat

EXAMPLES = """Examples:

\b
  kag triplets examples/triplets/gold.jsonl examples/triplets/finetuned.jsonl
  kag triplets gold.jsonl run1.jsonl run2.jsonl --format json
  kag triplets gold.jsonl predictions.jsonl --match fuzzy --details details.jsonl
  kag triplets gold.jsonl predictions.jsonl --match embedding --fuzzy-gate 0.9
"""


def triplets(
    gold: Annotated[
        Path,
        typer.Argument(metavar="GOLD", help="Gold entries (JSON array or JSON Lines).", show_default=False),
    ],
    predictions: Annotated[
        list[Path],
        typer.Argument(
            metavar="PRED", help="One or more prediction files, graded side by side.", show_default=False
        ),
    ],
    output_format: Annotated[
        TripletsFormat,
        typer.Option("--format", metavar="FORMAT", help="Report format on stdout: text or json."),
    ] = (TripletsFormat.TEXT),
    details: Annotated[
        Path | None,
        typer.Option("--details", metavar="FILE", help="Write one JSON line per entry and file to FILE."),
    ] = None,
    match: Annotated[
        MatchMode,
        typer.Option(
            "--match",
            metavar="MODE",
            help="How differing normalized strings compare: exact, fuzzy or embedding.",
        ),
    ] = MatchMode.EXACT,
    fuzzy_gate: Annotated[
        float | None,
        typer.Option(
            "--fuzzy-gate",
            metavar="SIM",
            min=0.0,
            max=1.0,
            help="Similarities below this count as 0 (default 0.70 fuzzy, 0.85 embedding).",
            show_default=False,
        ),
    ] = None,
    relations: Annotated[
        Path | None,
        typer.Option(
            "--relations", metavar="FILE", help="JSON list of valid relation names (default: 20 types)."
        ),
    ] = None,
    embedding_model: Annotated[
        str | None,
        typer.Option(
            "--embedding-model",
            metavar="MODEL",
            help=(
                "fastembed model name or local folder for --match embedding (default: bundled MiniLM); "
                "sentence-transformers loads it when fastembed cannot and it is installed. A named "
                "model that does not load is exit 2; only the default falls back to fuzzy."
            ),
            show_default=False,
        ),
    ] = None,
    allow_download: Annotated[
        bool, typer.Option("--allow-download", help="Let fastembed download a model it does not have.")
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Grade predicted knowledge-graph triplets against gold triplets (schema, entities,
    relations, weights, grounding; micro P/R/F1; hallucinations).

    One entry may be aligned on at most 100,000,000 pairs (valid predicted x gold
    triplets; in fuzzy and embedding mode also predicted x gold entities): a larger
    entry is exit 2.
    """
    from kag.grading.triplets.io import load_relations
    from kag.grading.triplets.model import DEFAULT_RELATIONS
    from kag.grading.triplets.report import write_details
    from kag.grading.triplets.score import grade_triplets
    from kag.render.triplets import RENDERERS

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
        details=details is not None,
    )
    if details is not None:
        lines = write_details(details, report)
        info(f"kag: wrote {lines} detail lines to {details}")
    RENDERERS[output_format](report)


def register(app: typer.Typer) -> None:
    kag_command(app, "triplets", "Grade predicted knowledge-graph triplets against gold.", EXAMPLES)(triplets)
