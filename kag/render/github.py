"""GitHub Actions output: the job summary (markdown appended to ``$GITHUB_STEP_SUMMARY``)
and workflow commands (``::error title=…::…``, ``::warning::…``) that become annotations.

The summary holds the ranked table, the differences against the baseline with their
p-values, the largest flips and the data-quality notes; it is cut to stay under
:data:`MAX_SUMMARY_BYTES` (GitHub refuses a step summary above 1 MiB). A workflow
command's message and properties are escaped by GitHub's rules (``%``, CR and LF; in a
property also ``:`` and ``,``), and ``##[`` is broken, so no name or response can end
the command early or start another one; names in the summary are escaped so that they add
no HTML, link or image (:func:`~kag.textsafe.escape_markdown`); at most :data:`MAX_ANNOTATIONS` of each kind are written (GitHub
shows 10 of each per step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kag.render.table import Table, table_markdown
from kag.textsafe import escape_controls, escape_markdown, markdown_code, neutralize_commands

if TYPE_CHECKING:
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.mcq.summary import Summary

#: GitHub's limit on one step's summary is 1 MiB; kag's summary stays below it.
MAX_SUMMARY_BYTES = (1 << 20) - 1024

#: Annotations of each kind (errors, warnings) a run writes at most.
MAX_ANNOTATIONS = 10

#: Questions named in the summary's flip list.
MAX_LISTED = 20


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (GitHub's ``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, and ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, title: str | None = None) -> str:
    """``::command title=…::message`` (no properties without a title); an older-form
    command (``##[…]``) in the title or message is broken (:func:`neutralize_commands`)."""
    props = f" title={neutralize_commands(escape_property(title))}" if title else ""
    return f"::{command}{props}::{neutralize_commands(escape_data(message))}"


def workflow_annotations(errors: Sequence[tuple[str, str]], warnings: Sequence[str]) -> list[str]:
    """The workflow commands of the gate failures (title, message) and of the warnings,
    :data:`MAX_ANNOTATIONS` of each; the last warning slot says how many were left out."""
    lines = [workflow_command("error", message, title) for title, message in errors[:MAX_ANNOTATIONS]]
    shown = list(warnings)
    if len(shown) > MAX_ANNOTATIONS:
        left = len(shown) - (MAX_ANNOTATIONS - 1)
        shown = [*shown[: MAX_ANNOTATIONS - 1], f"{left} more warning(s): see the job log"]
    lines.extend(workflow_command("warning", w) for w in shown)
    return lines


def _flips_table(run: ComparisonRun, now_then: bool) -> str | None:
    rows = sorted(
        (c for c in run.comparisons if c.setup_only or c.baseline_only),
        key=lambda c: (-(c.setup_only + c.baseline_only), c.setup),
    )[:MAX_LISTED]
    if not rows:
        return None
    gained, lost = (
        ("right now, wrong before", "wrong now, right before")
        if now_then
        else ("+ setup only", "- baseline only")
    )
    table = Table(
        ("SETUP", gained, lost, "PAIRED"),
        tuple((c.setup, str(c.setup_only), str(c.baseline_only), str(c.n)) for c in rows),
        ("l", "r", "r", "r"),
    )
    return table_markdown(table)


def _md(text: str) -> str:
    return escape_markdown(escape_controls(text))


def summary_markdown(
    title: str,
    summary: Summary | None = None,
    run: ComparisonRun | None = None,
    *,
    against: bool = False,
    lost: Sequence[tuple[str, str, str]] = (),
    gates: Sequence[tuple[str, str | None]] = (),
    notes: Sequence[str] = (),
) -> str:
    """The step summary: ``title``, the gates' verdicts, the ranked table of ``summary``,
    the comparisons of ``run`` (``against``: each setup against its earlier run), the
    largest flips, the questions ``lost`` (right before, not now) and the ``notes``."""
    from kag.render.compare import comparisons_markdown
    from kag.render.stats import render_markdown

    parts = [f"## {title}\n"]
    if gates:
        table = Table(
            ("GATE", "RESULT"),
            tuple((name, "passed" if verdict is None else f"FAILED: {verdict}") for name, verdict in gates),
            ("l", "l"),
        )
        parts.append(table_markdown(table) + "\n")
    if summary is not None:
        parts.append(render_markdown(summary))
    if run is not None and run.comparisons:
        parts.append(comparisons_markdown(run))
        flips = _flips_table(run, against)
        if flips is not None:
            parts.append(f"### Largest flips\n\n{flips}\n")
    if lost:
        lines = [f"- {markdown_code(s)}: {_md(d)}/{_md(q)}" for s, d, q in lost[:MAX_LISTED]]
        if len(lost) > MAX_LISTED:
            lines.append(f"- … {len(lost) - MAX_LISTED} more")
        parts.append("### Right before, not now\n\n" + "\n".join(lines) + "\n")
    if notes:
        parts.append("### Data quality\n\n" + "\n".join(f"- {_md(n)}" for n in notes) + "\n")
    return cap_summary("\n".join(p.rstrip("\n") + "\n" for p in parts))


def cap_summary(text: str, limit: int = MAX_SUMMARY_BYTES) -> str:
    """``text`` cut at a line end so that it and a closing note fit in ``limit`` UTF-8 bytes."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = "\n_The summary was cut to stay under GitHub's 1 MiB limit; the full report is in the job's artifacts._\n"
    room = limit - len(note.encode("utf-8"))
    cut = data[:room]
    end = cut.rfind(b"\n")
    return cut[: end + 1 if end >= 0 else 0].decode("utf-8", errors="ignore") + note
