"""Library errors and the exit codes they become at the CLI edge."""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path


class ExitCode(IntEnum):
    """Exit codes shared by every command (documented in the README)."""

    OK = 0
    GATE = 1  # a gate failed (--fail-under, --fail-on-error) or `find` matched nothing
    USAGE = 2  # bad usage or bad input
    INTERRUPTED = 130


class KagError(Exception):
    """An error a user can act on; its message names the file, key or line."""

    exit_code: ExitCode = ExitCode.USAGE


class InputError(KagError):
    """An input file is missing, unreadable or malformed."""


class ConfigError(KagError):
    """The configuration (TOML, templates, components) is invalid."""


class UsageError(KagError):
    """Options that do not fit together or have invalid values."""


class GateFailed(KagError):
    """A CI gate failed; the message says which."""

    exit_code = ExitCode.GATE


def read_text_file(path: Path, what: str, error: type[KagError], *, universal_newlines: bool = False) -> str:
    """The UTF-8 text of ``path``, or ``error`` naming the file and ``what`` it is (not found,
    a directory, not UTF-8 text at byte N, or the OS reason). ``universal_newlines`` reads
    through :meth:`Path.read_text` (CRLF and CR become LF); otherwise the bytes are decoded as
    they are."""
    try:
        if universal_newlines:
            return path.read_text(encoding="utf-8")
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise error(f"{path}: {what} is a directory") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror}") from None
