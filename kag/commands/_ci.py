"""`--summary` and `--annotations`: the GitHub Actions outputs of `kag stats` and `kag stats compare`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer

from kag.errors import InputError, UsageError

SummaryOpt = Annotated[
    Path | None,
    typer.Option(
        "--summary",
        metavar="FILE",
        help="Append a markdown summary to FILE [default: $GITHUB_STEP_SUMMARY when set].",
        show_default=False,
    ),
]
AnnotationsOpt = Annotated[
    str | None,
    typer.Option(
        "--annotations",
        metavar="KIND",
        help="github: workflow commands for gate failures and notes on stderr; none: off "
        "[default: github when GITHUB_ACTIONS=true].",
        show_default=False,
    ),
]


def ci_outputs(
    summary_file: Path | None,
    annotate: str | None,
    markdown: Callable[[], str],
    gates: Sequence[tuple[str, str | None]],
    notes: Sequence[str] = (),
) -> None:
    """Append the summary ``markdown()`` to ``summary_file`` (else ``$GITHUB_STEP_SUMMARY``
    when set) and write the workflow commands of the failed ``gates`` and the ``notes`` on
    stderr when ``annotate`` (``--annotations``) is github (default: when ``GITHUB_ACTIONS`` is true)."""
    from kag.render.github import workflow_annotations

    if annotate not in (None, "github", "none"):
        raise UsageError(f"--annotations must be github or none (got {annotate!r})")
    target = summary_file if summary_file is not None else os.environ.get("GITHUB_STEP_SUMMARY") or None
    if target is not None:
        data = markdown().encode("utf-8")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            raise InputError(f"{target}: cannot write the summary: {exc.strerror}") from None
    on = annotate == "github" or (annotate is None and os.environ.get("GITHUB_ACTIONS") == "true")
    if on:
        failed = [(f"kag {name}", verdict) for name, verdict in gates if verdict is not None]
        for line in workflow_annotations(failed, list(notes)):
            print(line, file=sys.stderr)
