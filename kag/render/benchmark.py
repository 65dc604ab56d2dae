"""What `kag benchmark` and `kag generation` print: the --dry-run table of the plan, the
summary line and the endpoint lines of a run (stderr), and the result of one generation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from kag.render.formats import GenerationFormat
from kag.results import ErrorResult, Result, result_to_json
from kag.textsafe import escape_controls

if TYPE_CHECKING:
    from kag.generation.plan import Plan
    from kag.generation.runner import Summary


def render_plan(plan: Plan, resume: bool) -> str:
    """The --dry-run table (stdout): tasks per setup and dataset, and what is done."""
    header = ("setup", "dataset", "tasks", "ok", "error", "stale", "unreadable", "missing", "to run")
    rows: list[tuple[str, ...]] = [header]
    for r in plan.rows:
        rows.append(
            (
                escape_controls(r.setup),
                escape_controls(r.dataset),
                *(str(v) for v in (r.tasks, r.ok, r.errors, r.stale, r.unreadable, r.missing, r.to_run)),
            )
        )
    totals = [
        sum(getattr(r, f) for r in plan.rows)
        for f in ("tasks", "ok", "errors", "stale", "unreadable", "missing", "to_run")
    ]
    rows.append(("total", "", *(str(v) for v in totals)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [cell.rjust(widths[i + 2]) for i, cell in enumerate(row[2:])]
        lines.append("  ".join(cells).rstrip())
    mode = (
        "--continue: kept files are skipped"
        if resume
        else "without --continue every task runs (existing files are overwritten)"
    )
    lines.append(f"{len(plan.tasks)} task(s) to run; {mode}.")
    if plan.leftovers:
        lines.append(f"{len(plan.leftovers)} leftover .tmp file(s) of interrupted writes would be removed.")
    return "\n".join(lines)


def summary_line(summary: Summary) -> str:
    """The line a run ends with (stderr): what ran, what was kept or not run, how long."""
    parts = [f"{summary.done} task(s) run: {summary.ok} ok, {summary.errors} error(s)"]
    if summary.kept:
        parts[0] += f", {summary.kept} failed and kept the previous answer"
    if summary.skipped:
        parts.append(f"{summary.skipped} skipped (kept from earlier runs)")
    if summary.stale_kept:
        parts.append(f"{summary.stale_kept} stale result(s) kept (--rerun-stale re-runs them)")
    if summary.not_run:
        parts.append(f"{summary.not_run} not run")
    text = "; ".join(parts) + f"; {summary.seconds:.1f}s"
    if summary.interrupted:
        return f"kag: benchmark interrupted: {text}. Run again with --continue to resume."
    return f"kag: benchmark: {text}."


def endpoint_lines(summary: Summary) -> list[str]:
    """One stderr line per endpoint of each provider that has several URLs (redacted)."""
    lines = []
    for provider, endpoints in sorted(summary.endpoints.items()):
        for e in endpoints:
            aside = "; set aside now" if e.set_aside else ""
            lines.append(
                f"kag: provider {provider!r}: {e.url}: {e.requests} request(s),"
                f" {e.failures} connection failure(s){aside}"
            )
    return lines


def render_generation_text(result: Result) -> str:
    """The answer of one generation, or nothing for a failure (its message goes to stderr)."""
    return "" if isinstance(result, ErrorResult) else result.result + "\n"


def render_generation_json(result: Result) -> str:
    """The result file's JSON of one generation (``{"error": ...}`` for a failure), indented."""
    return orjson.dumps(result_to_json(result), option=orjson.OPT_INDENT_2).decode() + "\n"


GENERATION_RENDERERS: dict[GenerationFormat, Callable[[Result], str]] = {
    GenerationFormat.TEXT: render_generation_text,
    GenerationFormat.JSON: render_generation_json,
}
