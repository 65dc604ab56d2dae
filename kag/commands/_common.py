"""What the commands share: the options of `kag stats` and its sub-commands, the -v/-q
options every command takes, the help layout, reading an option given before the
sub-command name, the unmatched-filter checks, and writing a report.

Commands import this module and never one another. Each shared option is declared once
here (flags, type, metavar); where commands word its help differently, the wording is
passed to that one declaration, so ``--help`` of every command reads as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from kag.console import set_verbosity, verbosity
from kag.errors import KagError, UsageError
from kag.render.formats import ExportFormat, FindFormat, ReportFormat, TableFormat

if TYPE_CHECKING:
    from kag.grading.mcq.trees import ResultSource


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


# Every command takes -v/-q wherever they stand on the line, as the Rust tool's global
# flags did; the count of -v minus the count of -q adds to what the root's gave. Their
# values are applied by the callback, not passed to the command.
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


def kag_command(app: typer.Typer, name: str, short_help: str, epilog: str, **settings: Any) -> Any:
    """``app.command`` for a kag command: the help layout of :class:`KagCommand`, the one-line
    summary the command list shows, and the examples printed after the options."""
    return app.command(name, cls=KagCommand, short_help=short_help, epilog=epilog, **settings)


class KagCommand(TyperCommand):
    """A command whose help names its arguments as the options do (``REGEX``, ``PRED...``),
    without typer's ``{REGEX}`` in the usage line and ``<str>`` beside the name."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(_argument_name(param, usage=True))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param: Any, usage: bool = False) -> str:
    name = str(param.metavar or param.name).upper()
    if usage and not param.required:
        name = f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


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
GradeOpt = Annotated[
    str | None,
    typer.Option(
        "--grade",
        metavar="GRADE",
        help="Grade the comparisons and gates use: strict, or extracted (needs --extract)  [default: strict]",
        show_default=False,
    ),
]

JudgeFormatOpt = Annotated[
    str | None, _format_option("text or json.", metavar="FORMAT", values=("text", "json"))
]

# `kag stats find`, which reads no datasets file.
FindResultsOpt = Annotated[Path | None, _results("Root of the result tree [default: .]")]
FindPrefixOpt = Annotated[str | None, _prefix("File name prefix of result files [default: none]")]
FindFormatOpt = Annotated[FindFormat | None, _format_option("text, json or jsonl [default: text]")]


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


def pick_datasets(ctx: typer.Context, after: Path | None) -> Path:
    """``--datasets`` as :func:`pick_option` finds it; UsageError when it is given nowhere,
    worded as the argument parser words a missing option (see ``kag/cli.py``)."""
    path: Path | None = pick_option(ctx, "--datasets", after, None)
    if path is None:
        raise UsageError(f"missing option '--datasets' / '-d' (see '{ctx.command_path} --help')")
    return path


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


def pick_grade(ctx: typer.Context, extract: str | None, grade: str | None) -> tuple[str | None, bool]:
    """(the ``--extract`` spec or None, whether ``--grade extracted``), each given after the
    sub-command name or before it; UsageError for an unknown grade, an invalid spec, or
    ``--grade extracted`` without ``--extract``."""
    from kag.grading.mcq.extracted import Grade, check_grade, compile_spec

    spec = pick_option(ctx, "--extract", extract, None)
    raw = str(pick_option(ctx, "--grade", grade, Grade.STRICT.value)).lower()
    try:
        chosen = Grade(raw)
    except ValueError:
        raise UsageError(f"--grade {raw}: expected strict or extracted") from None
    check_grade(chosen, spec)
    if spec is not None:
        compile_spec(spec)
    return spec, chosen is Grade.EXTRACTED


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
    globs: tuple[str, ...],
    graded: set[str],
    root: ResultSource,
    prefix: str,
    dataset_globs: tuple[str, ...],
) -> None:
    """UsageError naming each ``--setup`` glob that matches no setup of the tree (within the
    ``--dataset`` folders), with the setups that are there. Only when a glob matches no
    graded setup is the tree listed again (names only, no file is read), so a filter that
    works costs nothing. Over labelled trees the setups are ``LABEL/setup``."""
    if not unmatched_globs(globs, graded):
        return
    from kag.grading.mcq.trees import describe_source

    in_tree = setups_in(root, prefix, dataset_globs)
    check_globs("--setup", globs, "setup", tree_place(describe_source(root), dataset_globs), in_tree)


def setups_in(source: ResultSource, prefix: str, dataset_globs: Sequence[str] = ()) -> list[str]:
    """The setups of the result files of ``source`` (``LABEL/setup`` over labelled trees) in
    the ``--dataset`` folders, by name; names only, no file is read."""
    from kag.grading.mcq.trees import labelled
    from kag.results import list_results
    from kag.results.tree import matches_any

    trees = [(t.label, t.root) for t in source]
    return sorted(
        {
            f.setup if label is None else labelled(label, f.setup)
            for label, root in trees
            for f in list_results(root, prefix).files
            if matches_any(f.dataset, dataset_globs)
        }
    )


