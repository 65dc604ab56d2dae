"""Retrieval size (``retrieval``): the retriever's time and the vertex, relationship and
property counts of ``ok.stats.retrieval``, summed over the files with a complete retrieval
sample; RET(s), VERTICE, RELATION and PROPERTY are their means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kag.grading.measures.registry import Measure, register
from kag.grading.measures.timing import duration_secs, mean_duration_secs
from kag.grading.record import GradedFile


class RetrievalCounts:
    """Retrieval sums of a block (time in integer nanoseconds)."""

    # Slots for the block classes that inherit these counters, declared there (a base with
    # non-empty slots cannot be mixed with others); hidden from the type checker, which
    # would refuse the counters' assignment through an empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()

    retrieval_ns: int = 0
    vertices: int = 0
    relationships: int = 0
    properties: int = 0
    retrieval_samples: int = 0


def add(counts: RetrievalCounts, graded: GradedFile) -> None:
    """Add the file's retrieval sample, when it has one."""
    r = graded.retrieval
    if r is not None:
        counts.retrieval_ns += r.time_ns
        counts.vertices += r.vertices
        counts.relationships += r.relationships
        counts.properties += r.properties
        counts.retrieval_samples += 1


@dataclass(frozen=True, slots=True)
class RetrievalMetrics:
    """Retrieval sums over the files that have retrieval stats (``samples`` >= 1)."""

    time_ns: int
    vertices: int
    relationships: int
    properties: int
    samples: int

    @property
    def time_secs(self) -> float:
        return duration_secs(self.time_ns)

    @property
    def avg_time_secs(self) -> float:
        return mean_duration_secs(self.time_ns, self.samples)  # type: ignore[return-value]

    @property
    def avg_vertices(self) -> float:
        return self.vertices / self.samples

    @property
    def avg_relationships(self) -> float:
        return self.relationships / self.samples

    @property
    def avg_properties(self) -> float:
        return self.properties / self.samples


def retrieval_metrics(counts: RetrievalCounts) -> RetrievalMetrics | None:
    """The retrieval block of ``counts``; None when no file had retrieval stats."""
    if counts.retrieval_samples == 0:
        return None
    return RetrievalMetrics(
        counts.retrieval_ns,
        counts.vertices,
        counts.relationships,
        counts.properties,
        counts.retrieval_samples,
    )


MEASURE = register(
    Measure(
        "retrieval",
        RetrievalCounts,
        add,
        needs=frozenset({"retrieval"}),
        json_keys=("retrieval",),
    )
)
