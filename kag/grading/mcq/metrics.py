"""The blocks of a `kag stats` report: :class:`Tally`, the accumulator that folds the
per-file records into each registered measure's state, and :class:`Metrics`, the frozen
block. What a block holds, how a record adds to it, how two merge and which values a block
has are the registered measures' (:mod:`kag.grading.measures`, one module each, where the
metric functions re-exported here live): ``Metrics.accuracy`` is the value the ``accuracy``
measure declares, not a property of the block.

Most states are integer counters (times in nanoseconds), so merging those is exact and does
not depend on the order of the records. Other states (``open_f1``, the sum of the open
questions' F1 scores; a list; a sketch) merge in a fixed order: the walk merges the tallies
chunk by chunk in question order, then datasets by name, so the result does not depend on
the number of workers either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kag.grading.measures import registered
from kag.grading.measures.accuracy import accuracy, coverage, precision
from kag.grading.measures.context_length import mean
from kag.grading.measures.interval import Z95, wilson_interval
from kag.grading.measures.registry import Measure, generation
from kag.grading.measures.retrieval import RetrievalMetrics
from kag.grading.measures.timing import duration_secs, mean_duration_secs
from kag.grading.measures.usage import UsageMetrics
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
    from kag.grading.verdicts import JudgeKey

# ---------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class _Layout:
    """What the blocks derive from the registry, rebuilt when a measure is registered: the
    measures with a state (in registration order, the order of a block's states), their
    adders by position, and where each value of a block is read."""

    stateful: tuple[Measure, ...]
    adders: tuple[tuple[int, Callable[[Any, GradedFile], None]], ...]
    open_adders: tuple[tuple[int, Callable[[Any, GradedFile], None]], ...]
    # value name -> (position of the measure's state, or -1 for a value read from the block; getter)
    values: Mapping[str, tuple[int, Callable[[Any], Any]]]
    positions: Mapping[str, int]


_layout_cache: list[tuple[int, _Layout]] = []


def _layout() -> _Layout:
    """The layout of the registry as it is now (cached until a measure is registered)."""
    if _layout_cache and _layout_cache[0][0] == generation():
        return _layout_cache[0][1]
    measures = registered()
    stateful = tuple(m for m in measures if m.state is not None)
    positions = {m.name: i for i, m in enumerate(stateful)}
    values = {
        name: (positions[m.name], getter) for m in stateful for name, getter in m.value_getters().items()
    }
    values.update((name, (-1, getter)) for m in measures for name, getter in m.block_values.items())
    layout = _Layout(
        stateful,
        tuple((i, m.add) for i, m in enumerate(stateful) if m.add is not None),
        tuple((i, m.add_open) for i, m in enumerate(stateful) if m.add_open is not None),
        values,
        positions,
    )
    _layout_cache[:] = [(generation(), layout)]
    return layout


class Tally:
    """Accumulator of per-file records for one group (setup, or setup × dataset): one state
    per registered measure that keeps one, in registration order.

    ``Tally(**counters)`` starts the counters named with the values given (a block built by
    hand, in tests and examples)."""

    __slots__ = ("_adders", "_open_adders", "states")

    def __init__(self, **counters: Any) -> None:
        layout = _layout()
        self.states = [m.new_state() for m in layout.stateful]
        self._adders, self._open_adders = layout.adders, layout.open_adders
        for name, value in counters.items():
            _set_counter(self.states, name, value)

    def add(self, graded: GradedFile) -> None:
        """Fold one graded MCQ record into every measure that counts those."""
        states = self.states
        for i, add in self._adders:
            add(states[i], graded)

    def add_open_record(self, graded: GradedFile) -> None:
        """Fold one graded record of an open question into every measure that counts those."""
        states = self.states
        for i, add in self._open_adders:
            add(states[i], graded)

    def add_open(self, exact: float, f1: float, error: bool) -> None:
        """Count one graded open-answer file (an error file scores 0 on both) from its scores
        alone (no record): what the ``open`` measure counts of it."""
        from kag.grading.measures.open import add_open

        add_open(self.states[_layout().positions["open"]], exact, f1, error)

    def merge(self, other: Tally | Metrics) -> None:
        """Fold another group's states (a Tally or a frozen Metrics) into this one, each by
        its measure's merge; ``other`` is left as it was. Callers merge in a fixed order
        (chunks, then datasets by name)."""
        layout = _layout()
        theirs = other.states
        for i, m in enumerate(layout.stateful):
            self.states[i] = m.merge_states(self.states[i], theirs[i])

    def freeze(self) -> Metrics:
        """The block of these states (the tally must not be added to afterwards)."""
        return Metrics._of(tuple(self.states))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tally) and self.states == other.states

    def __repr__(self) -> str:
        return f"Tally({self.states!r})"

    def __getstate__(self) -> list[Any]:
        return self.states

    def __setstate__(self, states: list[Any]) -> None:
        layout = _layout()
        self.states = states
        self._adders, self._open_adders = layout.adders, layout.open_adders


def _set_counter(states: list[Any], name: str, value: Any) -> None:
    layout = _layout()
    for i, m in enumerate(layout.stateful):
        if name in m.counters:
            setattr(states[i], name, value)
            return
    raise TypeError(f"no registered measure counts {name!r}")


class Metrics:
    """The numbers of one report block (a setup overall, or one dataset of a setup): each
    measure's state, and its values read by name (``block.accuracy``, ``block.correct``),
    each from its measure's declaration (:attr:`~kag.grading.measures.registry.Measure.values`),
    a measure's value finished once per block.

    ``Metrics(**counters)``: the block of a :class:`Tally` started with those counters."""

    __slots__ = ("_finished", "states")

    def __init__(self, **counters: Any) -> None:
        self.states = tuple(Tally(**counters).states)
        self._finished: dict[int, Any] = {}

    @classmethod
    def _of(cls, states: tuple[Any, ...]) -> Metrics:
        block = cls.__new__(cls)
        block.states = states
        block._finished = {}
        return block

    def value(self, name: str) -> Any:
        """The block's value ``name``, as the measure that declares it computes it;
        AttributeError naming it when no registered measure declares it."""
        found = _layout().values.get(name)
        if found is None:
            raise AttributeError(f"no registered measure gives a block the value {name!r}")
        position, getter = found
        if position < 0:
            return getter(self)
        finished = self._finished
        if position not in finished:
            finished[position] = _layout().stateful[position].finished(self.states[position])
        return getter(finished[position])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.value(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Metrics) and self.states == other.states

    def __hash__(self) -> int:
        return hash(repr(self.states))

    def __repr__(self) -> str:
        return f"Metrics({self.states!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Metrics._of, (self.states,))


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
    ``judge`` names the judge whose verdicts were read (None: none was).
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
    judge: JudgeKey | None = None  # the judge whose cached verdicts the records carry

    @property
    def unreadable_files(self) -> int:
        return len(self.unreadable)
