"""Open questions (``open``): EM and token F1 of the files of open questions, each file
graded by :func:`kag.grading.open_grading.grade_open_response` (an error file scores 0 on
both). Per block the means over every graded file, error files included:
EM = Σ EM / total, F1 = Σ F1 / total.

``open_f1`` is the one float counter of a block: the walk merges the tallies in a fixed
order, so that the sum does not depend on the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kag.grading.measures.registry import Measure, merge_first, register


class OpenCounts:
    """The open-answer sums of a block: files, error files, EM and F1 sums."""

    # Slots for the block classes that inherit these counters, declared there (a base with
    # non-empty slots cannot be mixed with others); hidden from the type checker, which
    # would refuse the counters' assignment through an empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()

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


# Not added per MCQ record: an open question's file is counted by its own grade (add_open).
# The run counts the open questions of the datasets file (``GradeRun.scorable_open_questions``,
# None when it has none), the same for every tree.
MEASURE = register(
    Measure(
        "open",
        OpenCounts,
        needs=frozenset({"exact_match", "f1"}),
        json_keys=("open",),
        run_field="scorable_open_questions",
        merge_trees=merge_first,
    )
)
