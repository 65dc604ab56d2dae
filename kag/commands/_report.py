"""Writing a report: stdout or ``-o FILE`` (a pipe or a device in place), the HTML page
under its header, and the warnings every report gives (few graded files)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kag.errors import InputError, UsageError

if TYPE_CHECKING:
    from kag.grading.compare.analysis import Analysis
    from kag.grading.compare.records import AnswerSet
    from kag.grading.mcq.summary import Summary
    from kag.grading.mcq.trees import ResultSource


def html_report(
    answers: AnswerSet,
    datasets: str | Path,
    source: ResultSource,
    prefix: str,
    *,
    compare: bool = False,
    max_flips: int = 50,
    **options: Any,
) -> tuple[str, Analysis]:
    """:func:`analyse_answers` with ``options``, then :func:`html_page` of its analysis:
    the page and the analysis (whose comparisons a gate may read)."""
    analysis = analyse_answers(answers, **options)
    page = html_page(answers, analysis, datasets, source, prefix, compare=compare, max_flips=max_flips)
    return page, analysis


def analyse_answers(answers: AnswerSet, **options: Any) -> Analysis:
    """:func:`kag.grading.compare.analyse` of ``answers`` with ``options`` (``baseline``,
    ``alpha``, ``n_resamples``, ``seed``, ``native``); each note of the analysis is warned."""
    from kag.console import warn
    from kag.grading.compare import analyse

    analysis = analyse(answers, **options)
    for note in analysis.notes:
        warn(note)
    return analysis


def html_page(
    answers: AnswerSet,
    analysis: Analysis,
    datasets: str | Path,
    source: ResultSource,
    prefix: str,
    *,
    compare: bool = False,
    max_flips: int = 50,
) -> str:
    """The HTML page of ``answers`` and their ``analysis``
    (:func:`kag.render.html.render_html_report`) under its header (datasets file, trees,
    prefix, kag version), titled as a comparison for ``kag stats compare`` (``compare``)."""
    from kag import __version__
    from kag.grading.mcq.trees import describe_source
    from kag.render.html import COMPARE_TITLE, STATS_TITLE, PageMeta, render_html_report

    trees = tuple((t.label, t.root) for t in source if t.label is not None)
    meta = PageMeta(
        runs=_run_rows(source),
        title=COMPARE_TITLE if compare else STATS_TITLE,
        datasets=str(datasets),
        results=describe_source(source),
        prefix=prefix or None,
        version=__version__,
        trees=trees,
    )
    return render_html_report(answers, analysis, meta, max_flips=max_flips)


def small_samples_warning(summary: Summary) -> str | None:
    """The warning naming the setups whose accuracy rests on few graded files, or None."""
    from kag.grading.mcq.summary import MIN_SAMPLE, small_samples
    from kag.render.stats import small_samples_note

    smalls = small_samples(summary)
    return small_samples_note(smalls, MIN_SAMPLE) if smalls else None


def warn_small_samples(summary: Summary) -> None:
    """One warning naming the setups whose accuracy rests on few graded files."""
    from kag.console import warn

    note = small_samples_warning(summary)
    if note:
        warn(note)


def check_page_output(html: bool, output: Path | None) -> None:
    """UsageError (exit 2) for ``--format html`` without ``-o`` when stdout is a terminal: a
    whole page of markup is no use there (a pipe or a redirection still gets it)."""
    if html and output is None and sys.stdout.isatty():
        raise UsageError(
            "--format html writes a whole HTML page: give -o FILE (or redirect stdout to a file)"
        )


def emit_report(text: str, output: Path | None) -> None:
    """The report on stdout (ending in a newline), or written atomically to ``output``."""
    from kag.console import info

    if text and not text.endswith("\n"):
        text += "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_report(str(output), text)
        info(f"Wrote {output}")


def write_report(path: str, text: str) -> None:
    """Write a report file through :func:`kag.results.write_output`: a regular file atomically
    (an exclusive temporary, no link followed, rename), a pipe or a device in place;
    InputError naming the path."""
    from kag.results import NoSpace, write_output  # not imported by `kag --help`

    try:
        write_output(path, (text.encode("utf-8"),))
    except (OSError, NoSpace) as exc:
        raise InputError(f"{path}: cannot write the report: {exc.strerror}") from None


def _run_rows(source: ResultSource) -> tuple[tuple[str, ...], ...]:
    """The rows of the run records of each graded tree (its label first among several)."""
    from kag.render.runs import run_row
    from kag.results.runs import read_run_records

    return tuple(
        run_row(r) if t.label is None else (t.label, *run_row(r))
        for t in source
        for r in read_run_records(t.root)
    )
