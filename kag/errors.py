"""Library errors and the exit codes they become at the CLI edge."""

from __future__ import annotations

from enum import IntEnum


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


# The TOML names of the types tomllib gives, for messages that say what a key held instead.
_TOML_TYPE_NAMES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "float",
    str: "string",
    list: "array",
    dict: "table",
}


def toml_type_name(value: object) -> str:
    """The TOML name of ``value``'s type (``table``, ``array``, ...); for a type TOML does
    not have (a date, None), the Python name."""
    return _TOML_TYPE_NAMES.get(type(value), type(value).__name__)
