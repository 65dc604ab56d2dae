"""The options commands share, each declared once (flags, type, metavar).

-v/-q, which every command takes, the configuration and request options, and those of
`kag stats` and its sub-commands; where commands word an option's help differently, the
wording is passed to its one declaration. Also the parsing of option values (percentages,
comma lists) and the shell completion of setup names.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from kag.commands._globs import setups_in
from kag.commands._trees import parse_trees
from kag.console import set_verbosity, verbosity
from kag.errors import KagError, UsageError
from kag.render.formats import ExportFormat, FindFormat, ReportFormat, TableFormat


def _datasets(help: str) -> Any:
    return typer.Option("--datasets", "-d", metavar="FILE", help=help, show_default=False)


def _results(help: str, metavar: str | None = "DIR") -> Any:
    return typer.Option("--results", "-r", metavar=metavar, help=help, show_default=False)


def _prefix(help: str, metavar: str | None = "TEXT") -> Any:
    return typer.Option("--prefix", metavar=metavar, help=help, show_default=False)


def choices(*values: str) -> Any:
    """A shell-completion callback offering ``values`` (those that start with what is typed)."""

    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete


def _given(ctx: typer.Context, name: str) -> Any:
    """The value of parameter ``name`` on this command or the nearest parent that has one."""
    level: typer.Context | None = ctx
    while level is not None:
        value = level.params.get(name)
        if value not in (None, (), []):
            return value
        level = level.parent  # type: ignore[assignment]
    return None


def complete_setups(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of a setup name: the setups of the result tree given so far on the
    line (``-r``, default ``.``, with its ``--prefix``); names only, no file is read. None
    when the tree cannot be listed."""
    try:
        source = parse_trees(_given(ctx, "results"))
        names = setups_in(source, _given(ctx, "prefix") or "")
    except (KagError, OSError, ValueError):  # a completion never fails the shell: no candidates
        return []
    return [name for name in names if name.startswith(incomplete)]


def _setup(help: str, complete: bool = True) -> Any:
    return typer.Option(
        "--setup",
        metavar="GLOB",
        help=help,
        show_default=False,
        autocompletion=complete_setups if complete else None,
    )


def _dataset(help: str) -> Any:
    return typer.Option("--dataset", metavar="GLOB", help=help, show_default=False)


def _format_option(help: str, metavar: str | None = "FORMAT", values: tuple[str, ...] = ()) -> Any:
    # An enum-typed --format completes its members by itself; a str one is given its values.
    return typer.Option(
        "--format",
        metavar=metavar,
        help=help,
        show_default=False,
        autocompletion=choices(*values) if values else None,
    )


def _output(help: str) -> Any:
    return typer.Option("--output", "-o", metavar="FILE", help=help, show_default=False)


def _adjust_verbosity(sign: int) -> Any:
    def callback(ctx: typer.Context, value: int) -> int:
        # Applied while the line is parsed, so every level (root, `stats`, the sub-command)
        # adds its own count to what the levels before it set.
        if value and not ctx.resilient_parsing:
            set_verbosity(verbosity() + sign * value)
        return value

    return callback


def _verbose(help: str) -> Any:
    return typer.Option(
        "--verbose",
        "-v",
        count=True,
        help=help,
        show_default=False,
        expose_value=False,
        callback=_adjust_verbosity(+1),
    )


# Every command takes -v/-q wherever they stand on the line (see compatibility in
# docs/architecture.md); the count of -v minus the count of -q adds to what the root's gave.
# Their values are applied by the callback, not passed to the command.
Verbose = Annotated[int, _verbose("More logging (repeatable).")]


StatsVerbose = Annotated[int, _verbose("More logging: -v ignored files, -vv every file.")]


Quiet = Annotated[
    int,
    typer.Option(
        "--quiet",
        "-q",
        count=True,
        help="Less logging (repeatable).",
        show_default=False,
        expose_value=False,
        callback=_adjust_verbosity(-1),
    ),
]


# The configuration file of the commands that read providers, retrievers or databases.
ConfigOpt = Annotated[Path, typer.Option("--config", "-c", metavar="FILE", help="Configuration file.")]


# The request options of the commands that call a model (generation, benchmark, judge).
RetriesOpt = Annotated[
    int, typer.Option("--retries", min=0, metavar="N", help="Retries of transient failures.")
]


TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0.001, metavar="SECS", help="Seconds per request.")
]


BackoffOpt = Annotated[
    float, typer.Option("--backoff", min=0.0, metavar="SECS", help="First retry delay (s).")
]


# `kag benchmark`: the datasets file and the filters that choose what runs, declared as the
# same options of `kag stats` read them.
RunDatasetsOpt = Annotated[Path, _datasets("Datasets file (JSON).")]


RunPrefixOpt = Annotated[str, _prefix("Prefix of result file names.")]


RunSetupOpt = Annotated[list[str], _setup("Run only setups matching GLOB (repeatable).", complete=False)]


RunDatasetOpt = Annotated[list[str], _dataset("Run only datasets matching GLOB (repeatable).")]


# `kag stats` itself.
StatsDatasetsOpt = Annotated[
    Path | None, _datasets("Datasets file with the answers (required without a sub-command).")
]


