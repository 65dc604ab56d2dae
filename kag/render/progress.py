"""Progress of a run of model calls (`kag benchmark`, `kag generation`, `kag stats judge`) on stderr:
a rich bar on a terminal, periodic plain lines otherwise."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Self

from kag.console import info, stderr_console, verbosity, warn

if TYPE_CHECKING:
    from kag.generation.generator import RetryNotice, TaskOutcome


PROGRESS_INTERVAL = 10.0  # seconds between plain progress lines when stderr is not a terminal


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class PlainReporter:
    """Progress as periodic log lines on stderr (for logs and CI, no escape codes)."""

    def __init__(self, total: int, interval: float = PROGRESS_INTERVAL) -> None:
        self.total = total
        self.interval = interval
        self.done = self.errors = 0
        self.started = self.last = time.monotonic()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (
            f", ETA {_duration((self.total - self.done) / rate)}"
            if rate > 0 and self.done < self.total
            else ""
        )
        done = f"{self.done}/{self.total} done ({self.errors} error(s))"
        return f"kag: progress: {done}, {rate:.2f} task(s)/s{eta}"

    def task_done(self, outcome: TaskOutcome) -> None:
        self.done += 1
        if not outcome.ok:
            self.errors += 1
            warn(f"{outcome.label}: {outcome.error}")
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            info(self.line())

    def retrying(self, notice: RetryNotice) -> None:
        if verbosity() >= 1:
            info(
                f"kag: retry: {notice.label}: attempt {notice.attempt} failed ({notice.reason}); "
                f"retrying in {notice.delay:.1f}s"
            )


class RichReporter:
    """A progress bar on stderr (terminals only): done/total, errors, rate, ETA."""

    def __init__(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("benchmark"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[errors]} error(s)"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=stderr_console(),
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = self.progress.add_task("benchmark", total=total, errors=0, rate="")
        self.errors = 0
        self.done = 0
        self.started = time.monotonic()

    def __enter__(self) -> Self:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def task_done(self, outcome: TaskOutcome) -> None:
        self.done += 1
        if not outcome.ok:
            self.errors += 1
            if verbosity() >= 0:
                self.progress.console.print(f"kag: warning: {outcome.label}: {outcome.error}", markup=False)
        elapsed = time.monotonic() - self.started
        rate = f"{self.done / elapsed:.2f}/s" if elapsed > 0 else ""
        self.progress.update(self.task, advance=1, errors=self.errors, rate=rate)

    def retrying(self, notice: RetryNotice) -> None:
        if verbosity() >= 1:
            self.progress.console.print(
                f"kag: retry: {notice.label}: attempt {notice.attempt} failed ({notice.reason}); "
                f"retrying in {notice.delay:.1f}s",
                markup=False,
            )
