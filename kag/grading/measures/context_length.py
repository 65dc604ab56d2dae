"""Context length (``context_length``): CTX_LEN, the mean UTF-8 byte length of
``ok.stats.prompt`` over the files that have one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kag.grading.measures.declarations import TEXT_MD_HTML, Column, JsonKey
from kag.grading.measures.registry import Measure, register
from kag.grading.percent import fixed
from kag.grading.record import GradedFile


def mean(total: int, samples: int) -> float | None:
    """total / samples as a float; None when there are no samples."""
    return total / samples if samples > 0 else None


class ContextLengthCounts:
    """Prompt bytes of a block and how many files had a prompt."""

    # Slots for the block classes that inherit these counters, declared there (a base with
    # non-empty slots cannot be mixed with others); hidden from the type checker, which
    # would refuse the counters' assignment through an empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()

    context_bytes: int = 0
    context_samples: int = 0


def add(counts: ContextLengthCounts, graded: GradedFile) -> None:
    """Add the file's prompt length, when it has one."""
    if graded.context_length is not None:
        counts.context_bytes += graded.context_length
        counts.context_samples += 1


MEASURE = register(
    Measure(
        "context_length",
        ContextLengthCounts,
        add,
        needs=frozenset({"context_length"}),
        json=(JsonKey("avg_context_length", lambda b: b.metrics.avg_context_length),),
        columns=(Column("CTX_LEN", lambda b: fixed(b.metrics.avg_context_length), TEXT_MD_HTML, 10),),
    )
)
