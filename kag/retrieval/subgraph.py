"""The subgraph a retrieval fetched, independent of the database it came from.

Both backends (Neo4j, Ladybug) return the same model: the seed nodes in similarity order,
every reached node with its labels and properties, and every relationship among the
reached nodes. The translations render it; `ordered_relationships` fixes the order in
which they see it, so that the same subgraph renders the same text whichever backend
fetched it and in whichever order the engine returned the rows.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kag.results.graph_text import DEFAULT_NAME_KEYS
from kag.results.model import RetrievedGraph, RetrievedNode, RetrievedRelationship, Seed

_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Node:
    """A node: ``key`` is what the translations print for it (Neo4j: the internal node
    id; Ladybug: the ``id`` column); ``properties`` never holds
    ``None`` (an absent property is not a property)."""

    key: str
    labels: frozenset[str] = frozenset()
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Relationship:
    """A directed relationship ``start -[type]-> end``; ``key`` identifies it among
    parallel relationships of the same type."""

    key: str
    type: str
    start: str
    end: str
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Subgraph:
    """``seeds``: the top-k node keys, best first. ``nodes``: every reached node by key.
    ``relationships``: every relationship whose two ends were reached (any order).
    ``seed_scores``: the seeds' similarity scores, in the same order, when the backend
    reports them (else empty)."""

    seeds: tuple[str, ...] = ()
    nodes: Mapping[str, Node] = field(default_factory=dict)
    relationships: tuple[Relationship, ...] = ()
    seed_scores: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for rel in self.relationships:
            for end in (rel.start, rel.end):
                if end not in self.nodes:
                    raise ValueError(
                        f"relationship {rel.key} refers to node {end!r}, which is not in the subgraph"
                    )


def key_order(key: str) -> tuple[int, int, str]:
    """Sort key for node keys: numbers by value (Neo4j ids), then other strings."""
    if _DIGITS.fullmatch(key):
        return (0, int(key), key)
    return (1, 0, key)


def node_order(subgraph: Subgraph) -> list[str]:
    """Node keys in discovery order: seed by seed, best seed first, a breadth-first walk
    from the seed over the relationships in both directions, skipping nodes already found.

    Within one node, neighbours are visited by (relationship type, neighbour key,
    relationship key); reached nodes that no walk from a seed meets (a backend may return
    them) come last, by key. This is the order in which the compatible Cypher query
    (``UNWIND seeds AS seed MATCH (seed)-[*0..N]-(reachable)`` then
    ``collect(DISTINCT reachable)``) lists the nodes, made deterministic.
    """
    adjacency: dict[str, list[tuple[str, tuple[int, int, str], tuple[int, int, str], str]]] = {}
    for rel in subgraph.relationships:
        rk = key_order(rel.key)
        adjacency.setdefault(rel.start, []).append((rel.type, key_order(rel.end), rk, rel.end))
        adjacency.setdefault(rel.end, []).append((rel.type, key_order(rel.start), rk, rel.start))
    for neighbours in adjacency.values():
        neighbours.sort()
    seen: dict[str, None] = {}
    for seed in subgraph.seeds:
        if seed not in subgraph.nodes or seed in seen:
            continue
        seen[seed] = None
        queue: deque[str] = deque([seed])
        while queue:
            current = queue.popleft()
            for _, _, _, neighbour in adjacency.get(current, ()):
                if neighbour not in seen:
                    seen[neighbour] = None
                    queue.append(neighbour)
    rest = sorted((k for k in subgraph.nodes if k not in seen), key=key_order)
    return [*seen, *rest]


def ordered_relationships(subgraph: Subgraph) -> list[Relationship]:
    """The relationships in rendering order: grouped by start node in `node_order`, then
    by end node in that order, then by type and key (the query's
    ``UNWIND nodes AS n MATCH (n)-[rel]->(m)``, made deterministic). Duplicates (the same
    key twice) are dropped."""
    rank = {key: i for i, key in enumerate(node_order(subgraph))}
    unique: dict[tuple[str, str], Relationship] = {}
    for rel in subgraph.relationships:
        unique.setdefault((rel.type, rel.key), rel)
    return sorted(
        unique.values(),
        key=lambda r: (rank[r.start], rank[r.end], r.type, key_order(r.key)),
    )


def display_name(properties: Mapping[str, Any], name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS) -> str | None:
    """The node's name: the first of ``name_keys`` it has (a non-string value as text);
    None when it has none."""
    for key in name_keys:
        value = properties.get(key)
        if value is not None:
            return value if isinstance(value, str) else str(value)
    return None


def retrieved_graph(subgraph: Subgraph, name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS) -> RetrievedGraph:
    """The record a result file keeps of ``subgraph``: seeds best first with their scores
    (None when not reported), nodes in `node_order` with sorted labels and display name,
    relationships in `ordered_relationships` order (the order of the rendered text)."""
    scores: tuple[float | None, ...] = (
        subgraph.seed_scores
        if len(subgraph.seed_scores) == len(subgraph.seeds)
        else (None,) * len(subgraph.seeds)
    )
    nodes = subgraph.nodes
    return RetrievedGraph(
        seeds=tuple(Seed(key, score) for key, score in zip(subgraph.seeds, scores, strict=True)),
        nodes=tuple(
            RetrievedNode(
                key, tuple(sorted(nodes[key].labels)), display_name(nodes[key].properties, name_keys)
            )
            for key in node_order(subgraph)
        ),
        relationships=tuple(
            RetrievedRelationship(r.start, r.type, r.end) for r in ordered_relationships(subgraph)
        ),
    )
