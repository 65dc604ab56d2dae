"""The triplet grader's values: inputs after validation, per-entry scores, run summaries."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, NamedTuple

AXES: tuple[str, ...] = ("schema", "entity_f1", "relation_acc", "weight", "grounding")
AXIS_WEIGHTS: dict[str, float] = {
    "schema": 0.30,
    "entity_f1": 0.25,
    "relation_acc": 0.20,
    "weight": 0.10,
    "grounding": 0.15,
}
ALIGN_WEIGHTS: tuple[float, float, float] = (0.45, 0.45, 0.10)  # source, target, relation
ACCEPT_THRESHOLD = 0.50
# Pairs one entry may be aligned on (valid predicted × gold triplets; in fuzzy and embedding
# mode also predicted × gold entities). At this size the alignment matrix alone takes 800 MB.
MAX_ENTRY_PAIRS = 100_000_000

DEFAULT_RELATIONS: tuple[str, ...] = (
    "based_on",
    "defined_as",
    "part_of",
    "is_a",
    "instance_of",
    "has_property",
    "used_for",
    "uses",
    "causes",
    "located_in",
    "created_by",
    "owned_by",
    "member_of",
    "depends_on",
    "produces",
    "precedes",
    "contains",
    "derived_from",
    "related_to",
    "contrasts_with",
)

Unmatched = Literal["self_loop", "invalid_relation", "ungrounded", "novel_grounded"]
HALLUCINATION_CLASSES: tuple[Unmatched, ...] = (
    "self_loop",
    "invalid_relation",
    "ungrounded",
    "novel_grounded",
)
Status = Literal["ok", "missing", "unparseable", "malformed"]


class MatchMode(str, Enum):
    """How two normalized strings that differ are compared."""

    EXACT = "exact"
    FUZZY = "fuzzy"
    EMBEDDING = "embedding"


DEFAULT_GATES: dict[MatchMode, float] = {MatchMode.FUZZY: 0.70, MatchMode.EMBEDDING: 0.85}


class Triplet(NamedTuple):
    """A schema-valid triplet: the original strings and their normalized forms.

    A named tuple rather than a frozen dataclass: tens of thousands are built per run, and a
    tuple is several times cheaper to create while just as immutable.
    """

    source: str
    source_type: str
    target: str
    target_type: str
    relation: str
    weight: float
    norm_source: str
    norm_target: str
    norm_relation: str


@dataclass(frozen=True, slots=True)
class GoldEntry:
    """A gold entry, with the index structure every prediction is compared against.

    ``entities`` / ``relations``: the distinct normalized titles / relations in order of
    first appearance; ``source_at`` etc. give each triplet's position in them.
    """

    id: str
    where: str  # "gold.jsonl:3": for messages
    prompt: str  # normalized prompt text ("" when absent)
    triplets: tuple[Triplet, ...]
    entities: tuple[str, ...]
    relations: tuple[str, ...]
    source_at: tuple[int, ...]
    target_at: tuple[int, ...]
    relation_at: tuple[int, ...]

    @classmethod
    def build(cls, id: str, where: str, prompt: str, triplets: tuple[Triplet, ...]) -> GoldEntry:
        entity_at: dict[str, int] = {}
        relation_at: dict[str, int] = {}
        for t in triplets:
            entity_at.setdefault(t.norm_source, len(entity_at))
            entity_at.setdefault(t.norm_target, len(entity_at))
            relation_at.setdefault(t.norm_relation, len(relation_at))
        return cls(
            id,
            where,
            prompt,
            triplets,
            tuple(entity_at),
            tuple(relation_at),
            tuple(entity_at[t.norm_source] for t in triplets),
            tuple(entity_at[t.norm_target] for t in triplets),
            tuple(relation_at[t.norm_relation] for t in triplets),
        )


@dataclass(frozen=True, slots=True)
class Prediction:
    """One prediction entry as read: the items list, or why there is none.

    ``status``: ``ok`` (a list, possibly empty), ``unparseable`` (raw text holding no JSON
    array), ``malformed`` (not a list after parsing). ``missing`` is set by the grader for
    gold ids absent from the file.
    """

    id: str
    status: Status
    items: tuple[Any, ...]


class Pair(NamedTuple):
    """An assigned (predicted, gold) pair with a positive alignment similarity (immutable)."""

    pred: int  # index into the prediction's item list
    gold: int  # index into the gold entry's triplets
    align: float
    source: float
    target: float
    relation: float
    accepted: bool
    exact: bool  # accepted, and normalized source, target and relation all equal


@dataclass(frozen=True, slots=True)
class EntryScore:
    """Everything measured on one (gold entry, prediction) pair."""

    id: str
    status: Status
    predicted_items: int
    valid: int
    gold_triplets: int
    schema: float | None
    entity_f1: float | None
    relation_acc: float | None
    weight: float | None
    grounding: float | None
    composite: float
    entity_matches: int
    pred_entities: int
    gold_entities: int
    pairs: tuple[Pair, ...]
    unmatched: tuple[tuple[int, Unmatched], ...]
    invalid: tuple[tuple[int, str], ...]
    relations: tuple[str, ...]  # relation keys of the valid predicted triplets
    # Only when details were asked for (empty otherwise): the valid predicted triplets with
    # their item index, and the gold ones (``Pair.gold`` indexes them); each keeps its
    # original strings beside the normalized.
    triplets: tuple[tuple[int, Triplet], ...] = ()
    gold: tuple[Triplet, ...] = ()

    @property
    def accepted(self) -> int:
        return sum(1 for pair in self.pairs if pair.accepted)

    @property
    def exact_hits(self) -> int:
        return sum(1 for pair in self.pairs if pair.exact)

    def axis(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value


@dataclass(frozen=True, slots=True)
class PRF:
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One prediction file graded against the gold file."""

    predictions: str
    entries: int
    composite: float | None
    axes: dict[str, float | None]
    entity: PRF
    triplet: PRF
    hallucination_rate: float | None
    counts: dict[str, int]
    relation_distribution: dict[str, int]
    scores: tuple[EntryScore, ...]


@dataclass(frozen=True, slots=True)
class TripletReport:
    """Every prediction file graded against one gold file.

    ``details``: whether the scores keep each entry's triplets (``EntryScore.triplets`` and
    ``.gold``), which the per-entry details need.
    """

    gold: str
    match_mode: MatchMode
    similarity_backend: str
    gate: float | None
    relations: tuple[str, ...]
    runs: tuple[RunSummary, ...]
    details: bool = False
