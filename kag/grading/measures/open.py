"""Open questions (``open``): EM and token F1 of the files of open questions, each file
graded by :func:`kag.grading.open_grading.grade_open_response` (an error file scores 0 on
both). Per block the means over every graded file, error files included:
EM = Σ EM / total, F1 = Σ F1 / total.

``open_f1`` is the one float counter of a block: the walk merges the tallies in a fixed
order, so that the sum does not depend on the number of workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kag.grading.measures.declarations import TEXT_MD, Block, Column, JsonKey
from kag.grading.measures.registry import Counters, Measure, merge_first, register
from kag.grading.percent import pct
from kag.grading.record import GradedFile


@dataclass(slots=True)
class OpenCounts(Counters):
    """The open-answer sums of a block: files, error files, EM and F1 sums."""

    open_total: int = 0
    open_errors: int = 0
    open_exact: int = 0
    open_f1: float = 0.0


def add_open(counts: OpenCounts, exact: float, f1: float, error: bool) -> None:
    """Count one graded open-answer file (an error file scores 0 on both)."""
    counts.open_total += 1
    counts.open_errors += error
    counts.open_exact += int(exact)
    counts.open_f1 += f1


def add_open_record(counts: OpenCounts, graded: GradedFile) -> None:
    """Count the record of one open question's file (its EM and F1; an error file 0 on both)."""
    add_open(counts, graded.exact_match or 0.0, graded.f1 or 0.0, graded.response is None)


@dataclass(frozen=True, slots=True)
class OpenMetrics:
    """The open-answer numbers of one block: files graded, error files, mean EM and mean F1."""

    total: int
    errors: int
    exact_match: float
    f1: float


def open_metrics(m: OpenCounts) -> OpenMetrics | None:
    """The open-answer block of ``m``: means over ``open_total`` files; None when it has none."""
    if m.open_total == 0:
        return None
    return OpenMetrics(m.open_total, m.open_errors, m.open_exact / m.open_total, m.open_f1 / m.open_total)


def open_to_json(b: Block) -> dict[str, Any] | None:
    """The ``open`` block: ``{total, errors, exact_match, f1}`` (means over total), or None."""
    o = b.metrics.open_answers
    if o is None:
        return None
    return {"total": o.total, "errors": o.errors, "exact_match": o.exact_match, "f1": o.f1}


def _has_open(b: Block) -> bool:
    return b.report.scorable_open_questions is not None


def _cell(value: Callable[[OpenMetrics], str]) -> Callable[[Block], str | None]:
    """A cell of the open-answer table; None for a block without open-question files (no row)."""

    def cell(b: Block) -> str | None:
        o = b.metrics.open_answers
        return None if o is None else value(o)

    return cell


# Not added per MCQ record: an open question's file is counted by its own grade (add_open_record).
# The run counts the open questions of the datasets file (``GradeRun.scorable_open_questions``,
# None when it has none), the same for every tree.
MEASURE = register(
    Measure(
        "open",
        OpenCounts,
        add_open=add_open_record,
        # EM and F1 means over the block's open files; None when it has none.
        values={"open_answers": open_metrics},
        needs=frozenset({"exact_match", "f1"}),
        json=(JsonKey("open", open_to_json, when=_has_open),),
        columns=(
            Column("EM%", _cell(lambda o: pct(o.exact_match)), TEXT_MD, 7, table="open"),
            Column("F1%", _cell(lambda o: pct(o.f1)), TEXT_MD, 7, table="open"),
            Column("ERR", _cell(lambda o: str(o.errors)), TEXT_MD, 4, table="open"),
            Column("TOT", _cell(lambda o: str(o.total)), TEXT_MD, 4, table="open"),
        ),
        run_field="scorable_open_questions",
        merge_trees=merge_first,
    )
)
