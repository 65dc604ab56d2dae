"""Shared by the tests that write result trees: flat builders of the Rust tool's nested result model.

A test states the values it grades on (response, model, retrieval counts, times); these
helpers hold the nesting (``OkResult`` > ``OkStats`` > ``ModelConfig`` / ``Retrieval`` >
``DatabaseStats``) once. The files are still written by kag's own writer
(``kag.results.write_result``), so what the tests read is what ``kag benchmark`` writes.
"""

from __future__ import annotations

from typing import Any

from kag.results import AugmentedGeneration, DatabaseStats, ModelConfig, OkResult, OkStats, Retrieval, Timing


def neo4j_retrieval(
    result: str,
    vertices: int | None,
    relationships: int | None,
    properties: int | None,
    *,
    db_time: Timing | None = None,
    time: Timing | None = None,
    document: str | None = None,
    vector: list[float] | None = None,
) -> Retrieval:
    """A retrieval from a Neo4j graph with the database's counts (``ok.stats.retrieval``)."""
    return Retrieval(
        result=result,
        document=document,
        vector=vector,
        database=DatabaseStats("neo4j", vertices, relationships, properties, db_time),
        time=time,
    )


def ok_result(
    response: str,
    *,
    model: str | None = None,
    provider: str = "prov",
    tokens: int | None = None,
    augmented: bool = False,
    **stats: Any,
) -> OkResult:
    """An ``ok`` result; with ``model``, its config (temperature 0, ``augmented``: the KAG
    setup's embedding retriever on neo4j). ``stats`` are the other ``OkStats`` fields."""
    config = None
    if model is not None:
        rag = AugmentedGeneration("emb", "neo4j") if augmented else None
        config = ModelConfig(provider, model, 0.0, tokens, rag)
    return OkResult(response, OkStats(config=config, **stats))
