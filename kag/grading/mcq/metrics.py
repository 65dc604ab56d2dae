"""The metrics of `kag stats` (one function each) and the accumulators that sum the
per-file records into them.

Every sum but one is an integer (times in nanoseconds), so merging those is exact and does
not depend on the order of the records. The exception is ``open_f1``, the sum of the open
questions' F1 scores: a float, so the walk merges the tallies in a fixed order (chunks in
question order, then datasets by name) and the result does not depend on the number of
workers either.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import TYPE_CHECKING, TypeVar

from kag.grading.record import GradedFile, Outcome
from kag.grading.usage import usage_beyond_bound, usage_sample
from kag.results.codec import NANOS_PER_SEC

if TYPE_CHECKING:
    from kag.grading.mcq.epoch_walk import EpochOutcomes
    from kag.grading.mcq.evidence_blocks import EvidenceRecords

#: z for a two-sided 95% interval (the 0.975 quantile of the standard normal).
Z95 = 1.959963984540054

# ---------------------------------------------------------------- metrics (one per function)


def accuracy(correct: int, total: int) -> float | None:
    """ACC = OK / TOT, the share of scored files answered correctly; None when TOT = 0."""
    return correct / total if total > 0 else None


def precision(correct: int, parsed: int) -> float | None:
    """PREC = OK / (OK + WRONG), correctness of committed answers; None when nothing committed."""
    return correct / parsed if parsed > 0 else None


def coverage(parsed: int, total: int) -> float | None:
    """COVER = (OK + WRONG) / TOT, the share of scored files that are not errors; None when TOT = 0."""
    return parsed / total if total > 0 else None


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion ``successes / n``.

    With p = k/n: centre = (p + z²/2n) / (1 + z²/n), half = z/(1 + z²/n) · √(p(1-p)/n + z²/4n²);
    the interval is [centre - half, centre + half], clamped to [0, 1] (exactly 0 when k = 0
    and exactly 1 when k = n). None when n = 0.
    """
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


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


def mean(total: int, samples: int) -> float | None:
    """total / samples as a float; None when there are no samples."""
    return total / samples if samples > 0 else None


# ---------------------------------------------------------------- aggregation


class _Counts:
    """The counter fields of one group, listed once: :class:`Tally` (the mutable accumulator
    that travels to and from worker processes) and :class:`Metrics` (the frozen block) both
    carry exactly these, in this order, through :func:`_counts_dataclass`."""

    __slots__ = ()

    correct: int = 0
    incorrect: int = 0
    errors: int = 0
    abstentions: int = 0
    non_option_answers: int = 0
    generation_ns: int = 0
    generation_samples: int = 0
    context_bytes: int = 0
    context_samples: int = 0
    retrieval_ns: int = 0
    vertices: int = 0
    relationships: int = 0
    properties: int = 0
    retrieval_samples: int = 0
    # --extract (kag.grading.mcq.extracted): the extracted grade of the same files.
    extracted_correct: int = 0
    extracted_incorrect: int = 0
    not_extracted: int = 0
    # Open questions (kag.grading.open_grading): files, error files, EM and F1 sums.
    open_total: int = 0
    open_errors: int = 0
    open_exact: int = 0
    open_f1: float = 0.0
    usage_samples: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Files whose usage has a count above MAX_COUNT: left out of the usage, and warned about.
    unbelievable_usage: int = 0


_C = TypeVar("_C", bound=type[_Counts])


def _counts_dataclass(*, frozen: bool) -> Callable[[_C], _C]:
    """``@dataclass(slots=True, frozen=frozen)`` whose fields are :class:`_Counts`' (then the class's own)."""

    def wrap(cls: _C) -> _C:
        own = inspect.get_annotations(cls)
        cls.__annotations__ = {**_Counts.__annotations__, **own}
        for name in _Counts.__annotations__:
            setattr(cls, name, getattr(_Counts, name))
        return dataclass(frozen=frozen, slots=True)(cls)  # type: ignore[return-value]

    return wrap


@_counts_dataclass(frozen=False)
class Tally(_Counts):
    """Accumulator of per-file records for one group (setup, or setup × dataset).

    Times are integer nanoseconds so that merging is exact and order-independent.
    """

    def add(self, graded: GradedFile) -> None:
        outcome = graded.outcome
        if outcome is Outcome.OK:
            self.correct += 1
        elif outcome is Outcome.WRONG:
            self.incorrect += 1
            self.abstentions += graded.abstained
            self.non_option_answers += graded.non_option
        else:
            self.errors += 1
        if graded.generation_ns is not None:
            self.generation_ns += graded.generation_ns
            self.generation_samples += 1
        if graded.context_length is not None:
            self.context_bytes += graded.context_length
            self.context_samples += 1
        r = graded.retrieval
        if r is not None:
            self.retrieval_ns += r.time_ns
            self.vertices += r.vertices
            self.relationships += r.relationships
            self.properties += r.properties
            self.retrieval_samples += 1
        x = graded.extracted
        if x is not None:
            if x is Outcome.OK:
                self.extracted_correct += 1
            elif x is Outcome.WRONG:
                self.extracted_incorrect += 1
            else:
                self.not_extracted += 1
        tokens = usage_sample(graded)
        if tokens is not None:
            self.prompt_tokens += tokens[0]
            self.completion_tokens += tokens[1]
            self.usage_samples += 1
        elif usage_beyond_bound(graded):
            self.unbelievable_usage += 1

    def add_open(self, exact: float, f1: float, error: bool) -> None:
        """Count one graded open-answer file (an error file scores 0 on both)."""
        self.open_total += 1
        self.open_errors += error
        self.open_exact += int(exact)
        self.open_f1 += f1

    def merge(self, other: Tally | Metrics) -> None:
        """Add another group's sums (a Tally or frozen Metrics: same fields). ``open_f1`` is the
        one float: callers merge in a fixed order (chunks, then datasets by name)."""
        for f in _TALLY_FIELDS:
            setattr(self, f, getattr(self, f) + getattr(other, f))

    def freeze(self) -> Metrics:
        return Metrics(*(getattr(self, f) for f in _TALLY_FIELDS))


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
        if self.retrieval_samples == 0:
            return None
        return RetrievalMetrics(
            self.retrieval_ns, self.vertices, self.relationships, self.properties, self.retrieval_samples
        )

    @property
    def usage(self) -> UsageMetrics | None:
        """Token sums and means over the files with a usage sample; None when there is none."""
        if self.usage_samples == 0:
            return None
        return UsageMetrics(self.usage_samples, self.prompt_tokens, self.completion_tokens)


@dataclass(frozen=True, slots=True)
class UsageMetrics:
    """Token counts summed over ``samples`` >= 1 files (see :func:`kag.grading.usage.usage_sample`)."""

    samples: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def avg_prompt_tokens(self) -> float:
        """prompt_tokens / samples."""
        return self.prompt_tokens / self.samples

    @property
    def avg_completion_tokens(self) -> float:
        """completion_tokens / samples."""
        return self.completion_tokens / self.samples

    @property
    def avg_tokens(self) -> float:
        """(prompt_tokens + completion_tokens) / samples: the mean tokens per question."""
        return (self.prompt_tokens + self.completion_tokens) / self.samples


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
    ``grade_tree(..., keep_records=True)``. ``epochs`` (per (setup, dataset), one tuple of
    epoch outcomes per question with epochs) and ``evidence`` (per (setup, dataset), the
    evidence records) are filled only when ``grade_tree`` is asked for them.
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
