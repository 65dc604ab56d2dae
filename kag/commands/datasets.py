"""`kag datasets import` and `kag datasets check`: bring questions in, check a datasets file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kag.commands._help import kag_command
from kag.commands._options import Quiet, Verbose, split_list
from kag.commands._report import write_report
from kag.commands._values import KagSubGroup
from kag.console import info
from kag.errors import UsageError

if TYPE_CHECKING:
    from kag.datasets import Datasets

datasets_app = typer.Typer(
    cls=KagSubGroup,
    help="Import questions into a datasets file (CSV, JSON Lines, Parquet) and check datasets files.",
    short_help="Import questions into a datasets file; check one.",
    no_args_is_help=True,
)

IMPORT_HELP = """Add the questions of FILE (CSV, JSON Lines or Parquet; one row a question) to
the datasets file DATASETS (created when missing) under --dataset NAME (default: FILE's
name). Name the columns: --question, then the options (--options COL,COL,..., one column
each; --options-list COL, a list or an object; or --choices TEXT,TEXT,..., the same for
every row) and --answer with --answer-is; or --answers COL for open questions. Options are
keyed A, B, C... (an object keeps its keys). A question id already in DATASETS is exit 2:
nothing is replaced.
"""

IMPORT_EXAMPLES = """Examples (the layouts Hugging Face publishes):

\b
  # MMLU: question, choices (list), answer (0-based index)
  kag datasets import mmlu.parquet -o datasets.json --dataset mmlu \\
      --question question --options-list choices --answer answer --answer-is index
  # MedQA: question, options (object A..E), answer_idx (letter)
  kag datasets import medqa.jsonl -o datasets.json --dataset medqa \\
      --question question --options-list options --answer answer_idx
  # PubMedQA: question, final_decision (yes / no / maybe)
  kag datasets import pubmedqa.parquet -o datasets.json --dataset pubmedqa --id pubid \\
      --question question --choices yes,no,maybe --answer final_decision --answer-is text
"""

CHECK_EXAMPLES = """Examples:

\b
  kag datasets check datasets.json
  kag datasets check datasets.json --format json
"""


def import_(
    source: Annotated[
        Path, typer.Argument(metavar="FILE", help="CSV, JSON Lines (.jsonl, .json) or Parquet file.")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="DATASETS", help="The datasets file to add to.")
    ],
    question: Annotated[
        str, typer.Option("--question", metavar="COL", help="The column of the question text.")
    ],
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset", metavar="NAME", help="Dataset name (default: FILE's name).", show_default=False
        ),
    ] = None,
    id: Annotated[
        str | None,
        typer.Option(
            "--id",
            metavar="COL",
            help="The column of the question id (default: the row number, from 0).",
            show_default=False,
        ),
    ] = None,
    options: Annotated[
        list[str] | None,
        typer.Option(
            "--options",
            metavar="COL,COL,...",
            help="One column per option, keyed A, B, C...",
            show_default=False,
        ),
    ] = None,
    options_list: Annotated[
        str | None,
        typer.Option(
            "--options-list",
            metavar="COL",
            help="One column holding the options (list, or object of key -> text).",
            show_default=False,
        ),
    ] = None,
    choices: Annotated[
        list[str] | None,
        typer.Option(
            "--choices",
            metavar="TEXT,TEXT,...",
            help="The same options for every row, keyed A, B, C...",
            show_default=False,
        ),
    ] = None,
    answer: Annotated[
        str | None,
        typer.Option("--answer", metavar="COL", help="The column of the correct option.", show_default=False),
    ] = None,
    answer_is: Annotated[
        str,
        typer.Option(
            "--answer-is",
            metavar="KIND",
            help="letter (an option key), index (0-based) or text (an option's text).",
        ),
    ] = "letter",
    answers: Annotated[
        str | None,
        typer.Option(
            "--answers",
            metavar="COL",
            help="Open questions: the column of the accepted answer(s).",
            show_default=False,
        ),
    ] = None,
    evidence: Annotated[
        str | None,
        typer.Option(
            "--evidence-column",
            metavar="COL",
            help="The column of the gold evidence: entity names separated by ';', or JSON"
            ' (a list of names, or {"entities": [...], "triples": [[s, p, o], ...]}).',
            show_default=False,
        ),
    ] = None,
    input_format: Annotated[
        str | None,
        typer.Option(
            "--input-format",
            metavar="FORMAT",
            help="csv, jsonl or parquet (default: from FILE's name).",
            show_default=False,
        ),
    ] = None,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    from kag.datasets_import import AnswerIs, Columns, InputKind, import_questions, read_target

    try:
        kind = InputKind(input_format.strip().lower()) if input_format is not None else None
    except ValueError:
        raise UsageError(
            f"--input-format must be one of csv, jsonl, parquet (got {input_format!r})"
        ) from None
    try:
        answer_kind = AnswerIs(answer_is.strip().lower())
    except ValueError:
        raise UsageError(f"--answer-is must be one of letter, index, text (got {answer_is!r})") from None
    columns = Columns(
        question=question,
        id=id,
        options=split_list(options or ()),
        options_list=options_list,
        choices=split_list(choices or ()),
        answer=answer,
        answer_is=answer_kind,
        answers=answers,
        evidence=evidence,
    )
    report = import_questions(
        source, output, columns, dataset=dataset, kind=kind, existing=read_target(output)
    )
    write_report(str(output), report.document.decode())
    kinds = f"{report.mcq} multiple-choice, {report.open} open"
    kept = f"; it already held {report.kept}" if report.kept else ""
    info(f"imported {report.added} question(s) ({kinds}) into dataset '{report.dataset}' of {output}{kept}")


def check(
    datasets: Annotated[Path, typer.Argument(metavar="DATASETS", help="The datasets file to check.")],
    format: Annotated[str, typer.Option("--format", metavar="FORMAT", help="text or json.")] = "text",
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    from kag.datasets import load_datasets
    from kag.datasets_import import count_questions
    from kag.render.datasets import render_counts

    fmt = format.strip().lower()
    if fmt not in ("text", "json"):
        raise UsageError(f"--format must be one of text, json (got {format!r})")
    loaded = load_datasets(datasets)
    counts = count_questions(loaded)
    sys.stdout.write(render_counts(counts, fmt))
    _warn_empty_gold(loaded)


def _warn_empty_gold(loaded: Datasets) -> None:
    """One warning per accepted answer that normalizes to nothing: ``kag stats`` ignores them."""
    from kag.console import warn
    from kag.grading.open_grading import empty_open_gold

    for gold in empty_open_gold(loaded):
        unscored = "; the question has no other accepted answer and is not scored" if gold.alone else ""
        warn(f"{loaded.path}: {gold.describe()} normalizes to nothing: it is ignored when graded{unscored}")


def register(app: typer.Typer) -> None:
    app.add_typer(datasets_app, name="datasets")
    kag_command(
        datasets_app,
        "import",
        "Add the questions of a CSV, JSON Lines or Parquet file.",
        IMPORT_EXAMPLES,
        help=IMPORT_HELP,
    )(import_)
    kag_command(
        datasets_app,
        "check",
        "Validate a datasets file and count its questions per dataset.",
        CHECK_EXAMPLES,
        help="Validate DATASETS (exit 2 naming each problem) and print its questions per dataset.",
    )(check)
