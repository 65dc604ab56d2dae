"""`kag stats`: grade a result tree against the datasets file and report per setup.

The callback runs for ``kag stats`` itself and before any sub-command (``kag stats find``);
its options are optional and checked here only when no sub-command runs. A sub-command
finds the values given before its name in ``ctx.parent.params`` (keys ``datasets``,
``results``, ``prefix``, ``format``, ``setup``, ``dataset``, ``fail_under``, ``verbose``;
None / empty when not given).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kag.commands._common import (
    StatsDatasetOpt,
    StatsDatasetsOpt,
    StatsFormatOpt,
    StatsOutputOpt,
    StatsPrefixOpt,
    StatsResultsOpt,
    StatsSetupOpt,
    check_globs,
    check_setup_globs,
    emit_report,
)
from kag.console import set_verbosity, verbosity
from kag.errors import GateFailed, UsageError
from kag.render.formats import ReportFormat, TableFormat

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.mcq.metrics import GradeRun

FORMATS = tuple(f.value for f in ReportFormat)

stats_app = typer.Typer(
    help="Grade a result tree against the datasets file: accuracy, precision, coverage per setup.",
    no_args_is_help=False,
)


@stats_app.callback(invoke_without_command=True)
def stats(
    ctx: typer.Context,
    datasets: StatsDatasetsOpt = None,
    results: StatsResultsOpt = None,
    prefix: StatsPrefixOpt = None,
    format: StatsFormatOpt = None,
    output: StatsOutputOpt = None,
    setup: StatsSetupOpt = None,
    dataset: StatsDatasetOpt = None,
    fail_under: Annotated[
        float | None,
        typer.Option(
            "--fail-under",
            help="Exit 1 when a setup's ACC% is below PCT (0-100).",
            metavar="PCT",
            show_default=False,
        ),
    ] = None,
    fail_if_worse_than: Annotated[
        str | None,
        typer.Option(
            "--fail-if-worse-than",
            help="Exit 1 when a setup is significantly worse than SETUP (McNemar, Holm, alpha 0.05).",
            metavar="SETUP",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="More logging: -v ignored files, -vv every file.",
            show_default=False,
        ),
    ] = 0,
) -> None:
    """Grade every <results>/<dataset>/<question>/<prefix><setup>.json file and report per setup.

    Exit codes: 0 success, 1 --fail-under or --fail-if-worse-than failed, 2 bad usage or
    input, 130 interrupted.
    """
    if verbose:
        set_verbosity(verbosity() + verbose)
    if ctx.invoked_subcommand is not None:
        return
    fmt_name = (format or "text").lower()
    if fmt_name not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)} (got {format!r})")
    if datasets is None:
        raise UsageError("missing option '--datasets' / '-d': the datasets file with the answers")

    # Imported here so that `kag --help` stays fast.
    from kag.datasets import load_datasets
    from kag.grading.gates import check_threshold, fail_under_verdict, regression_verdict
    from kag.grading.mcq.summary import summarize
    from kag.grading.mcq.walk import grade_tree
    from kag.render.stats import render

    if fail_under is not None:
        check_threshold(fail_under)
    root = results if results is not None else Path(".")
    loaded = load_datasets(datasets)
    dataset_globs = tuple(dataset or ())
    # A filter that selects nothing is a typo far more often than an intent: exit 2
    # before any report, so that neither a CI gate nor a step summary passes on it.
    check_globs("--dataset", dataset_globs, "dataset", f"in {datasets}", sorted(loaded.datasets))
    analysed = fmt_name == "html" or fail_if_worse_than is not None
    graded = grade_tree(
        loaded,
        root,
        prefix or "",
        setups=tuple(setup or ()),
        dataset_globs=dataset_globs,
        keep_records=analysed,
        # The epoch and evidence blocks are JSON keys: only the JSON document reads them.
        epochs=fmt_name == "json",
        evidence=fmt_name == "json" and loaded.has_evidence,
    )
    check_setup_globs(tuple(setup or ()), {s for s, _ in graded.tallies}, root, prefix or "", dataset_globs)
    summary = summarize(graded)
    comparisons = None
    if analysed:
        text, comparisons = _analyse(
            graded, loaded, datasets, root, prefix or "", fmt_name, fail_if_worse_than
        )
    if fmt_name != "html":
        text = render(summary, TableFormat(fmt_name))
    emit_report(text, output)
    verdict = fail_under_verdict(summary, fail_under) if fail_under is not None else None
    if verdict is None and comparisons is not None:
        verdict = regression_verdict(comparisons)
    if verdict is not None:
        raise GateFailed(verdict)


def _analyse(
    graded: GradeRun,
    loaded: Datasets,
    datasets: Path,
    root: Path,
    prefix: str,
    fmt_name: str,
    fail_if_worse_than: str | None,
) -> tuple[str, ComparisonRun | None]:
    """The HTML page (when asked) and the comparisons the --fail-if-worse-than gate reads."""
    from kag import __version__
    from kag.console import warn
    from kag.grading.compare.records import answer_set_from_run
    from kag.grading.compare.setups import compare_setups
    from kag.render.html import PageMeta, render_html_report

    answers = answer_set_from_run(graded, loaded, root, prefix)
    if fail_if_worse_than is not None and fail_if_worse_than not in answers.setups:
        raise UsageError(f"--fail-if-worse-than {fail_if_worse_than}: no graded setup has that name")
    if fmt_name != "html":
        assert fail_if_worse_than is not None  # the only other reason to analyse
        return "", compare_setups(answers.answers, fail_if_worse_than, None)
    meta = PageMeta(datasets=str(datasets), results=str(root), prefix=prefix or None, version=__version__)
    page, analysis = render_html_report(answers, meta, baseline=fail_if_worse_than)
    for note in analysis.notes:
        warn(note)
    return page, analysis.comparisons if fail_if_worse_than is not None else None


def register(app: typer.Typer) -> typer.Typer:
    """Adds `kag stats` to ``app``; the sub-commands register on the returned app."""
    app.add_typer(stats_app, name="stats")
    return stats_app
