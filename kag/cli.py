"""Root Typer app: global options, sub-commands, and the one place errors become exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from enum import Enum
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from kag import __version__
from kag.commands._help import KagCommand
from kag.commands._options import Quiet, Verbose
from kag.commands._values import DeferredValues
from kag.console import drop_stdout, error, set_verbosity
from kag.errors import ExitCode, KagError

# The variable the completion scripts set to ask kag for candidates (typer's naming for
# the program `kag`); given explicitly so that `python -m kag` answers them too.
COMPLETE_VAR = "_KAG_COMPLETE"


class KagGroup(DeferredValues, TyperGroup):
    """Turns library errors into a one-line message and an exit code; no tracebacks."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        # -v/-q of every level add to this, whatever an earlier call in the process set.
        set_verbosity(0)
        if complete_var is None:
            complete_var = COMPLETE_VAR
        if os.environ.get(complete_var):
            # A completion script asks for candidates: typer's answer format, which its
            # scripts (`kag completion SHELL`) read.
            from typer._completion_classes import completion_init

            completion_init()
        # Click's own standalone handling is off: the errors are turned into exit codes below.
        inner = {"standalone_mode": False, "windows_expand_args": windows_expand_args, **extra}
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, **inner)
        try:
            code = super().main(args, prog_name, complete_var, **inner)
        except Exception as exc:
            # Usage errors of the argument parser (missing option, bad value): one line, exit 2.
            if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `kag`: the help, on stderr
                print(exc.format_message(), file=sys.stderr)
                sys.exit(exc.exit_code)
            message = getattr(exc, "message", None)
            if isinstance(message, str):
                # typer validates values with pydantic, whose messages open with the
                # validator's "Value error, ": the user needs only the reason.
                exc.message = message.removeprefix("Value error, ")  # type: ignore[attr-defined]
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            text = exc.format_message()
            if type(exc).__name__ == "MissingParameter":
                # "Missing option '--nodes'." as kag words its own: "missing option '--nodes'".
                text = text[:1].lower() + text[1:].removesuffix(".")
            error(f"{text}{hint}")
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KagError as exc:
            error(str(exc))
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            error("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except BrokenPipeError:
            # The reader went away (`kag stats | head`): not an error of ours.
            drop_stdout()
            raise typer.Exit(0) from None


app = typer.Typer(
    name="kag",
    cls=KagGroup,
    help="Knowledge-Augmented Generation toolkit: run LLM setups over datasets and grade them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"kag {__version__}")
        raise typer.Exit()


@app.callback(
    epilog="""Examples:

\b
  kag benchmark -d datasets.json -b benchmark.toml -o results --parallel 4
  kag stats -d datasets.json -r results
  kag stats find -r results 'I cannot answer'
  kag completion bash > ~/.local/share/bash-completion/completions/kag

-v and -q work before or after the command name.
"""
)
def root(
    verbose: Verbose = 0,
    quiet: Quiet = 0,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """kag: run LLM setups over question datasets, then grade what they produced."""


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


COMPLETION_EXAMPLES = """Examples:

\b
  kag completion bash > ~/.local/share/bash-completion/completions/kag
  kag completion zsh > "${fpath[1]}/_kag"
  kag completion fish > ~/.config/fish/completions/kag.fish
"""


def completion(
    shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.", show_default=False)],
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Print the shell completion script for SHELL."""
    # typer's own scripts (those of its --show-completion), which ask kag through
    # COMPLETE_VAR in the format KagGroup.main answers in.
    from typer.completion import get_completion_script

    print(get_completion_script(prog_name="kag", complete_var=COMPLETE_VAR, shell=shell.value))


def _register() -> None:
    from kag.commands import (
        benchmark,
        compare,
        datasets,
        find,
        graph,
        init,
        irt2,
        judge,
        runs,
        stats,
        triplets,
        view,
    )

    stats_app = stats.register(app)
    find.register(stats_app)
    compare.register(stats_app)
    judge.register(stats_app)
    runs.register(stats_app)
    benchmark.register(app)
    graph.register(app)
    triplets.register(app)
    irt2.register(app)
    init.register(app)
    datasets.register(app)
    view.register(app)
    app.command("completion", cls=KagCommand, epilog=COMPLETION_EXAMPLES)(completion)


_register()


def main() -> None:
    """The ``kag`` console script (and ``python -m kag``).

    Once the command is done the process leaves without tearing the interpreter down:
    exit handlers run and output is flushed, then ``os._exit``. Freeing the ~350 modules
    a command loads costs about 0.1 s, a tenth of a 100,000-file search. With a thread
    still running (none of ours outlive their command) the normal exit waits for it.
    """
    failed = False
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BrokenPipeError:  # the reader went away while an option printed (`--version | true`)
        drop_stdout()
        code = 0
    except OSError as exc:  # e.g. writing the output failed (a full disk): a message, not a traceback
        error(_describe(exc))
        code, failed = int(ExitCode.USAGE), True
    _leave(code, failed)


def _describe(exc: OSError, output: bool = False) -> str:
    """One line for an OSError no command turned into a message: the file it names, else
    "cannot write the output" for a full disk (or when ``output`` says it was the output),
    else the system's words."""
    import errno

    if exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    if output or exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"cannot write the output: {exc.strerror or exc}"
    return str(exc.strerror or exc)


def _exit_code(code: object) -> int:
    """``sys.exit``'s rule: None is 0, an int is itself, anything else is printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _leave(code: int, failed: bool = False) -> NoReturn:
    """Exit handlers, then flush, then ``os._exit(code)``. A flush that fails (a full disk)
    is reported, unless ``failed`` says the output already failed and was reported."""
    import atexit
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython
        sys.exit(code)
    run_exit_handlers()  # logging.shutdown, multiprocessing and tempfile clean-ups
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: not an error of ours
        pass
    except (OSError, ValueError) as exc:  # a full disk; or stdout closed
        if isinstance(exc, OSError) and not failed:
            error(_describe(exc, output=True))
        code = code or int(ExitCode.USAGE)
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)