StatsResultsOpt = Annotated[
    list[str] | None,
    _results(
        "Root of the result tree; LABEL=DIR (repeatable) reports several trees, their setups as "
        "LABEL/setup  [default: .]"
    ),
]


StatsPrefixOpt = Annotated[
    str | None, _prefix("File name prefix of the result files (the benchmark's --prefix).")
]


StatsFormatOpt = Annotated[
    str | None,
    _format_option(
        "text, json, markdown, html (a self-contained page; with --output), junit, or csv or jsonl "
        "(one row per graded file)  [default: text]",
        metavar="FORMAT",
        values=(*(f.value for f in ReportFormat), *(f.value for f in ExportFormat)),
    ),
]


StatsOutputOpt = Annotated[Path | None, _output("Write the report to FILE instead of stdout.")]


StatsSetupOpt = Annotated[list[str] | None, _setup("Only setups matching this glob (repeatable).")]


StatsDatasetOpt = Annotated[list[str] | None, _dataset("Only datasets matching this glob (repeatable).")]


# The sub-commands (`compare`, `flips`, `impact`, `find`).
DatasetsOpt = Annotated[Path | None, _datasets("Datasets file with the answers.")]


ResultsOpt = Annotated[Path | None, _results("Result tree [default: .]")]


TreesOpt = Annotated[
    list[str] | None,
    _results("Result tree; LABEL=DIR (repeatable) pairs the setups of several trees [default: .]"),
]


PrefixOpt = Annotated[str | None, _prefix("File name prefix of result files.")]


SetupOpt = Annotated[list[str] | None, _setup("Only setups matching GLOB (repeatable).")]


DatasetOpt = Annotated[list[str] | None, _dataset("Only datasets matching GLOB (repeatable).")]


OutputOpt = Annotated[Path | None, _output("Write the report to FILE, not stdout.")]


ReportFormatOpt = Annotated[
    ReportFormat | None, _format_option("text, json, markdown, html or junit [default: text]")
]


TableFormatOpt = Annotated[TableFormat | None, _format_option("text, json or markdown [default: text]")]


# `--extract` / `--grade`: `kag stats` and its pairing sub-commands (before or after the name).
ExtractOpt = Annotated[
    str | None,
    typer.Option(
        "--extract",
        metavar="SPEC",
        help="Also grade the answer extracted from each response: letter, or regex:PATTERN "
        "(its first capture group).",
        show_default=False,
    ),
]


# `--evidence-match` / `--node-name`: how `kag stats` (and its compare and impact) holds the retrieved
# graph against gold evidence.
EvidenceMatchOpt = Annotated[
    str | None,
    typer.Option(
        "--evidence-match",
        metavar="MODE",
        help="How retrieved names and relations meet the gold evidence: exact, fuzzy or embedding "
        "(the matching of kag triplets)  [default: exact]",
        show_default=False,
    ),
]


NodeNameOpt = Annotated[
    str | None,
    typer.Option(
        "--node-name",
        metavar="KEY,...",
        help="The node properties that name a node in a result file's rendered text, first present "
        "first  [default: name]",
        show_default=False,
    ),
]


def evidence_options(match: str | None, node_name: str | None) -> tuple[str, tuple[str, ...]]:
    """``--evidence-match`` and ``--node-name`` checked: (mode, keys); UsageError otherwise."""
    mode = (match or "exact").strip().lower()
    if mode not in ("exact", "fuzzy", "embedding"):
        raise UsageError(f"--evidence-match must be one of exact, fuzzy, embedding (got {match!r})")
    keys = tuple(k.strip() for k in (node_name or "name").split(",") if k.strip())
    if not keys:
        raise UsageError("--node-name needs at least one property key")
    return mode, keys


GradeOpt = Annotated[
    str | None,
    typer.Option(
        "--grade",
        metavar="GRADE",
        help="Grade the comparisons and gates use: strict, or extracted (needs --extract)  [default: strict]",
        show_default=False,
    ),
]


TextOrJsonFormatOpt = Annotated[
    str | None, _format_option("text or json.", metavar="FORMAT", values=("text", "json"))
]

# `kag stats judge`.
JudgeFormatOpt = Annotated[
    str | None,
    _format_option(
        "text, json, markdown, html or junit.",
        metavar="FORMAT",
        values=("text", "json", "markdown", "html", "junit"),
    ),
]


# `kag stats find`, which reads no datasets file.
FindResultsOpt = Annotated[Path | None, _results("Root of the result tree [default: .]")]


FindPrefixOpt = Annotated[str | None, _prefix("File name prefix of result files [default: none]")]


FindFormatOpt = Annotated[FindFormat | None, _format_option("text, json or jsonl [default: text]")]


def parse_percent(value: str | float) -> float:
    """A ``--fail-under`` value: a number, with or without a trailing ``%`` (``80``, ``80%``,
    ``62.5``); BadParameter "a number from 0 to 100" otherwise. The range (and NaN) is
    checked after, by :func:`kag.grading.gates.check_threshold`."""
    text = str(value).strip()
    try:
        number = float(text.removesuffix("%").strip())
    except ValueError:
        raise typer.BadParameter(f"a number from 0 to 100, like 80 or 80% (got {text!r})") from None
    return number


def split_list(values: Iterable[str]) -> tuple[str, ...]:
    """The items of a repeatable option that also takes commas (``--skip a,b --skip c``)."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())
