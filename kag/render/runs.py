"""`kag stats runs`: the run records of a result tree as a text table or JSON."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from kag.render.formats import RunsFormat
from kag.results.runs import RunRecord
from kag.textsafe import neutralize_commands

HEADER = ("started", "finished", "kag", "setups", "ok", "error", "kept", "not run", "commit")


def _count(tasks: Any, key: str) -> str:
    value = tasks.get(key) if isinstance(tasks, dict) else None
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _text(value: Any) -> str:
    # One line per record, whatever a hand-edited file holds, and no workflow command in a CI log.
    return neutralize_commands("".join(c if c.isprintable() else "?" for c in str(value)))


def run_row(record: RunRecord) -> tuple[str, ...]:
    """The cells of one record under :data:`HEADER` (``?`` where the file holds no such value)."""
    data = record.data
    setups = data.get("setups")
    names = ",".join(_text(s) for s in setups) if isinstance(setups, list) else "?"
    git = data.get("git")
    commit = git.get("commit") if isinstance(git, dict) else None
    short = ""
    if isinstance(commit, str):
        short = _text(commit[:10]) + ("+" if isinstance(git, dict) and git.get("dirty") else "")
    tasks = data.get("tasks")
    return (
        _text(record.started) or "?",
        _text(record.finished) if record.finished is not None else "not finished",
        _text(data.get("kag_version", "?")),
        names,
        *(_count(tasks, key) for key in ("ok", "error", "kept", "not_run")),
        short,
    )


def render_runs_text(records: Sequence[RunRecord]) -> str:
    """One line per record, oldest first; ``+`` after the commit marks a dirty work tree."""
    if not records:
        return "no run records (kag benchmark writes them in .kag/runs/)"
    rows = [HEADER, *(run_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    right = {4, 5, 6, 7}
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def render_runs_json(records: Sequence[RunRecord]) -> str:
    """The list of the records, each as its file holds it plus its file name (``"file"``)."""
    return orjson.dumps([{"file": r.name, **r.data} for r in records], option=orjson.OPT_INDENT_2).decode()


RENDERERS: dict[RunsFormat, Callable[[Sequence[RunRecord]], str]] = {
    RunsFormat.TEXT: render_runs_text,
    RunsFormat.JSON: render_runs_json,
}
