"""Progress of the long commands on stderr: a rich bar on a terminal, plain lines otherwise.

One display per medium, each fed in either of two ways:

- a run of tasks (`kag benchmark`, `kag generation`, `kag stats judge`): the display is the
  generator's reporter (``task_done``, ``retrying``) and counts the tasks, their errors, rate and ETA;
- a job in stages (`kag graph import`): the display is called as ``progress(stage, done, total)``
  and counts each stage with the share done; a plain line also marks the end of each stage.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Self

from kag.console import info, stderr_console, verbosity
from kag.textsafe import escape_message

if TYPE_CHECKING:
    from rich.console import Console

    from kag.generation.generator import RetryNotice, TaskOutcome


PROGRESS_INTERVAL = 10.0  # seconds between plain progress lines when stderr is not a terminal

Kind = Literal["run", "stages"]

# The stages of `kag graph import` (as the importer names them), under the names shown.
IMPORT_STAGES = {
    "embeddings": "embedding nodes",
    "nodes": "writing nodes",
    "relationships": "writing relationships",
}


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class _Count:
    """One count towards a total: the tasks of a run, or one stage of a job."""

    label: str
    total: int
    done: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0


class _Progress(ABC):
    """The counts both displays keep, and the two ways of feeding them; the displays differ only
    in how a count is shown (``_added``, ``_show``) and where a message goes (``_say``)."""

    def __init__(self, kind: Kind, labels: Mapping[str, str], total: int) -> None:
        self.kind = kind
        self.labels = labels
        self.counts: dict[str, _Count] = {}
        if kind == "run":
            (self.run_key,) = labels
            self.counts[self.run_key] = _Count(labels[self.run_key], total)

    @classmethod
    def for_run(cls, label: str, total: int, **options: Any) -> Self:
        """The display of a run of ``total`` tasks named ``label`` (``options``: the display's own)."""
        return cls("run", {label: label}, total, **options)

    @classmethod
    def for_stages(cls, labels: Mapping[str, str], **options: Any) -> Self:
        """The display of a job in stages, each under its label in ``labels`` (its own name
        when it has none)."""
        return cls("stages", labels, 0, **options)

    def _added(self, key: str, count: _Count) -> None:
        pass

    @abstractmethod
    def _show(self, key: str, count: _Count, *, finished: bool) -> None: ...

    @abstractmethod
    def _say(self, message: str) -> None: ...

    def task_done(self, outcome: TaskOutcome) -> None:
        count = self.counts[self.run_key]
        count.done += 1
        if not outcome.ok:
            count.errors += 1
            if verbosity() >= 0:
                self._say(f"kag: warning: {outcome.label}: {outcome.error}")
        self._show(self.run_key, count, finished=False)

    def retrying(self, notice: RetryNotice) -> None:
        if verbosity() >= 1:
            self._say(
                f"kag: retry: {notice.label}: attempt {notice.attempt} failed ({notice.reason}); "
                f"retrying in {notice.delay:.1f}s"
            )

    def __call__(self, stage: str, done: int, total: int) -> None:
        count = self.counts.get(stage)
        if count is None:
            count = self.counts[stage] = _Count(self.labels.get(stage, stage), total)
            self._added(stage, count)
        count.done, count.total = done, total
        self._show(stage, count, finished=done >= total)


class PlainProgress(_Progress):
    """Progress as plain lines on stderr (logs and CI, no escape codes), at most one every
    ``interval`` seconds (and one when a stage ends)."""

    def __init__(
        self, kind: Kind, labels: Mapping[str, str], total: int = 0, interval: float | None = None
    ) -> None:
        super().__init__(kind, labels, total)
        # Read at construction, so that a test can shorten it for the whole module.
        self.interval = PROGRESS_INTERVAL if interval is None else interval
        self.last = time.monotonic()

    def line(self, count: _Count) -> str:
        """The line of one count: done/total, errors, rate and ETA for a run; the stage's
        label, done/total and percent for a stage."""
        if self.kind == "stages":
            percent = 100 * count.done // count.total if count.total else 100
            return f"kag: progress: {count.label} {count.done}/{count.total} ({percent}%)"
        rate = count.rate()
        eta = (
            f", ETA {_duration((count.total - count.done) / rate)}"
            if rate > 0 and count.done < count.total
            else ""
        )
        done = f"{count.done}/{count.total} done ({count.errors} error(s))"
        return f"kag: progress: {done}, {rate:.2f} task(s)/s{eta}"

    def _show(self, key: str, count: _Count, *, finished: bool) -> None:
        now = time.monotonic()
        if finished or now - self.last >= self.interval:
            self.last = now
            info(self.line(count))

    def _say(self, message: str) -> None:
        info(message)


class RichProgress(_Progress):
    """A progress bar on stderr (terminals only): one bar for a run (done/total, errors, rate,
    elapsed, ETA; left on screen), one per stage for a job (done/total, elapsed; removed at the end)."""

    def __init__(
        self, kind: Kind, labels: Mapping[str, str], total: int = 0, console: Console | None = None
    ) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        super().__init__(kind, labels, total)
        width = max(map(len, labels.values()), default=0)
        columns: list[ProgressColumn] = [
            TextColumn(f"{{task.description:>{width}}}"),
            BarColumn(),
            MofNCompleteColumn(),
        ]
        if kind == "run":
            columns += [
                TextColumn("{task.fields[errors]} error(s)"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
            ]
        else:
            columns.append(TimeElapsedColumn())
        self.bar = Progress(
            *columns,
            console=console or stderr_console(),
            transient=kind == "stages",
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.tasks: dict[str, Any] = {}
        for key, count in self.counts.items():
            self._added(key, count)

    def __enter__(self) -> Self:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def _added(self, key: str, count: _Count) -> None:
        self.tasks[key] = self.bar.add_task(count.label, total=count.total, errors=0, rate="")

    def _show(self, key: str, count: _Count, *, finished: bool) -> None:
        rate = f"{count.rate():.2f}/s" if count.done else ""
        self.bar.update(self.tasks[key], completed=count.done, errors=count.errors, rate=rate)

    def _say(self, message: str) -> None:
        # The same escaping as the plain lines: a label or an error may hold control characters.
        self.bar.console.print(escape_message(message), markup=False)


def _on_terminal(something_to_count: bool) -> bool:
    return sys.stderr.isatty() and something_to_count and verbosity() >= 0


@contextmanager
def run_progress(label: str, total: int) -> Iterator[PlainProgress | RichProgress]:
    """The progress of a run of ``total`` tasks: a bar named ``label`` when stderr is a terminal
    (and kag is not quiet and there is a task), plain lines otherwise."""
    if _on_terminal(total > 0):
        with RichProgress.for_run(label, total) as bar:
            yield bar
    else:
        yield PlainProgress.for_run(label, total)


@contextmanager
def stage_progress(labels: Mapping[str, str]) -> Iterator[PlainProgress | RichProgress]:
    """The progress of a job in stages, each shown under its label in ``labels`` (its own name
    when it has none): a bar per stage when stderr is a terminal, plain lines otherwise."""
    if _on_terminal(True):
        with RichProgress.for_stages(labels) as bars:
            yield bars
    else:
        yield PlainProgress.for_stages(labels)
