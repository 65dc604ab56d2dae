"""`kag irt2`: IRT2 linking and ranking scores, equal to the reference evaluator."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from kag.commands._help import kag_command
from kag.commands._options import Quiet, Verbose, choices, split_list
from kag.errors import UsageError

T = TypeVar("T")

HELP = """Score IRT2 head and tail prediction files: hits@k and MRR, micro and macro.

Numbers equal the reference evaluator (PyPI irt2, `irt2 evaluate-kgc` /
`evaluate-ranking`). Prediction files are CSV rows `ent,rid,cand,score,...` (or JSON
Lines, optionally gzip); --head answers the head-side queries, --tail the tail side.
A prediction line longer than 64 MiB is exit 2.
"""

EXAMPLES = """Examples:

\b
  kag irt2 --dataset examples/irt2/dataset --task linking --split test \\
      --head examples/irt2/head.csv --tail examples/irt2/tail.csv
  kag irt2 --dataset irt2-cde-large --task ranking --split validation --head head.csv --tail tail.csv \\
      --ks 1 --ks 5 --format json
"""


def irt2(
    dataset: Annotated[
        Path,
        typer.Option("--dataset", metavar="DIR", help="IRT2 dataset folder (config.yaml, open.*.txt, ...)."),
    ],
    task: Annotated[
        str,
        typer.Option(
            "--task",
            metavar="TASK",
            help="linking (alias kgc) or ranking.",
            autocompletion=choices("linking", "kgc", "ranking"),
        ),
    ],
    split: Annotated[
        str,
        typer.Option(
            "--split",
            metavar="SPLIT",
            help="validation or test.",
            autocompletion=choices("validation", "test"),
        ),
    ],
    head: Annotated[
        Path, typer.Option("--head", metavar="FILE", help="Predictions for the head-side queries.")
    ],
    tail: Annotated[
        Path, typer.Option("--tail", metavar="FILE", help="Predictions for the tail-side queries.")
    ],
    mode: Annotated[
        str, typer.Option("--mode", metavar="MODE", help="original (the paper's) or full.")
    ] = "original",
    max_rank: Annotated[
        str,
        typer.Option(
            "--max-rank", metavar="N", help="Filtered ranks above N score 0; 'none' for no cut-off."
        ),
    ] = "100",
    ks: Annotated[
        list[str],
        typer.Option("--ks", metavar="K", help="k for hits@k (repeatable; commas separate several)."),
    ] = ["1,10,100"],  # noqa: B006
    ties: Annotated[
        str,
        typer.Option(
            "--ties",
            metavar="TIES",
            help="first (reference: row order), optimistic, pessimistic, realistic.",
        ),
    ] = "first",
    per_query: Annotated[
        Path | None,
        typer.Option("--per-query", metavar="FILE", help="Write one JSON line per gold target to FILE."),
    ] = None,
    output: Annotated[str, typer.Option("--format", metavar="FORMAT", help="text or json.")] = "text",
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    from kag.grading.irt2.model import Mode, Split, Task, TieMode
    from kag.grading.irt2.score import Request, evaluate, parse_ks, parse_max_rank
    from kag.render.formats import Irt2Format
    from kag.render.irt2 import render, write_per_query

    request = Request(
        dataset=dataset,
        task=_choice(Task.parse, task, "--task", "linking, kgc, ranking"),
        split=_choice(Split, split, "--split", "validation, test"),
        head=head,
        tail=tail,
        mode=_choice(Mode, mode, "--mode", "original, full"),
        max_rank=parse_max_rank(max_rank),
        ks=parse_ks(",".join(split_list(ks))),
        ties=_choice(TieMode, ties, "--ties", "first, optimistic, pessimistic, realistic"),
    )
    fmt = _choice(Irt2Format, output, "--format", "text, json")
    evaluation = evaluate(request)
    if per_query is not None:
        write_per_query(per_query, evaluation)
    sys.stdout.write(render(evaluation, fmt))


def register(app: typer.Typer) -> None:
    kag_command(
        app,
        "irt2",
        "Score IRT2 head and tail prediction files: hits@k and MRR.",
        EXAMPLES,
        help=HELP,
        no_args_is_help=True,
    )(irt2)


def _choice(parse: Callable[[str], T], value: str, option: str, allowed: str) -> T:
    try:
        return parse(value.strip().lower())
    except ValueError:
        raise UsageError(f"{option} must be one of {allowed}; got {value!r}") from None
