"""The registry of measures: what a block of a report can count, each declared once.

A :class:`Measure` describes itself, as ir_measures' measures and inspect_ai's ``@metric``
functions do: its name (the key :mod:`kag.render.columns` shows it under), what it reads
from a graded record (``needs``), the state it keeps per block (its accumulator, how one
record is folded into it, how two merge and how the block's value is finished), the values
a block has of it, and what the reports show of it: its JSON keys and its columns
(:mod:`.declarations`). :func:`register` adds one; the walk (:mod:`kag.grading.mcq.walk`),
the blocks (:mod:`kag.grading.mcq.metrics`) and the merge of several trees
(:mod:`kag.grading.mcq.trees`) iterate over :func:`registered` instead of naming each
measure, so a new measure is one module that registers itself.

The common state is a class of integer counters (:class:`Counters`, or any class whose
annotations are numbers with a starting value): it merges counter by counter by addition
and each counter is a value of the block. Any other state (a list, a sketch, a matrix)
declares its ``merge`` and ``finish``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from kag.grading.measures.declarations import Column, JsonKey, Reducer
from kag.grading.record import GradedFile

#: Names setup ``setup`` of the tree labelled ``label`` (``LABEL/setup``).
Rename = Callable[[str, str], str]

#: Merges what the runs of several labelled trees hold for a measure (``(label, value)``
#: per tree, in tree order; each value is the run's field ``Measure.run_field``).
TreeMerge = Callable[[Sequence[tuple[str, Any]], Rename], Any]

#: Folds one graded record into a measure's state (its accumulator), in place.
Adder = Callable[[Any, GradedFile], None]

#: Folds the second state into the first and returns it (the first may be returned changed
#: in place; the second is left as it was and none of its mutable parts is kept).
Merger = Callable[[Any, Any], Any]

#: What a walk keeps of a measure beyond the blocks: a run field's empty part, with
#: ``merge(other)`` (the chunks' parts, in chunk order) and ``finish()`` (the run's value).
Part = Callable[[], Any]


class Counters:
    """Base of a state made of counters: the class's annotations (integers, or a float sum
    merged in a fixed order) with their starting values as class attributes. Declared as a
    slotted dataclass by the measures that ship; a plain annotated class works the same."""

    __slots__ = ()


def _counters_of(state: Any) -> tuple[str, ...]:
    """The counters of a state class: its annotations (its bases' first), () for another state."""
    if not isinstance(state, type):
        return ()
    names: dict[str, None] = {}
    for klass in reversed(state.__mro__):
        for name in inspect.get_annotations(klass):
            if name != "__slots__":
                names[name] = None
    return tuple(names)


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Measure:
    """One measure of a report block.

    - ``name``: the key a report asks for it by and its columns are declared under.
    - ``state``: what makes the measure's empty accumulator of a block (a class of counters,
      the common case, or any factory: ``list``, a sketch, a matrix); None for a measure
      that keeps nothing per block and reads other measures' values (the interval) or the
      run's (epochs, evidence).
    - ``add``: folds one graded MCQ record into the state; ``add_open``: one graded record of
      an open question (None: the measure does not count those files).
    - ``merge``: folds a second state into a first and returns it (chunks in question
      order, then datasets by name: a fixed order, so a float sum or a list does not depend
      on the number of workers); None for counters, which merge by addition.
    - ``finish``: the block's value of the measure from its state (None: the state itself).
    - ``values``: the values a block has of the measure, each from the finished value; a
      counters state's counters are values too. ``block_values``: values read from the
      whole block, for a measure that reads other measures' values (the interval reads the
      accuracy's counters). ``Metrics.<name>`` reads either
      (:class:`kag.grading.mcq.metrics.Metrics`).
    - ``needs``: the record fields ``add`` reads (what the walk must read from a file and
      fill in: ``response``, ``config``, ``retrieval_text``, ``verdict``...).
    - ``json``: the keys the measure fills in a block of ``--format json``, each with how
      its value comes from the block and whether the block has it; ``columns``: its
      columns in the tables of the text, markdown and HTML reports. Their order across
      measures is the compatible one of :mod:`.layout`.
    - ``reducers``: its values over the epochs of a block's questions, each with its key in
      the ``epochs`` block and its columns in the epochs table (pass@k is one).
    - ``run_field`` and ``merge_trees``: a field of the grading run the measure owns besides
      the blocks (the epochs' outcomes, the evidence records, the ``--extract`` spec),
      and how the runs of several trees merge it (:func:`kag.grading.mcq.trees.merge_runs`).
    - ``keeps``: what a walk that asks for the measure keeps beyond the blocks, by the run
      field it fills: the empty part of each (:data:`Part`).
    - ``optional``: the measure is counted only when a request asks for it by name
      (:attr:`kag.grading.mcq.request.GradeRequest.measures`).
    - ``junit``: its JSON keys are JUnit suite properties where a block has them (None: when
      it is optional).
    """

    name: str
    state: Callable[[], Any] | None = None
    add: Adder | None = None
    needs: frozenset[str] = frozenset()
    json: tuple[JsonKey, ...] = ()
    columns: tuple[Column[Any], ...] = ()
    reducers: tuple[Reducer, ...] = ()
    run_field: str | None = None
    merge_trees: TreeMerge | None = None
    add_open: Adder | None = None
    merge: Merger | None = None
    finish: Callable[[Any], Any] | None = None
    values: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    block_values: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    keeps: Mapping[str, Part] = field(default_factory=dict)
    optional: bool = False
    junit: bool | None = None
    counters: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        counters = _counters_of(self.state) if self.merge is None else ()
        object.__setattr__(self, "counters", counters)
        if self.state is not None and self.merge is None and not counters:
            raise ValueError(f"measure {self.name!r}: a state without counters needs its merge")
        if self.state is None and (self.add is not None or self.add_open is not None):
            raise ValueError(f"measure {self.name!r}: a measure that adds records needs a state")
        object.__setattr__(self, "columns", tuple(replace(c, measure=self.name) for c in self.columns))
        object.__setattr__(
            self,
            "reducers",
            tuple(
                replace(r, columns=tuple(replace(c, measure=self.name, table="epochs") for c in r.columns))
                for r in self.reducers
            ),
        )

    @property
    def json_keys(self) -> tuple[str, ...]:
        """The keys the measure fills in a block, in its declared order."""
        return tuple(k.key for k in self.json)

    @property
    def value_names(self) -> tuple[str, ...]:
        """The names of the block's values of the measure: its counters, then its ``values``
        and ``block_values``."""
        return (*self.counters, *self.values, *self.block_values)

    def new_state(self) -> Any:
        """An empty accumulator of the measure (its state before any record)."""
        assert self.state is not None
        return self.state()

    def merge_states(self, into: Any, other: Any) -> Any:
        """``other`` folded into ``into``: the measure's merge, else counter by counter."""
        if self.merge is not None:
            return self.merge(into, other)
        for name in self.counters:
            setattr(into, name, getattr(into, name) + getattr(other, name))
        return into

    def finished(self, state: Any) -> Any:
        """The block's value of the measure from its state."""
        return (self.finish or _identity)(state)

    def value_getters(self) -> dict[str, Callable[[Any], Any]]:
        """Each value name with how it is read from the finished value (not ``block_values``)."""
        getters: dict[str, Callable[[Any], Any]] = {name: attrgetter(name) for name in self.counters}
        getters.update(self.values)
        return getters


class Files(list[GradedFile]):
    """A part a walk keeps: per-file records. The chunks' are concatenated, the run's
    sorted by (dataset, question, setup), whatever order the chunks finished in."""

    def merge(self, other: Files) -> None:
        self.extend(other)

    def finish(self) -> tuple[GradedFile, ...]:
        return tuple(sorted(self, key=lambda r: (r.dataset, r.question, r.setup)))


class ByQuestion(dict[tuple[str, str], dict[str, Any]]):
    """A part a walk keeps: values per (setup, dataset), then per question (the epochs'
    outcomes, the evidence records). The chunks' are united, the run's sorted by key, then
    by question name."""

    def merge(self, other: ByQuestion) -> None:
        for key, questions in other.items():
            self.setdefault(key, {}).update(questions)

    def finish(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {key: _by_name(self[key]) for key in sorted(self)}


def _by_name(questions: dict[str, Any]) -> dict[str, Any]:
    """``questions`` sorted by question name: copied as they are when they came in that order
    (as a walk's chunks bring them: a question folder's files, folders in name order)."""
    names = list(questions)
    ordered = sorted(names)
    if ordered == names:
        return questions.copy()
    return {name: questions[name] for name in ordered}


def merge_first(parts: Sequence[tuple[str, Any]], rename: Rename) -> Any:
    """The first tree's value: an option or a count of the datasets file, the same for every tree."""
    return parts[0][1]


def merge_by_setup(parts: Sequence[tuple[str, Any]], rename: Rename) -> dict[tuple[str, str], Any] | None:
    """Mappings keyed by (setup, dataset), the setups renamed, keys sorted as one tree's are;
    None when a tree lacks it (it was not asked for)."""
    if any(part is None for _, part in parts):
        return None
    merged = {
        (rename(label, setup), dataset): value
        for label, part in parts
        for (setup, dataset), value in part.items()
    }
    return {key: merged[key] for key in sorted(merged)}


def run_fields() -> Mapping[str, Measure]:
    """The measure that owns each field of a grading run besides the counters."""
    return {m.run_field: m for m in _REGISTRY.values() if m.run_field is not None}


_REGISTRY: dict[str, Measure] = {}
# Changes with every registration, so that what is derived from the registry is rebuilt.
_generation = 0


def generation() -> int:
    """A number that changes whenever a measure is registered."""
    return _generation


def register(measure: Measure) -> Measure:
    """Add ``measure`` to the registry; ValueError when its name or a counter is taken."""
    if measure.name in _REGISTRY:
        raise ValueError(f"a measure named {measure.name!r} is registered already")
    if (measure.run_field is None) != (measure.merge_trees is None):
        raise ValueError(f"measure {measure.name!r}: a run field needs its merge, and a merge its field")
    if measure.run_field is not None and measure.run_field in run_fields():
        raise ValueError(
            f"measure {measure.name!r}: the run field {measure.run_field!r} belongs to another measure"
        )
    taken = {name for m in _REGISTRY.values() for name in m.value_names}
    clash = taken.intersection(measure.value_names)
    if clash:
        raise ValueError(f"measure {measure.name!r}: values {sorted(clash)} belong to another measure")
    _REGISTRY[measure.name] = measure
    global _generation
    _generation += 1
    return measure


def registered() -> tuple[Measure, ...]:
    """Every registered measure, in registration order (the order of the states of a block)."""
    return tuple(_REGISTRY.values())


def slotted_states() -> tuple[type, ...]:
    """The state classes of the measures registered so far whose instances hold only slots
    (the counters' slotted dataclasses)."""
    return tuple(
        m.state
        for m in _REGISTRY.values()
        if isinstance(m.state, type) and "__slots__" in m.state.__dict__ and m.state.__dictoffset__ == 0
    )


def optional_names() -> frozenset[str]:
    """The measures a request asks for by name (counted only then)."""
    return frozenset(m.name for m in _REGISTRY.values() if m.optional)


def kept_parts(asked: frozenset[str] | set[str] | Sequence[str]) -> dict[str, Any]:
    """An empty part for every run field that the measures named in ``asked`` keep."""
    return {field: part() for m in _REGISTRY.values() if m.name in asked for field, part in m.keeps.items()}


def needs(asked: frozenset[str] | set[str] | Sequence[str]) -> frozenset[str]:
    """The record fields the measures of a walk read: every measure counted always, and the
    optional ones among ``asked``."""
    return frozenset(
        need for m in _REGISTRY.values() if not m.optional or m.name in asked for need in m.needs
    )


def measure(name: str) -> Measure:
    """The measure registered as ``name``; KeyError naming it otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no measure is registered as {name!r}") from None


def reducers() -> tuple[Reducer, ...]:
    """Every registered measure's epoch reducers, in registration order; ValueError when
    two share a key (each names a key of the ``epochs`` block)."""
    found = tuple(r for m in _REGISTRY.values() for r in m.reducers)
    keys = [r.key for r in found]
    if len(keys) != len(set(keys)):
        raise ValueError(
            f"two epoch reducers share a key: {sorted(k for k in set(keys) if keys.count(k) > 1)}"
        )
    return found
