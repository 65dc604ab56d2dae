"""The extracted grade (``extracted``, under ``--extract``): OK, WRONG and not extracted
of the same MCQ files (:mod:`kag.grading.mcq.extracted` grades them), and
XACC = extracted OK / TOT, the denominator of ACC, so that the two compare directly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kag.grading.measures.registry import Measure, merge_first, register
from kag.grading.record import GradedFile, Outcome


class ExtractedCounts:
    """The extracted grade's counters of a block (all 0 without ``--extract``)."""

    # Slots for the block classes that inherit these counters, declared there (a base with
    # non-empty slots cannot be mixed with others); hidden from the type checker, which
    # would refuse the counters' assignment through an empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()

    extracted_correct: int = 0
    extracted_incorrect: int = 0
    not_extracted: int = 0


def add(counts: ExtractedCounts, graded: GradedFile) -> None:
    """Count the file's extracted grade, when it was graded so."""
    x = graded.extracted
    if x is not None:
        if x is Outcome.OK:
            counts.extracted_correct += 1
        elif x is Outcome.WRONG:
            counts.extracted_incorrect += 1
        else:
            counts.not_extracted += 1


# The run keeps the spec the files were graded with (``GradeRun.extract``), every tree's the same.
MEASURE = register(
    Measure(
        "extracted",
        ExtractedCounts,
        add,
        needs=frozenset({"extracted"}),
        json_keys=("extracted",),
        run_field="extract",
        merge_trees=merge_first,
    )
)
