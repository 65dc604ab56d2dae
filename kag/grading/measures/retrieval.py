"""Retrieval size (``retrieval``): the retriever's time and the vertex, relationship and
property counts of ``ok.stats.retrieval``, summed over the files with a complete retrieval
sample; RET(s), VERTICE, RELATION and PROPERTY are their means."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kag.grading.measures.declarations import TEXT_MD_HTML, Block, Column, JsonKey, Shown
from kag.grading.measures.registry import Counters, Measure, register
from kag.grading.measures.timing import duration_secs, mean_duration_secs
from kag.grading.percent import fixed
from kag.grading.record import GradedFile


@dataclass(slots=True)
class RetrievalCounts(Counters):
    """Retrieval sums of a block (time in integer nanoseconds)."""

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


def retrieval_to_json(b: Block) -> dict[str, Any] | None:
    """The ``retrieval`` object of a block (sums, then means), or None without a sample."""
    r = b.metrics.retrieval
    if r is None:
        return None
    return {
        "time_secs": r.time_secs,
        "vertices": r.vertices,
        "relationships": r.relationships,
        "properties": r.properties,
        "samples": r.samples,
        "avg_time_secs": r.avg_time_secs,
        "avg_vertices": r.avg_vertices,
        "avg_relationships": r.avg_relationships,
        "avg_properties": r.avg_properties,
    }


def _cell(value: Callable[[RetrievalMetrics], str]) -> Callable[[Block], str | None]:
    """A cell of the block's retrieval means; None (no cell) for a block without retrieval."""

    def cell(b: Block) -> str | None:
        r = b.metrics.retrieval
        return None if r is None else value(r)

    return cell


def _retrieved(s: Shown) -> bool:
    return s.retrieval


MEASURE = register(
    Measure(
        "retrieval",
        RetrievalCounts,
        add,
        needs=frozenset({"retrieval"}),
        # RET(s)/VERTICE/RELATION/PROPERTY sums; None when no file had retrieval stats.
        values={"retrieval": retrieval_metrics},
        json=(JsonKey("retrieval", retrieval_to_json),),
        columns=(
            Column("RET(s)", _cell(lambda r: fixed(r.avg_time_secs)), TEXT_MD_HTML, 8, when=_retrieved),
            Column("VERTICE", _cell(lambda r: fixed(r.avg_vertices, 2)), TEXT_MD_HTML, 7, when=_retrieved),
            Column(
                "RELATION", _cell(lambda r: fixed(r.avg_relationships, 2)), TEXT_MD_HTML, 8, when=_retrieved
            ),
            Column("PROPERTY", _cell(lambda r: fixed(r.avg_properties, 2)), TEXT_MD_HTML, 8, when=_retrieved),
        ),
    )
)
