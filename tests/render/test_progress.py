"""The progress displays on stderr: plain lines (not a terminal) and rich bars, for a run of
tasks (benchmark, judge) and for a job in stages (graph import)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from kag.generation.generator import TaskOutcome
from kag.render.progress import PlainProgress, RichProgress

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=120)


def screen(console: Console) -> list[str]:
    """The lines a terminal shows at the end (escape codes and redrawn lines dropped)."""
    assert isinstance(console.file, io.StringIO)
    text = ESCAPES.sub("", console.file.getvalue())
    return [line.split("\r")[-1].rstrip() for line in text.splitlines() if line.strip()]


def test_plain_lines_of_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = PlainProgress.for_run("benchmark", 4, interval=0.0)
    reporter.task_done(TaskOutcome("d/1 [s]", Path("x"), True, 1, 0.1))
    reporter.task_done(TaskOutcome("d/2 [s]", Path("y"), False, 3, 0.1, "Failed: HTTP 500"))
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("kag: progress: 1/4 done (0 error(s)), ")
    assert err[1] == "kag: warning: d/2 [s]: Failed: HTTP 500"
    assert err[2].startswith("kag: progress: 2/4 done (1 error(s)), ") and "ETA" in err[2]


def test_plain_lines_wait_for_the_interval(capsys: pytest.CaptureFixture[str]) -> None:
    """A run prints nothing before the interval (failures still warn); a stage also prints
    its last line as it ends."""
    run = PlainProgress.for_run("benchmark", 2, interval=3600.0)
    run.task_done(TaskOutcome("d/1 [s]", Path("x"), True, 1, 0.1))
    run.task_done(TaskOutcome("d/2 [s]", Path("y"), False, 1, 0.1, "boom"))
    stages = PlainProgress.for_stages({"nodes": "writing nodes"}, interval=3600.0)
    stages("nodes", 5, 10)
    stages("nodes", 10, 10)
    stages("other", 4, 4)
    assert capsys.readouterr().err.splitlines() == [
        "kag: warning: d/2 [s]: boom",
        "kag: progress: writing nodes 10/10 (100%)",
        "kag: progress: other 4/4 (100%)",
    ]


def test_rich_bar_of_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buffer)
    with RichProgress.for_run("benchmark", 2) as reporter:
        reporter.task_done(TaskOutcome("d/1 [s]", Path("x"), True, 1, 0.1))
        reporter.task_done(TaskOutcome("d/2 [s]", Path("y"), False, 2, 0.1, "Failed: HTTP 503"))
    text = buffer.getvalue()
    assert "kag: warning: d/2 [s]: Failed: HTTP 503" in text
    assert "2/2" in text and "1 error(s)" in text and "ETA" in text


@pytest.mark.parametrize("label", ["benchmark", "judge"])
def test_the_bar_of_a_run_carries_its_label(label: str) -> None:
    console = terminal()
    with RichProgress.for_run(label, 3, console=console) as reporter:
        reporter.task_done(TaskOutcome("d/1 [s]", Path("x"), True, 1, 0.1))
    last = screen(console)[-1]
    assert last.startswith(f"{label} ") and " 1/3 0 error(s) " in last


def test_stage_bars_align_their_labels_and_go_away() -> None:
    console = terminal()
    labels = {"embeddings": "embedding nodes", "relationships": "writing relationships"}
    with RichProgress.for_stages(labels, console=console) as bars:
        bars("embeddings", 2, 4)
        bars("relationships", 1, 4)
        bars.bar.refresh()
        shown = screen(console)
    assert shown[-2].startswith("      embedding nodes ") and shown[-2].endswith("2/4 0:00:00")
    assert shown[-1].startswith("writing relationships ")
    assert isinstance(console.file, io.StringIO)
    # Removed at the end (cursor up, erase the line, once per bar): the report follows on a clean screen.
    assert console.file.getvalue().endswith("\x1b[1A\x1b[2K" * 2)
