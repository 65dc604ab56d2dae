"""The registry of measures: what a block of a report can count, each declared once.

A :class:`Measure` describes itself, as ir_measures' measures and inspect_ai's ``@metric``
functions do: its name (the key :mod:`kag.render.columns` shows it under), what it reads
from a graded record, the counters it adds to a block, how one record is folded into them,
how two blocks' counters merge, and what the reports show of it: its JSON keys and its
columns (:mod:`.declarations`). :func:`register` adds one; the
walk (:mod:`kag.grading.mcq.walk`), the tallies (:mod:`kag.grading.mcq.metrics`) and the
merge of several trees (:mod:`kag.grading.mcq.trees`) iterate over :func:`registered`
instead of naming each measure, so a new measure is one module that registers itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kag.grading.measures.declarations import Column, JsonKey, Reducer
from kag.grading.record import GradedFile

#: Names setup ``setup`` of the tree labelled ``label`` (``LABEL/setup``).
Rename = Callable[[str, str], str]

#: Merges what the runs of several labelled trees hold for a measure (``(label, value)``
#: per tree, in tree order; each value is the run's field ``Measure.run_field``).
TreeMerge = Callable[[Sequence[tuple[str, Any]], Rename], Any]

#: Folds one graded MCQ record into a block's counters (a Tally: any object with the
#: measure's counter attributes).
Adder = Callable[[Any, GradedFile], None]


@dataclass(frozen=True)
class Measure:
    """One measure of a report block.

    - ``name``: the key a report asks for it by and its columns are declared under.
    - ``counts``: a class whose annotations are the counters the measure adds to a block
      (integers, or the one float sum of the open questions' F1), in the order they are
      declared; its class attributes are their starting values.
    - ``add``: folds one graded MCQ record into those counters (None: the measure is not
      counted per MCQ file, e.g. the open questions, counted by their own grade).
    - ``needs``: the record fields ``add`` reads (what the walk must fill in).
    - ``json``: the keys the measure fills in a block of ``--format json``, each with how
      its value comes from the block and whether the block has it; ``columns``: its
      columns in the tables of the text, markdown and HTML reports. Their order across
      measures is the compatible one of :mod:`.layout`.
    - ``reducers``: its values over the epochs of a block's questions, each with its key in
      the ``epochs`` block and its columns in the epochs table (pass@k is one).
    - ``run_field`` and ``merge_trees``: a field of the grading run the measure owns besides
      the counters (the epochs' outcomes, the evidence records, the ``--extract`` spec),
      and how the runs of several trees merge it (:func:`kag.grading.mcq.trees.merge_runs`).

    Every counter merges by addition (:meth:`merge`): exact for the integers, and for the
    one float in a fixed order (chunks in question order, then datasets by name).
    """

    name: str
    counts: type
    add: Adder | None = None
    needs: frozenset[str] = frozenset()
    json: tuple[JsonKey, ...] = ()
    columns: tuple[Column[Any], ...] = ()
    reducers: tuple[Reducer, ...] = ()
    run_field: str | None = None
    merge_trees: TreeMerge | None = None
    counters: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", tuple(inspect.get_annotations(self.counts)))
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

    def merge(self, into: Any, other: Any) -> None:
        """Add ``other``'s counters of this measure to ``into``'s."""
        for name in self.counters:
            setattr(into, name, getattr(into, name) + getattr(other, name))


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
    taken = {name for m in _REGISTRY.values() for name in m.counters}
    clash = taken.intersection(measure.counters)
    if clash:
        raise ValueError(f"measure {measure.name!r}: counters {sorted(clash)} belong to another measure")
    _REGISTRY[measure.name] = measure
    return measure


def registered() -> tuple[Measure, ...]:
    """Every registered measure, in registration order (the order of the counters of a block)."""
    return tuple(_REGISTRY.values())


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
