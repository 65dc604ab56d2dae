"""`kag stats find REGEX`: regex search over the model responses of a result tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kag.commands._before import pick_option
from kag.commands._globs import tree_place, unmatched_globs, unmatched_message
from kag.commands._help import kag_command
from kag.commands._options import (
    DatasetOpt,
    FindFormatOpt,
    FindPrefixOpt,
    FindResultsOpt,
    Quiet,
    SetupOpt,
    Verbose,
)
from kag.commands._trees import one_tree
from kag.errors import UsageError
from kag.render.formats import FindFormat

if TYPE_CHECKING:
    from kag.grading.search.options import SearchOptions


def _format(value: Any) -> FindFormat:
    value = str(getattr(value, "value", value)).lower()  # `kag stats --format` is free text
    try:
        return FindFormat(value)
    except ValueError:
        raise UsageError(f"--format {value} is not available for find (text, json or jsonl)") from None


def _fzf() -> str:
    fzf = shutil.which("fzf")
    if fzf is None:
        raise UsageError(
            "--interactive needs fzf on PATH (https://github.com/junegunn/fzf, e.g. apt-get install fzf)"
        )
    return fzf


def _run_fzf(lines: list[str]) -> None:
    """The fzf browser (see compatibility in docs/architecture.md): each line is
    ``<path>\\t<shown text>``, the path hidden and ``cat``-ed into the preview pane. fzf's own exit status (Esc gives 130) is not
    ours: the search itself succeeded."""
    command = [_fzf(), "--delimiter", "\t", "--with-nth", "2..", "--preview", "cat {1}"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, encoding="utf-8", errors="replace") as proc:
        assert proc.stdin is not None
        try:
            for line in lines:
                proc.stdin.write(line + "\n")
            proc.stdin.close()
        except BrokenPipeError:  # the user left fzf before reading everything
            pass


def _warn_unmatched_filters(root: str, options: SearchOptions, searched: Iterable[str]) -> None:
    """A warning for each ``--dataset`` / ``--setup`` glob that matches nothing in the tree,
    naming what is there; the exit code stays find's own (1 when nothing matched).

    Datasets are the top-level folders (one listing). ``searched`` are the setups of the
    searched files; only when a glob matches none of them is the tree listed again, so a
    filter that works costs nothing.
    """
    from kag.console import warn
    from kag.grading.search.options import SearchOptions
    from kag.grading.search.walk import list_search_files
    from kag.results import scandir_entries

    if options.datasets:
        top = sorted(e.name for e in scandir_entries(root) if e.is_dir(follow_symlinks=False))
        missing = unmatched_globs(options.datasets, top)
        if missing:
            warn(unmatched_message("--dataset", missing, "dataset", f"in {root}", top))
        if len(missing) == len(options.datasets):
            return  # no dataset selected: every --setup would be reported, saying nothing new
    if options.setups and unmatched_globs(options.setups, searched):
        every = SearchOptions("", prefix=options.prefix, datasets=options.datasets)
        in_tree = sorted({f.setup for f in list_search_files(root, every)})
        missing = unmatched_globs(options.setups, in_tree)
        if missing:
            warn(unmatched_message("--setup", missing, "setup", tree_place(root, options.datasets), in_tree))


def _color() -> bool:
    """Whether matches are coloured, as rich decides for stdout (a terminal, FORCE_COLOR,
    TTY_COMPATIBLE, NO_COLOR); a pipe that no variable marks as a terminal is told apart
    without loading rich."""
    if "FORCE_COLOR" not in os.environ and "TTY_COMPATIBLE" not in os.environ:
        isatty = getattr(sys.stdout, "isatty", None)
        try:
            if isatty is None or not isatty():
                return False
        except ValueError:  # a closed stdout, as rich reads it
            return False
    from kag.console import stdout_console

    console = stdout_console()
    return bool(console.is_terminal and not console.no_color and console.color_system is not None)


EXAMPLES = """Examples:

\b
  kag stats find -r results 'I cannot answer'
  kag stats find -r results -i --setup 'gpt-*' -c 'answer: [A-E]'
  kag stats find -r results --invert-match -l 'answer'
  kag stats find -r results -0 'error' | xargs -0 ls -l
