"""The one terminal helper: stdout carries results, stderr everything else."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from kag.textsafe import escape_message

if TYPE_CHECKING:
    from rich.console import Console

_state = {"verbosity": 0}


def _width() -> int | None:
    value = os.environ.get("KAG_WIDTH")
    return int(value) if value and value.isdigit() else None


def stdout_console() -> Console:
    """Console for results; no escape codes unless stdout is a terminal.

    When the reader goes away (``kag triplets | head -1``) its ``print`` raises
    ``BrokenPipeError``, which the CLI edge turns into exit 0.
    """
    from rich.console import Console

    class _ResultConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handler exits with 1, the gate-failed code: a reader leaving is no failure.
            self.quiet = True
            raise BrokenPipeError

    width = _width()
    if width is None and not sys.stdout.isatty():
        # Piped reports must not wrap at rich's 80-column default.
        width = 250
    return _ResultConsole(file=sys.stdout, width=width, soft_wrap=False, highlight=False)


def drop_stdout() -> None:
    """Point stdout at the null device once its reader has gone, so that the output still
    buffered is discarded when kag flushes on exit instead of failing again."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (a test runner's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, width=_width(), highlight=False)


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # Messages name files and setups: no control character of theirs reaches the terminal.
        return f"kag: {record.levelname.lower()}: {escape_message(record.getMessage())}"


def set_verbosity(verbosity: int) -> None:
    """verbosity = count of -v minus count of -q; 0 shows warnings, 1 info, 2 debug."""
    _state["verbosity"] = verbosity
    level = logging.WARNING
    if verbosity >= 2:
        level = logging.DEBUG
    elif verbosity == 1:
        level = logging.INFO
    elif verbosity < 0:
        level = logging.ERROR
    root = logging.getLogger("kag")
    root.setLevel(level)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root.addHandler(handler)
    root.propagate = False


def verbosity() -> int:
    return _state["verbosity"]


def error(message: str) -> None:
    """One-line error on stderr (no markup, no traceback)."""
    print(f"kag: error: {escape_message(message)}", file=sys.stderr)


def warn(message: str) -> None:
    if _state["verbosity"] >= 0:
        print(f"kag: warning: {escape_message(message)}", file=sys.stderr)


def info(message: str) -> None:
    if _state["verbosity"] >= 0:
        print(escape_message(message), file=sys.stderr)
