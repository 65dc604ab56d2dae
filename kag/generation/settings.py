"""Generation settings of a setup beyond ``temperature`` and ``tokens`` (seed, top_p,
stop, system message, passthrough tables...), and the refusal of unknown keys in the
configuration and benchmark files (file, line, key and the nearest known key)."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kag.errors import ConfigError, toml_type_name


@dataclass(frozen=True)
class GenerationSettings:
    """A setup's sampling settings beyond ``temperature`` and ``tokens``; each None (or
    empty) is not sent. ``passthrough`` is the setup's ``options`` table (Ollama, merged into
    ``options``) or ``extra_body`` table (OpenAI-compatible, merged into the request body)."""

    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: tuple[str, ...] | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    system: str | None = None
    passthrough: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The settings given (those left unset are left out), as plain JSON values."""
        out: dict[str, Any] = {}
        for name in SETTING_KEYS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        if self.passthrough:
            out["passthrough"] = dict(self.passthrough)
        return out

    def __bool__(self) -> bool:
        return bool(self.to_json())


SETTING_KEYS = (
    "seed",
    "top_p",
    "top_k",
    "stop",
    "max_tokens",
    "presence_penalty",
    "frequency_penalty",
    "system",
)
NO_SETTINGS = GenerationSettings()


def _header_pattern(header: tuple[str, ...]) -> re.Pattern[str]:
    """A table header line ``[a.b]`` (bare or quoted parts, spaces around dots)."""
    parts = [rf"(?:{re.escape(p)}|\"{re.escape(p)}\"|'{re.escape(p)}')" for p in header]
    return re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(parts) + r"\s*\]", re.MULTILINE)


def key_line(text: str, header: tuple[str, ...], key: str) -> int | None:
    """The 1-based line of ``key = ...`` in the table ``[header]`` of the TOML ``text``
    (after the header, before the next one; else the first line of ``text`` that assigns
    it, as in an inline table), or None when it cannot be found."""
    assign = re.compile(
        rf"(?:^|[{{,\s]){_key_pattern(key)}\s*=",
    )
    lines = text.split("\n")
    match = _header_pattern(header).search(text) if header else None
    start = text.count("\n", 0, match.start()) + 1 if match else 0
    if match:
        for number in range(start, len(lines)):
            line = lines[number]
            if number > start and re.match(r"^\s*\[", line):
                break
            if assign.search(line):
                return number + 1
    for number, line in enumerate(lines):
        if assign.search(line):
            return number + 1
    return None


def _key_pattern(key: str) -> str:
    escaped = re.escape(key)
    return rf"(?:{escaped}|\"{escaped}\"|'{escaped}')"


def refuse_unknown(
    path: Path,
    where: str,
    table: Mapping[str, Any],
    known: Iterable[str],
    text: str,
    header: tuple[str, ...],
) -> None:
    """ConfigError naming the file, the line and the first unknown key of ``table``, with
    the nearest known key when one is close ("did you mean 'temperature'?")."""
    names = list(known)
    extra = sorted(set(table) - set(names))
    if not extra:
        return
    key = extra[0]
    line = key_line(text, header, key)
    at = f"line {line}: " if line is not None else ""
    close = difflib.get_close_matches(key, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(names)})"
    more = f"; also unknown: {', '.join(repr(k) for k in extra[1:])}" if len(extra) > 1 else ""
    raise ConfigError(f"{path}: {at}{where}: unknown key {key!r}{hint}{more}")


def _number(path: Path, where: str, table: Mapping[str, Any], key: str) -> float | None:
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{path}: {where}: '{key}' must be a number (got {toml_type_name(value)})")
    return float(value)


def _text(path: Path, where: str, table: Mapping[str, Any], key: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{path}: {where}: '{key}' must be a string (got {toml_type_name(value)})")
    return value


# Request keys kag writes itself: a passthrough table may not replace them.
RESERVED_BODY_KEYS = frozenset({"model", "messages", "stream"})


def _integer(path: Path, where: str, table: Mapping[str, Any], key: str, positive: bool) -> int | None:
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or (positive and value <= 0):
        kind = "a positive integer" if positive else "an integer"
        raise ConfigError(f"{path}: {where}: '{key}' must be {kind} (got {value!r})")
    return value


def _finite(
    path: Path,
    where: str,
    table: Mapping[str, Any],
    key: str,
    low: float | None = None,
    high: float | None = None,
) -> float | None:
    value = _number(path, where, table, key)
    if value is None:
        return None
    if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
        bounds = f" between {low:g} and {high:g}" if low is not None and high is not None else ""
        raise ConfigError(f"{path}: {where}: '{key}' must be a finite number{bounds} (got {table[key]!r})")
    return value


def _stop(path: Path, where: str, table: Mapping[str, Any]) -> tuple[str, ...] | None:
    if "stop" not in table:
        return None
    value = table["stop"]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise ConfigError(
            f"{path}: {where}: 'stop' must be a non-empty string or an array of them (got {value!r})"
        )
    return tuple(items)


def parse_settings(
    path: Path, where: str, table: Mapping[str, Any], provider: str, ollama: bool
) -> GenerationSettings:
    """The generation settings of the setup ``table`` whose provider ``provider`` is an
    Ollama one (``ollama``) or an OpenAI-compatible one; ConfigError for a bad value."""
    mine, other = ("options", "extra_body") if ollama else ("extra_body", "options")
    if other in table:
        kind = "an Ollama" if ollama else "an OpenAI-compatible"
        raise ConfigError(
            f"{path}: {where}: '{other}' does not apply to {kind} provider ({provider!r}); use '{mine}'"
        )
    passthrough = table.get(mine, {})
    if not isinstance(passthrough, dict):
        raise ConfigError(f"{path}: {where}: '{mine}' must be a table (got {toml_type_name(passthrough)})")
    if not ollama:
        reserved = sorted(RESERVED_BODY_KEYS & set(passthrough))
        if reserved:
            raise ConfigError(f"{path}: {where}: 'extra_body' may not set {reserved[0]!r} (kag sends it)")
        if "max_tokens" in table and "tokens" in table:
            raise ConfigError(
                f"{path}: {where}: 'tokens' and 'max_tokens' are both max_tokens for an OpenAI-compatible"
                " provider; keep one of them"
            )
    system = _text(path, where, table, "system")
    return GenerationSettings(
        seed=_integer(path, where, table, "seed", positive=False),
        top_p=_finite(path, where, table, "top_p", 0.0, 1.0),
        top_k=_integer(path, where, table, "top_k", positive=True),
        stop=_stop(path, where, table),
        max_tokens=_integer(path, where, table, "max_tokens", positive=True),
        presence_penalty=_finite(path, where, table, "presence_penalty"),
        frequency_penalty=_finite(path, where, table, "frequency_penalty"),
        system=system,
        passthrough=dict(passthrough),
    )
