"""`kag stats runs`: list the run records `kag benchmark` wrote in a result tree."""

from __future__ import annotations

import sys

import typer

from kag.commands._before import pick_format, pick_option
from kag.commands._help import kag_command
from kag.commands._options import Quiet, ResultsOpt, TextOrJsonFormatOpt, Verbose
from kag.commands._trees import one_tree
from kag.render.formats import RunsFormat

EXAMPLES = """Examples:

\b
  kag stats runs -r results
  kag stats runs -r results --format json
"""


def runs(
    ctx: typer.Context,
    results: ResultsOpt = None,
    format: TextOrJsonFormatOpt = None,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """List the run records of a result tree (.kag/runs/), oldest first: when each
    `kag benchmark` started and finished, kag's version, the setups, the task counts and
    the git commit it ran from ("+": uncommitted changes)."""
    from kag.render.runs import RENDERERS
    from kag.results import check_results_root, read_run_records

    fmt = pick_format(ctx, format, RunsFormat)
    root = one_tree(pick_option(ctx, "--results", results, None), "kag stats runs")
    check_results_root(str(root))
    records = read_run_records(root)
    sys.stdout.write(RENDERERS[fmt](records) + "\n")


def register(stats_app: typer.Typer) -> None:
    kag_command(stats_app, "runs", "List the runs that wrote a result tree.", EXAMPLES)(runs)
