"""Generation time (``timing``): ``ok.stats.time`` summed in nanoseconds over the files that
have one, GEN(s) their mean and the total in seconds, as the contract of
:mod:`kag.grading.rule` computes durations.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kag.grading.measures.declarations import TEXT_MD_HTML, Column, JsonKey
from kag.grading.measures.registry import Counters, Measure, register
from kag.grading.percent import fixed
from kag.grading.record import GradedFile
from kag.results.codec import NANOS_PER_SEC


def duration_secs(total_ns: int) -> float:
    """Rust's ``Duration::as_secs_f64``: ``secs as f64 + nanos as f64 / 1e9``."""
    secs, nanos = divmod(total_ns, NANOS_PER_SEC)
    return float(secs) + float(nanos) / 1e9


def mean_duration_secs(total_ns: int, samples: int) -> float | None:
    """Mean of durations, in seconds, as the contract of :mod:`kag.grading.rule` computes it.

    Rust: ``total.div_f64(n as f64).as_secs_f64()``; ``div_f64`` divides the f64 seconds
    and rounds the quotient to the nearest nanosecond (ties to even, Rust >= 1.63).
    None when there are no samples.
    """
    if samples <= 0:
        return None
    quotient = duration_secs(total_ns) / float(samples)
    return duration_secs(round(Fraction(quotient) * NANOS_PER_SEC))


@dataclass(slots=True)
class TimingCounts(Counters):
    """Generation time of a block: integer nanoseconds, so that merging is exact."""

    generation_ns: int = 0
    generation_samples: int = 0


def add(counts: TimingCounts, graded: GradedFile) -> None:
    """Add the file's generation time, when it has one."""
    if graded.generation_ns is not None:
        counts.generation_ns += graded.generation_ns
        counts.generation_samples += 1


MEASURE = register(
    Measure(
        "timing",
        TimingCounts,
        add,
        needs=frozenset({"generation_ns"}),
        values={
            # GEN(s): mean ``ok.stats.time`` over the ok files that have one.
            "avg_generation_secs": lambda c: mean_duration_secs(c.generation_ns, c.generation_samples),
            "total_generation_secs": lambda c: duration_secs(c.generation_ns),
        },
        json=(
            JsonKey("avg_generation_secs", lambda b: b.metrics.avg_generation_secs),
            JsonKey("total_generation_secs", lambda b: b.metrics.total_generation_secs),
        ),
        columns=(Column("GEN(s)", lambda b: fixed(b.metrics.avg_generation_secs), TEXT_MD_HTML, 8),),
    )
)