def warn_prefix(setups: Iterable[str], prefix: str, filtered: bool = False) -> None:
    """:func:`kag.grading.mcq.diagnose.prefix_hint` as a warning, when there is one."""
    from kag.grading.mcq.diagnose import prefix_hint

    hint = prefix_hint(setups, prefix, filtered)
    if hint is not None:
        from kag.console import warn

        warn(hint)


def split_list(values: Iterable[str]) -> tuple[str, ...]:
    """The items of a repeatable option that also takes commas (``--skip a,b --skip c``)."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def select_names(
    option: str, globs: Sequence[str], names: Sequence[str], kind: str, where: str
) -> tuple[str, ...]:
    """The ``names`` (in their order) that one of the shell globs of ``option`` matches;
    an exact name matches itself even when it holds ``[``. UsageError naming the globs
    that match nothing, with the names there are; no globs selects none (the caller's "all")."""
    hits = {g: [n for n in names if n == g or fnmatchcase(n, g)] for g in globs}
    missing = [g for g, matched in hits.items() if not matched]
    if missing:
        raise UsageError(unmatched_message(option, missing, kind, where, sorted(names)))
    chosen = {n for matched in hits.values() for n in matched}
    return tuple(n for n in names if n in chosen)


def tree_place(root: Path | str, dataset_globs: Sequence[str]) -> str:
    """``in ROOT``, and ``with --dataset G, …`` when the datasets were filtered: where the
    setups named by an unmatched-filter message were looked for."""
    with_datasets = ", ".join(f"--dataset {g}" for g in dataset_globs)
    return f"in {root}" + (f" with {with_datasets}" if with_datasets else "")


def parse_trees(values: Sequence[str | Path] | str | Path | None) -> ResultSource:
    """The result trees of the ``-r`` values: one unlabelled tree for none (``.``) or one
    bare ``DIR`` (setups keep their names), else one labelled tree per ``LABEL=DIR``.

    A value is ``LABEL=DIR`` when it is not an existing path and holds ``=``: split on the
    first ``=``. UsageError (exit 2) when the part before it is not a label (empty, with
    ``/``, whitespace or ``*?[]``) or nothing follows it, when bare and labelled values are
    mixed or several bare ones are given, and when a label is given twice.
    """
    from kag.grading.mcq.trees import ResultTree, check_trees, label_problem, one_tree

    if values is None or isinstance(values, (str, Path)):
        values = [] if values is None else [values]
    if not values:
        return one_tree(Path("."))
    parsed: list[tuple[str | None, str]] = []
    for value in map(str, values):
        if "=" not in value or os.path.lexists(value):
            parsed.append((None, value))
            continue
        label, _, root = value.partition("=")
        problem = label_problem(label)
        if problem is not None:
            raise UsageError(f"-r {value}: not a directory, nor LABEL=DIR: {problem}")
        if not root:
            raise UsageError(f"-r {value}: no directory after '='")
        parsed.append((label, str(Path(root))))  # normalized as a bare DIR is
    bare = [root for label, root in parsed if label is None]
    if len(parsed) == 1 and bare:
        return one_tree(Path(bare[0]))
    if len(bare) == len(parsed):
        raise UsageError(
            f"-r given {len(bare)} times without labels: name each tree, -r LABEL=DIR "
            "(its setups are reported as LABEL/setup)"
        )
    if bare:
        raise UsageError(f"-r {bare[0]}: a bare DIR cannot go with LABEL=DIR trees; label every tree")
    trees = tuple(ResultTree(label, root) for label, root in parsed if label is not None)
    check_trees(trees)
    return trees


def one_tree(values: Sequence[str | Path] | str | Path | None, command: str) -> Path:
    """The one result tree a command reads (``.`` by default); UsageError for several or
    labelled trees, which ``command`` does not report."""
    source = parse_trees(values)
    if source[0].label is None:
        return Path(source[0].root)
    if len(source) > 1:
        given = " ".join(f"-r {t.label}={t.root}" for t in source[:3]) + (" ..." if len(source) > 3 else "")
        raise UsageError(f"{command} reads one result tree: give one -r DIR, not LABEL=DIR (got {given})")
    tree = source[0]
    value = f"-r {tree.label}={tree.root}"
    if os.path.isdir(tree.root):
        raise UsageError(
            f"{command} reads one result tree: give -r DIR, not LABEL=DIR (-r {tree.root}, not {value})"
        )
    raise UsageError(
        f"{command} reads one result tree: give -r DIR, not LABEL=DIR ({value}: neither "
        f"'{tree.label}={tree.root}' nor '{tree.root}' is a directory)"
    )
