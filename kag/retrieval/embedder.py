"""The ``Embedder`` retriever: embed the input, fetch the subgraph, render it.

Per retrieval: ``embed(model, [text])`` through the retriever's provider (the runner's
function, with its retries) -> ``top_k`` seed nodes by vector similarity -> every node
within ``neighborhood`` hops -> every relationship among the reached nodes -> the
translation's text. The result file records the input (``document``), its embedding
(``vec``), the counts of what was rendered and two times: the database's (query and
rendering, the compatible measure of docs/architecture.md) and the whole retrieval's
(embedding included).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kag.results import DatabaseStats, Retrieval, Timing
from kag.retrieval.base import RETRIEVAL_FAILED, EmbedFn, RetrievalError, RetrievalFailed
from kag.retrieval.subgraph import Subgraph, retrieved_graph
from kag.retrieval.translate import Translation


class GraphBackend(Protocol):
    backend: str

    async def fetch(self, vector: Sequence[float], top_k: int, neighborhood: int, index: str) -> Subgraph: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class RetrieverSettings:
    """A ``[retrievers.<name>]`` table resolved for one database (its ``extra.<db>``)."""

    name: str
    provider: str
    model: str
    top_k: int
    index: str
    neighborhood: int
    translation: Translation


def _f32(value: float) -> float:
    # Embeddings are float32: keep the shortest text that reads back as the same float32,
    # not the 17 digits of its float64 widening, which carry no more of the value.
    return float(str(np.float32(value)))


def _query_vector(vectors: object) -> list[float]:
    if not isinstance(vectors, list) or len(vectors) != 1:
        raise RetrievalError("the embedding provider did not return one vector for the input")
    vector = vectors[0]
    if not isinstance(vector, list | tuple) or not vector:
        raise RetrievalError("the embedding provider returned an empty vector")
    try:
        values = [float(x) for x in vector]
    except (TypeError, ValueError):
        raise RetrievalError("the embedding provider returned a vector that is not numbers") from None
    if not all(math.isfinite(x) for x in values):
        raise RetrievalError("the embedding provider returned NaN or infinite values")
    return [_f32(x) for x in values]


class EmbedderRetriever:
    """A `kag.retrieval.base.Retriever` over one graph backend (one driver per run)."""

    def __init__(
        self, settings: RetrieverSettings, database: str, graph: GraphBackend, embed: EmbedFn
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.database = database
        self.graph = graph
        self._embed = embed

    async def retrieve(self, text: str) -> Retrieval:
        """Embedding failures propagate as the provider raised them (the runner retries
        and reports them); database and rendering failures raise RetrievalError whose
        message starts with "Failed during the knowledge retrieval phase
        (KAG) on database '<name>': ". An empty subgraph gives ``result == ""``."""
        began = time.perf_counter()
        try:
            vector = _query_vector(await self._embed(self.settings.model, [text]))
            db_began = time.perf_counter()
            subgraph = await self.graph.fetch(
                vector, self.settings.top_k, self.settings.neighborhood, self.settings.index
            )
            rendered = self.settings.translation.render(subgraph)
            db_seconds = time.perf_counter() - db_began
        except RetrievalError as exc:
            raise RetrievalFailed(f"{RETRIEVAL_FAILED} '{self.database}': {exc}") from None
        return Retrieval(
            result=rendered.text,
            retriever="embedder",
            document=text,
            vector=vector,
            database=DatabaseStats(
                backend=self.graph.backend,
                vertices=rendered.vertices,
                relationships=rendered.relationships,
                properties=rendered.properties,
                time=Timing.from_seconds(db_seconds),
            ),
            time=Timing.from_seconds(time.perf_counter() - began),
            graph=retrieved_graph(subgraph),
        )

    async def aclose(self) -> None:
        await self.graph.aclose()
