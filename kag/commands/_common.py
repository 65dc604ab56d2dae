"""What the commands share: the options of `kag stats` and its sub-commands, reading an
option given before the sub-command name, the unmatched-filter checks, and writing a report.

Commands import this module and never one another. Each shared option is declared once
here (flags, type, metavar); where commands word its help differently, the wording is
passed to that one declaration, so ``--help`` of every command reads as before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any

import typer

from kag.errors import UsageError
from kag.render.formats import FindFormat, ReportFormat, TableFormat


def _datasets(help: str) -> Any:
    return typer.Option("--datasets", "-d", metavar="FILE", help=help, show_default=False)


def _results(help: str, metavar: str | None = "DIR") -> Any:
    return typer.Option("--results", "-r", metavar=metavar, help=help, show_default=False)


def _prefix(help: str, metavar: str | None = "STR") -> Any:
    return typer.Option("--prefix", metavar=metavar, help=help, show_default=False)


def _setup(help: str) -> Any:
    return typer.Option("--setup", metavar="GLOB", help=help, show_default=False)


def _dataset(help: str) -> Any:
    return typer.Option("--dataset", metavar="GLOB", help=help, show_default=False)


def _format_option(help: str, metavar: str | None = None) -> Any:
    return typer.Option("--format", metavar=metavar, help=help, show_default=False)


def _output(help: str) -> Any:
    return typer.Option("--output", "-o", metavar="FILE", help=help, show_default=False)


# `kag stats` itself.
StatsDatasetsOpt = Annotated[
    Path | None, _datasets("Datasets file with the answers (required without a sub-command).")
]
StatsResultsOpt = Annotated[Path | None, _results("Root of the result tree  [default: .]")]
StatsPrefixOpt = Annotated[
    str | None, _prefix("File name prefix of the result files (the benchmark's --prefix).")
]
StatsFormatOpt = Annotated[
    str | None,
    _format_option(
        "text, json, markdown, html (a self-contained page; with --output), or csv or jsonl "
        "(one row per graded file)  [default: text]",
        metavar="FORMAT",
    ),
]
StatsOutputOpt = Annotated[Path | None, _output("Write the report to FILE instead of stdout.")]
StatsSetupOpt = Annotated[list[str] | None, _setup("Only setups matching this glob (repeatable).")]
StatsDatasetOpt = Annotated[list[str] | None, _dataset("Only datasets matching this glob (repeatable).")]

# The sub-commands (`compare`, `flips`, `impact`, `find`).
DatasetsOpt = Annotated[Path | None, _datasets("Datasets file with the answers.")]
ResultsOpt = Annotated[Path | None, _results("Result tree [default: .]")]
PrefixOpt = Annotated[str | None, _prefix("File name prefix of result files.")]
SetupOpt = Annotated[list[str] | None, _setup("Only setups matching GLOB (repeatable).")]
DatasetOpt = Annotated[list[str] | None, _dataset("Only datasets matching GLOB (repeatable).")]
OutputOpt = Annotated[Path | None, _output("Write the report to FILE, not stdout.")]
ReportFormatOpt = Annotated[
    ReportFormat | None, _format_option("text, json, markdown or html [default: text]")
]
TableFormatOpt = Annotated[TableFormat | None, _format_option("text, json or markdown [default: text]")]

JudgeFormatOpt = Annotated[str | None, _format_option("text or json.", metavar="FORMAT")]

# `kag stats find`, which reads no datasets file.
FindResultsOpt = Annotated[Path | None, _results("Root of the result tree [default: .]", metavar=None)]
FindPrefixOpt = Annotated[
    str | None, _prefix("File name prefix of result files [default: none]", metavar=None)
]
FindFormatOpt = Annotated[FindFormat | None, _format_option("[default: text]")]


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


def pick_format(ctx: typer.Context, value: Any, allowed: type[StrEnum]) -> Any:
    """The ``--format`` after the sub-command, else the one before it, else text, as a member of
    ``allowed``; UsageError naming the formats of ``allowed`` when it is not one of them."""
    raw = str(
        getattr(value, "value", value) if value is not None else pick_option(ctx, "--format", None, "text")
    ).lower()
    try:
        return allowed(raw)
    except ValueError:
        names = ", ".join(m.value for m in allowed)
        raise UsageError(f"--format {raw}: not available here ({names})") from None


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
    """UsageError naming the globs of ``option`` that match none of ``names``."""
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
    from kag.results import list_results
    from kag.results.tree import matches_any

    in_tree = sorted(
        {f.setup for f in list_results(root, prefix).files if matches_any(f.dataset, dataset_globs)}
    )
    check_globs("--setup", globs, "setup", tree_place(root, dataset_globs), in_tree)


def tree_place(root: Path | str, dataset_globs: Sequence[str]) -> str:
    """``in ROOT``, and ``with --dataset G, …`` when the datasets were filtered: where the
    setups named by an unmatched-filter message were looked for."""
    with_datasets = ", ".join(f"--dataset {g}" for g in dataset_globs)
    return f"in {root}" + (f" with {with_datasets}" if with_datasets else "")


def emit_report(text: str, output: Path | None) -> None:
    """The report on stdout (ending in a newline), or written atomically to ``output``."""
    from kag.console import info
    from kag.render.html import write_report

    if text and not text.endswith("\n"):
        text += "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_report(str(output), text)
        info(f"Wrote {output}")
