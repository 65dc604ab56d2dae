"""The blocks of a `kag stats` report: :class:`Tally`, the accumulator that sums the
per-file records, and :class:`Metrics`, the frozen block. Their counters, how a record adds
to them and how two merge are the registered measures' (:mod:`kag.grading.measures`, one
module each, where the metric functions re-exported here live); the properties of
:class:`Metrics` are the values the renderers read.

Every sum but one is an integer (times in nanoseconds), so merging those is exact and does
not depend on the order of the records. The exception is ``open_f1``, the sum of the open
questions' F1 scores: a float, so the walk merges the tallies in a fixed order (chunks in
question order, then datasets by name) and the result does not depend on the number of
workers either.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from kag.grading.measures import registered
from kag.grading.measures.accuracy import AccuracyCounts, accuracy, coverage, precision
from kag.grading.measures.context_length import ContextLengthCounts, mean
from kag.grading.measures.extracted import ExtractedCounts
from kag.grading.measures.interval import Z95, wilson_interval
from kag.grading.measures.open import OpenCounts, add_open
from kag.grading.measures.retrieval import RetrievalCounts, RetrievalMetrics, retrieval_metrics
from kag.grading.measures.timing import TimingCounts, duration_secs, mean_duration_secs
from kag.grading.measures.usage import UsageCounts, UsageMetrics, usage_metrics
from kag.grading.record import GradedFile

# Re-exported: the metric functions' home is their measure's module.
__all__ = [
    "Z95",
    "GradeRun",
    "Metrics",
    "RetrievalMetrics",
    "Tally",
    "Unreadable",
    "UsageMetrics",
    "accuracy",
    "coverage",
    "duration_secs",
    "mean",
    "mean_duration_secs",
    "precision",
    "wilson_interval",
]

if TYPE_CHECKING:
    from kag.grading.mcq.epoch_walk import EpochOutcomes
    from kag.grading.mcq.evidence_blocks import EvidenceRecords

# ---------------------------------------------------------------- aggregation


class _Counts(
    AccuracyCounts,
    TimingCounts,
    ContextLengthCounts,
    RetrievalCounts,
    ExtractedCounts,
    OpenCounts,
    UsageCounts,
):
    """The counter fields of one group, listed once: :class:`Tally` (the mutable accumulator
    that travels to and from worker processes) and :class:`Metrics` (the frozen block) both
    carry exactly these, in this order, through :func:`_counts_dataclass`: the registered
    measures' counters (:mod:`kag.grading.measures`), in registration order."""

    __slots__ = ()


_C = TypeVar("_C", bound=type[_Counts])

# The counters of a block: the registered measures', each with its starting value. The bases
# of _Counts are there for the type checker, which then sees the counters the renderers and
# the walk name; a measure that is not a base still counts (its own functions read its
# counters), so a new measure needs no line here.
_ANNOTATIONS: dict[str, Any] = {
    name: inspect.get_annotations(m.counts)[name] for m in registered() for name in m.counters
}
_STARTS: dict[str, Any] = {name: getattr(m.counts, name) for m in registered() for name in m.counters}
_MEASURES = registered()
_ADDERS = tuple(m.add for m in _MEASURES if m.add is not None)


def _counts_dataclass(*, frozen: bool) -> Callable[[_C], _C]:
    """``@dataclass(slots=True, frozen=frozen)`` whose fields are :class:`_Counts`' (then the class's own)."""

    def wrap(cls: _C) -> _C:
        own = inspect.get_annotations(cls)
        cls.__annotations__ = {**_ANNOTATIONS, **own}
        for name in _ANNOTATIONS:
            setattr(cls, name, _STARTS[name])
        return dataclass(frozen=frozen, slots=True)(cls)  # type: ignore[return-value]

    return wrap


