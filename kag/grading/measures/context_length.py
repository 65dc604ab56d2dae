"""Context length (``context_length``): CTX_LEN, the mean UTF-8 byte length of
``ok.stats.prompt`` over the files that have one."""

from __future__ import annotations

from dataclasses import dataclass

from kag.grading.measures.declarations import TEXT_MD_HTML, Column, JsonKey
from kag.grading.measures.registry import Counters, Measure, register
from kag.grading.percent import fixed
from kag.grading.record import GradedFile


def mean(total: int, samples: int) -> float | None:
    """total / samples as a float; None when there are no samples."""
    return total / samples if samples > 0 else None


@dataclass(slots=True)
class ContextLengthCounts(Counters):
    """Prompt bytes of a block and how many files had a prompt."""

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
        # CTX_LEN: mean UTF-8 byte length of ``ok.stats.prompt`` over the ok files that have one.
        values={"avg_context_length": lambda c: mean(c.context_bytes, c.context_samples)},
        json=(JsonKey("avg_context_length", lambda b: b.metrics.avg_context_length),),
        columns=(Column("CTX_LEN", lambda b: fixed(b.metrics.avg_context_length), TEXT_MD_HTML, 10),),
    )
)
