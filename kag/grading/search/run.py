"""Regex search over the model responses of a result tree (`kag stats find`).

Walks every ``<prefix>…json`` regular file below the results folder, at any depth and
without following symbolic links (:func:`kag.results.iter_result_files_deep`), reads it
with the verdict of :func:`kag.results.parse_result` (:func:`parse_response`), and
matches the pattern against the trimmed ``ok.result``. Every walked file that passes the ``--setup``/``--dataset`` filters counts
in ``total``; unreadable files and ``error`` files hold no response and are skipped.

Patterns use the ``regex`` module's syntax. Matching one file has a CPU-time budget
(``timeout``, the ``regex`` module's own ``timeout=`` argument, which measures the CPU
time of the whole scan of that file): a pathological pattern such as ``(a+)+$`` is cut
on the files where it explodes, reported for those files, and the search goes on.

For speed the tree is cut into units (the question folders, :func:`kag.results.tree.iter_units`) that a
pool of processes lists and searches chunk by chunk; the chunks come back in order, so
outcomes, hits and warnings always come out sorted by path whatever the number of
workers.

Nothing here prints: warnings go to ``logging.getLogger(__name__)`` (rendered as
``kag: warning: …`` by the CLI), results are returned as frozen dataclasses.
"""

from __future__ import annotations

__all__ = ["search"]

import logging
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from kag.grading.search.match import Matcher, alternatives_of, exact_of
from kag.grading.search.options import (
    FileOutcome,
    FileStatus,
    Hit,
    SearchOptions,
    SearchResult,
    SetupCount,
    compile_pattern,
)
from kag.grading.search.walk import Job, iter_chunks, to_outcome
from kag.results.tree import glob_filter, iter_units
from kag.textsafe import escape_controls

log = logging.getLogger("kag.grading.search")


class _Tally:
    def __init__(self, keep_hits: bool) -> None:
        self.keep_hits = keep_hits
        self.total = 0
        self.setup_totals: Counter[str] = Counter()
        self.setup_matches: Counter[str] = Counter()
        self.paths: list[str] = []
        self.hits: list[Hit] = []
        self.unreadable: list[str] = []
        self.error_files = 0
        self.timed_out: list[str] = []

    def count(self, totals: dict[str, int]) -> None:
        self.total += sum(totals.values())
        self.setup_totals.update(totals)

    def add(self, outcome: FileOutcome) -> None:
        if outcome.status is FileStatus.MATCHED:
            self.add_match(outcome)
        elif outcome.status is FileStatus.UNREADABLE:
            self.unreadable.append(outcome.file.path)
        elif outcome.status is FileStatus.ERROR_RESULT:
            self.error_files += 1
        if outcome.timed_out:
            self.timed_out.append(outcome.file.path)

    def add_match(self, outcome: FileOutcome) -> None:
        """:meth:`add` of a selected file that did not time out (the common outcome, told
        apart by the caller)."""
        file = outcome.file
        self.setup_matches[file.setup] += 1
        self.paths.append(file.path)
        if self.keep_hits:
            self.hits.extend(outcome.hits)

    def result(self) -> SearchResult:
        return SearchResult(
            total=self.total,
            paths=tuple(self.paths),
            hits=tuple(self.hits),
            unreadable=tuple(self.unreadable),
            error_files=self.error_files,
            timed_out=tuple(self.timed_out),
            per_setup={s: SetupCount(n, self.setup_matches[s]) for s, n in sorted(self.setup_totals.items())},
        )


def _report(outcome: FileOutcome, timeout: float) -> None:
    if outcome.status is FileStatus.MATCHED and not outcome.timed_out:  # most outcomes: nothing to say
        return
    if outcome.status is FileStatus.UNREADABLE:
        log.warning(
            "%s: unreadable result file, skipped: %s", escape_controls(outcome.file.path), outcome.message
        )
    elif outcome.status is FileStatus.ERROR_RESULT:
        log.info("%s: error result file, skipped (no response to search)", escape_controls(outcome.file.path))
    elif outcome.timed_out and outcome.hits:
        log.warning(
            "%s: pattern timed out (--timeout %g s of CPU) after %d match(es); later ones not shown",
            escape_controls(outcome.file.path),
            timeout,
            len(outcome.hits),
        )
    elif outcome.timed_out:
        log.warning(
            "%s: pattern timed out (--timeout %g s of CPU), file skipped",
            escape_controls(outcome.file.path),
            timeout,
        )


def search(
    root: str | os.PathLike[str],
    options: SearchOptions,
    jobs: int | None = None,
    on_outcome: Callable[[FileOutcome], Any] | None = None,
    keep_hits: bool = True,
) -> SearchResult:
    """Search every file of the tree (see the module docstring) and return the counts and
    hits, sorted by path.

    ``jobs``: None = one process per CPU once there are ``POOL_MIN_FILES`` files or more;
    1 = this process only; n > 1 = a pool of n processes whatever the file count.

    ``on_outcome`` is called, in path order and as soon as each is known, for every file
    with something to report (selected, unreadable, ``error`` or timed out) so a caller
    can stream output before the search ends; files searched without a hit are only
    counted. Unreadable and timed-out files are warned about one by one; ``error`` files
    are listed at info level (``-v``) and counted in ``SearchResult.error_files`` (the
    caller says so once).

    A file whose path is not valid UTF-8 is skipped, with one warning per such folder or
    file, and not counted: no output could name it exactly (JSON holds UTF-8 only).

    ``keep_hits=False`` leaves ``SearchResult.hits`` empty: a caller that streams the hits
    through ``on_outcome`` need not hold millions of them (``-C0 .`` on a large tree).

    Raises UsageError for an invalid pattern (before any file is read) and InputError
    when ``root`` is not a folder.
    """
    pattern = compile_pattern(options.pattern, options.ignore_case)
    matcher = Matcher(
        pattern,
        options.invert,
        options.context,
        options.hits_per_file,
        options.timeout,
        alternatives=alternatives_of(options.pattern, options.ignore_case),
        exact=exact_of(options.pattern, options.ignore_case),
    )
    job = Job(os.fspath(root), options, matcher)
    units = iter_units(
        job.root, options.prefix, keep_top=glob_filter(options.datasets), hidden=options.hidden
    )
    tally = _Tally(keep_hits)
    chunks = iter_chunks(units, job, jobs)
    warned_bad: str | None = None
    matched = FileStatus.MATCHED
    try:  # closed at once on any exit, so that the workers stop with the consumer
        for totals, found in chunks:
            tally.count(totals)
            for entry, raw in found:
                outcome = to_outcome(entry, raw)
                if outcome.status is matched and not outcome.timed_out:  # most outcomes: nothing to warn of
                    tally.add_match(outcome)
                    if on_outcome is not None:
                        on_outcome(outcome)
                    continue
                if outcome.status is FileStatus.BAD_NAME:
                    # Paths come sorted: the files below one bad folder follow each other.
                    if outcome.message != warned_bad:
                        warned_bad = outcome.message
                        log.warning(
                            "%s: skipped: its name is not valid UTF-8", escape_controls(outcome.message or "")
                        )
                    continue
                _report(outcome, options.timeout)
                tally.add(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
    finally:
        chunks.close()
    return tally.result()