@_counts_dataclass(frozen=False)
class Tally(_Counts):
    """Accumulator of per-file records for one group (setup, or setup × dataset).

    Times are integer nanoseconds so that merging is exact and order-independent.
    """

    def add(self, graded: GradedFile) -> None:
        for add in _ADDERS:
            add(self, graded)

    def add_open(self, exact: float, f1: float, error: bool) -> None:
        """Count one graded open-answer file (an error file scores 0 on both)."""
        add_open(self, exact, f1, error)

    def merge(self, other: Tally | Metrics) -> None:
        """Add another group's sums (a Tally or frozen Metrics: same fields): each measure's
        merge. ``open_f1`` is the one float: callers merge
        in a fixed order (chunks, then datasets by name)."""
        for m in _MEASURES:
            m.merge(self, other)

    def freeze(self) -> Metrics:
        return Metrics(*(getattr(self, f) for f in _TALLY_FIELDS))


@_counts_dataclass(frozen=True)
class Metrics(_Counts):
    """The numbers of one report block (a setup overall, or one dataset of a setup)."""

    @property
    def total(self) -> int:
        """TOT = OK + WRONG + ERR."""
        return self.correct + self.incorrect + self.errors

    @property
    def extracted_accuracy(self) -> float | None:
        """XACC = extracted correct / TOT (the denominator of ACC); None when TOT = 0."""
        return accuracy(self.extracted_correct, self.total)

    @property
    def parsed(self) -> int:
        """OK + WRONG: files whose model committed to an answer."""
        return self.correct + self.incorrect

    @property
    def accuracy(self) -> float | None:
        return accuracy(self.correct, self.total)

    @property
    def precision(self) -> float | None:
        return precision(self.correct, self.parsed)

    @property
    def coverage(self) -> float | None:
        return coverage(self.parsed, self.total)

    @property
    def accuracy_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.correct, self.total)

    @property
    def avg_generation_secs(self) -> float | None:
        """GEN(s): mean ``ok.stats.time`` over the ok files that have one."""
        return mean_duration_secs(self.generation_ns, self.generation_samples)

    @property
    def total_generation_secs(self) -> float:
        return duration_secs(self.generation_ns)

    @property
    def avg_context_length(self) -> float | None:
        """CTX_LEN: mean UTF-8 byte length of ``ok.stats.prompt`` over the ok files that have one."""
        return mean(self.context_bytes, self.context_samples)

    @property
    def retrieval(self) -> RetrievalMetrics | None:
        """RET(s)/VERTICE/RELATION/PROPERTY sums; None when no file had retrieval stats."""
        return retrieval_metrics(self)

    @property
    def usage(self) -> UsageMetrics | None:
        """Token sums and means over the files with a usage sample; None when there is none."""
        return usage_metrics(self)


_TALLY_FIELDS = tuple(f.name for f in fields(Tally))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Unreadable:
    """A result file that could not be graded, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class GradeRun:
    """Everything a walk of a result tree produced.

    ``tallies`` maps (setup, dataset) to the metrics of that group. ``datasets`` and
    ``scorable_questions`` count the (filtered) datasets file, ``scorable_open_questions``
    its open questions (None when the whole file has none). ``records`` holds one
    :class:`GradedFile` per graded file, sorted by (dataset, question, setup), only when
    the request asks for ``records``. ``epochs`` (per (setup, dataset), one tuple of
    epoch outcomes per question with epochs) and ``evidence`` (per (setup, dataset), the
    evidence records) are filled only when the request asks for them.
    ``open_records`` holds the per-file records of open questions, sorted and kept like
    ``records`` but apart from them, so that the pairings over ``records`` (comparisons,
    flips) never see an open question.
    """

    tallies: Mapping[tuple[str, str], Metrics]
    datasets: int
    scorable_questions: int
    skipped_files: int
    ignored_files: int
    unreadable: tuple[Unreadable, ...]
    records: tuple[GradedFile, ...] | None = None
    # None when the datasets file has no open question: the report then has no open-answer keys.
    scorable_open_questions: int | None = None
    extract: str | None = None  # the --extract spec text the extracted counters were graded with
    epochs: EpochOutcomes | None = None
    evidence: EvidenceRecords | None = None
    open_records: tuple[GradedFile, ...] | None = None

    @property
    def unreadable_files(self) -> int:
        return len(self.unreadable)