"""


def find(
    ctx: typer.Context,
    pattern: Annotated[
        str,
        typer.Argument(
            metavar="REGEX", help="Pattern (regex module syntax) searched in each trimmed ok.result."
        ),
    ],
    results: FindResultsOpt = None,
    prefix: FindPrefixOpt = None,
    format: FindFormatOpt = None,
    setup: SetupOpt = None,
    dataset: DatasetOpt = None,
    ignore_case: Annotated[
        bool, typer.Option("--ignore-case", "-i", help="Case-insensitive matching.")
    ] = False,
    invert: Annotated[
        # Long only: -v is verbosity on every command (see compatibility in docs/architecture.md).
        bool, typer.Option("--invert-match", help="Select responses that do NOT match.")
    ] = False,
    count: Annotated[
        bool, typer.Option("--count", "-c", help="Print the number of matching files per setup.")
    ] = False,
    files_only: Annotated[
        bool, typer.Option("--files-with-matches", "-l", help="Print only the paths of matching files.")
    ] = False,
    null: Annotated[
        bool,
        typer.Option(
            "--null",
            "-0",
            help="Print only the paths of matching files, each ended by a NUL byte (for xargs -0).",
        ),
    ] = False,
    context: Annotated[
        int, typer.Option("--context", "-C", metavar="N", help="Characters shown around a match.")
    ] = 40,
    max_count: Annotated[
        int | None, typer.Option("--max-count", metavar="N", help="At most N matches per file.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECS", help="CPU seconds of matching allowed per file.")
    ] = 1.0,
    interactive: Annotated[bool, typer.Option("--interactive", help="Browse the matches in fzf.")] = False,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", metavar="N", help="Worker processes [default: one per CPU for 1000+ files]."),
    ] = None,
    hidden: Annotated[
        bool, typer.Option("--hidden", help="Also search folders whose name starts with '.'.")
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Regex search over the model responses of a result tree (no datasets file needed).

    Options of `kag stats` given before `find` apply; the same options after `find` win.
    Exit 0 when a file matched, 1 when none did, 2 on bad usage or an invalid pattern.
    """
    from kag.console import info, warn
    from kag.grading.search.options import FileOutcome, SearchOptions
    from kag.grading.search.run import search
    from kag.render.find import View, error_files_note, final_lines, stream_lines, summary_line

    fmt = _format(pick_option(ctx, "--format", format, "text"))
    if null and (fmt is not FindFormat.TEXT or count or interactive):
        raise UsageError(
            "--null prints paths: it works with --format text only, without --count or --interactive"
        )
    files_only = files_only or null
    options = SearchOptions(
        pattern=pattern,
        prefix=pick_option(ctx, "--prefix", prefix, ""),
        ignore_case=ignore_case,
        invert=invert,
        context=context,
        max_count=max_count,
        files_only=files_only,
        timeout=timeout,
        setups=tuple(pick_option(ctx, "--setup", setup, ())),
        datasets=tuple(pick_option(ctx, "--dataset", dataset, ())),
        hidden=hidden,
    )
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be 1 or more (got {jobs})")
    if count and files_only:
        raise UsageError("--count and --files-with-matches do not go together")
    if interactive and (fmt is not FindFormat.TEXT or count):
        raise UsageError("--interactive works with --format text only, without --count")
    if interactive:
        _fzf()  # a missing fzf is an error before, not after, the search
    color = _color()
    root = str(one_tree(pick_option(ctx, "--results", results, None), "kag stats find"))
    view = View(fmt, root, color=color and not interactive, files_only=files_only, counts=count, null=null)
    end = "\0" if null else "\n"
    collected: list[str] = []  # for fzf: "<path>\t<line>"

    def stream(outcome: FileOutcome) -> None:
        for line in stream_lines(outcome, view):
            if interactive:
                collected.append(f"{outcome.file.path}\t{line}")
            else:
                sys.stdout.write(line + end)

    result = search(root, options, jobs, on_outcome=stream, keep_hits=fmt is FindFormat.JSON)
    for line in final_lines(result, view):
        sys.stdout.write(line + "\n")
    if interactive and collected:
        sys.stdout.flush()
        _run_fzf(collected)
    _warn_unmatched_filters(root, options, result.per_setup)
    if fmt is FindFormat.TEXT:
        info(summary_line(result, invert))
    elif result.error_files:
        warn(error_files_note(result))
    if not result.matches:
        raise typer.Exit(1)


def register(stats_app: typer.Typer) -> None:
    kag_command(stats_app, "find", "Regex search over the model responses of a result tree.", EXAMPLES)(find)
