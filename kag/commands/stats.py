"""`kag stats`: grade a result tree against the datasets file and report per setup.

The callback runs for ``kag stats`` itself and before any sub-command (``kag stats find``);
its options are optional and checked here only when no sub-command runs. A sub-command
finds the values given before its name in ``ctx.parent.params`` (keys ``datasets``,
``results``, ``prefix``, ``format``, ``setup``, ``dataset``, ``fail_under``, ``verbose``;
None / empty when not given).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kag.console import set_verbosity, verbosity
from kag.errors import GateFailed, UsageError
from kag.render.formats import ReportFormat, TableFormat

if TYPE_CHECKING:
    from kag.grading.compare.setups import ComparisonRun

FORMATS = tuple(f.value for f in ReportFormat)

stats_app = typer.Typer(
    help="Grade a result tree against the datasets file: accuracy, precision, coverage per setup.",
    no_args_is_help=False,
)


@stats_app.callback(invoke_without_command=True)
def stats(
    ctx: typer.Context,
    datasets: Annotated[
        Path | None,
        typer.Option(
            "--datasets",
            "-d",
            help="Datasets file with the answers (required without a sub-command).",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results", "-r", help="Root of the result tree  [default: .]", metavar="DIR", show_default=False
        ),
    ] = None,
    prefix: Annotated[
        str | None,
        typer.Option(
            "--prefix",
            help="File name prefix of the result files (the benchmark's --prefix).",
            metavar="STR",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="text, json, markdown or html (a self-contained page; with --output)  [default: text]",
            metavar="FORMAT",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the report to FILE instead of stdout.",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    setup: Annotated[
        list[str] | None,
        typer.Option(
            "--setup", help="Only setups matching this glob (repeatable).", metavar="GLOB", show_default=False
        ),
    ] = None,
    dataset: Annotated[
        list[str] | None,
        typer.Option(
            "--dataset",
            help="Only datasets matching this glob (repeatable).",
            metavar="GLOB",
            show_default=False,
        ),
    ] = None,
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
    from kag.commands.compare import emit_report

    emit_report(text, output)
    verdict = fail_under_verdict(summary, fail_under) if fail_under is not None else None
    if verdict is None and comparisons is not None:
        verdict = regression_verdict(comparisons)
    if verdict is not None:
        raise GateFailed(verdict)


MAX_NAMES_SHOWN = 20


def unmatched_globs(globs: Sequence[str], names: Iterable[str]) -> list[str]:
    """The globs (``fnmatchcase``, as the filters use them) that match none of ``names``, in order."""
    names = list(names)
    return [g for g in globs if not any(fnmatchcase(name, g) for name in names)]


def unmatched_message(option: str, globs: Sequence[str], kind: str, where: str, names: Sequence[str]) -> str:
    """``--setup a, --setup b match no setup in DIR (setups: x, y)``: at most
    ``MAX_NAMES_SHOWN`` names, then how many more."""
    flags = ", ".join(f"{option} {g}" for g in globs)
    verb = "matches" if len(globs) == 1 else "match"
    shown = ", ".join(names[:MAX_NAMES_SHOWN]) or "none"
    if len(names) > MAX_NAMES_SHOWN:
        shown += f", … ({len(names) - MAX_NAMES_SHOWN} more)"
    return f"{flags} {verb} no {kind} {where} ({kind}s: {shown})"


def check_globs(option: str, globs: Sequence[str], kind: str, where: str, names: Sequence[str]) -> None:
    missing = unmatched_globs(globs, names)
    if missing:
        raise UsageError(unmatched_message(option, missing, kind, where, names))


def check_setup_globs(
    globs: tuple[str, ...], graded: set[str], root: Path, prefix: str, dataset_globs: tuple[str, ...]
) -> None:
    """UsageError naming each ``--setup`` glob that matches no setup of the tree (within the
    ``--dataset`` folders), with the setups that are there. Only when a glob matches no
    graded setup is the tree listed again (names only, no file is read), so a filter that
    works costs nothing."""
    if not unmatched_globs(globs, graded):
        return
    from kag.results.tree import list_results, matches_any

    in_tree = sorted(
        {f.setup for f in list_results(root, prefix).files if matches_any(f.dataset, dataset_globs)}
    )
    check_globs("--setup", globs, "setup", tree_place(root, dataset_globs), in_tree)


def tree_place(root: Path | str, dataset_globs: Sequence[str]) -> str:
    """``in ROOT``, and ``with --dataset G, …`` when the datasets were filtered: where the
    setups named by an unmatched-filter message were looked for."""
    with_datasets = ", ".join(f"--dataset {g}" for g in dataset_globs)
    return f"in {root}" + (f" with {with_datasets}" if with_datasets else "")


def _analyse(
    graded: object,
    loaded: object,
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

    answers = answer_set_from_run(graded, loaded, root, prefix)  # type: ignore[arg-type]
    if fail_if_worse_than is not None and fail_if_worse_than not in answers.setups:
        raise UsageError(f"--fail-if-worse-than {fail_if_worse_than}: no graded setup has that name")
    if fmt_name != "html":
        return "", compare_setups(answers.answers, fail_if_worse_than, None)
    meta = PageMeta(datasets=str(datasets), results=str(root), prefix=prefix or None, version=__version__)
    page, analysis = render_html_report(answers, meta, baseline=fail_if_worse_than)
    for note in analysis.notes:
        warn(note)
    return page, analysis.comparisons if fail_if_worse_than is not None else None


def option_before(ctx: typer.Context, flag: str) -> Any:
    """The value of ``flag`` given explicitly on ``kag stats`` (before a sub-command), else None.

    Looked up by flag, not by parameter name; a default of ``stats`` never overrides an
    option of the sub-command.
    """
    parent = ctx.parent
    if parent is None:
        return None
    for param in parent.command.params:
        if flag in param.opts and param.name is not None:
            source = parent.get_parameter_source(param.name)
            if source is None or source.name in ("DEFAULT", "DEFAULT_MAP"):
                return None
            value = parent.params.get(param.name)
            return value if value not in ((), []) else None
    return None


def pick_option(ctx: typer.Context, flag: str, after: Any, default: Any) -> Any:
    """Options after the sub-command win, then options before it (on ``stats``), then the default."""
    if after is not None and after not in ((), []):
        return after
    before = option_before(ctx, flag)
    return default if before is None else before


def register(app: typer.Typer, find: object) -> None:
    from kag.commands import compare

    find.register(stats_app)  # type: ignore[attr-defined]
    compare.register(stats_app)
    app.add_typer(stats_app, name="stats")
