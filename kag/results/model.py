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
class Retrieval:
    """``ok.stats.retrieval``: the rendered subgraph text and how it was obtained."""

    result: str
    retriever: str = "embedder"
    document: str | None = None
    vector: list[float] | None = None
    database: DatabaseStats | None = None
    time: Timing | None = None


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
