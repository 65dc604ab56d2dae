"""Options of `kag stats` given before a sub-command name (``kag stats -d FILE compare``):
after the name wins, then before it, then the default."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from kag.errors import UsageError


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
