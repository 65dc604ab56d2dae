"""The result model: what one result file holds, as frozen dataclasses.

Layout: ``<results>/<dataset>/<question>/<prefix><setup>.json``. A result file holds exactly
``{"error": str}`` or ``{"ok": {"result": str, "stats": {...}}}`` (the compatible format of
docs/architecture.md, field for field, plus the additive fields ``generation_time``,
``usage``, ``attempts``, ``fingerprint`` and ``kag_version`` inside ``ok.stats``).
"""

from __future__ import annotations

__all__ = [
    "RESULT_SUFFIX",
    "TMP_SUFFIX",
    "AugmentedGeneration",
    "DatabaseStats",
    "ErrorResult",
    "ModelConfig",
    "OkResult",
    "OkStats",
    "Result",
    "Retrieval",
    "RetrievedGraph",
    "RetrievedNode",
    "RetrievedRelationship",
    "Seed",
    "Timing",
    "UnreadableResult",
    "Usage",
]

from dataclasses import dataclass, field

from kag.errors import InputError

RESULT_SUFFIX = ".json"
TMP_SUFFIX = ".tmp"


class UnreadableResult(InputError):
    """A result file that is not one of the two result shapes."""


@dataclass(frozen=True)
class Timing:
    """A duration as a result file holds it: ``{"secs": int, "nanos": int}``."""

    secs: int
    nanos: int

    @property
    def seconds(self) -> float:
        return self.secs + self.nanos / 1e9

    @classmethod
    def from_seconds(cls, seconds: float) -> Timing:
        total = max(0, round(seconds * 1e9))
        return cls(total // 1_000_000_000, total % 1_000_000_000)

    def to_json(self) -> dict[str, int]:
        return {"secs": self.secs, "nanos": self.nanos}


@dataclass(frozen=True)
class DatabaseStats:
    backend: str  # "neo4j" or "ladybug"
    vertices: int | None = None
    relationships: int | None = None
    properties: int | None = None
    time: Timing | None = None


@dataclass(frozen=True)
class Seed:
    """A seed node of a retrieval: its ``id`` (the node key) and similarity ``score`` (None
    when the backend does not report it)."""

    id: str
    score: float | None = None


@dataclass(frozen=True)
class RetrievedNode:
    """A retrieved node: ``id`` as the rendered text prints it, its labels (sorted) and
    display ``name`` (None when the node has none)."""

    id: str
    labels: tuple[str, ...] = ()
    name: str | None = None


@dataclass(frozen=True)
class RetrievedRelationship:
    """A retrieved relationship ``start -[type]-> end`` (node ids)."""

    start: str
    type: str
    end: str


@dataclass(frozen=True)
class RetrievedGraph:
    """``ok.stats.retrieval.graph`` (additive, written by kag): the subgraph a retrieval
    fetched. ``seeds`` best first; None when the graph was read back from text (a file of
    the Rust tool), which holds no seeds."""

    seeds: tuple[Seed, ...] | None = ()
    nodes: tuple[RetrievedNode, ...] = ()
    relationships: tuple[RetrievedRelationship, ...] = ()


@dataclass(frozen=True)
class Retrieval:
    """``ok.stats.retrieval``: the rendered subgraph text and how it was obtained;
    ``graph`` the structured subgraph (additive; None in files that lack it)."""

    result: str
    retriever: str = "embedder"
    document: str | None = None
    vector: list[float] | None = None
    database: DatabaseStats | None = None
    time: Timing | None = None
    graph: RetrievedGraph | None = None


@dataclass(frozen=True)
class AugmentedGeneration:
    retriever: str
    database: str


@dataclass(frozen=True)
class ModelConfig:
    provider: str
    model: str
    temperature: float
    tokens: int | None = None
    augmented_generation: AugmentedGeneration | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class OkStats:
    prompt: str | None = None
    retrieval: Retrieval | None = None
    config: ModelConfig | None = None
    time: Timing | None = None
    # Additive fields written by kag benchmark; None when the file lacks them.
    generation_time: Timing | None = None
    usage: Usage | None = None
    attempts: int | None = None
    fingerprint: str | None = None
    kag_version: str | None = None


@dataclass(frozen=True)
class OkResult:
    result: str
    stats: OkStats = field(default_factory=OkStats)


@dataclass(frozen=True)
class ErrorResult:
    error: str


Result = OkResult | ErrorResult
