"""The retrieved context of a result file as triplets and as a laid-out graph.

The retrieval text kag and the Rust tool write holds one statement a line,
``(A)-[:REL]->(B)`` for a relationship and ``(A)-[key]->("value")`` for a property of A.
Lines of another shape are kept as they are (the table shows them) and not drawn.
The layout is a deterministic radial tree layout of at most :data:`MAX_NODES` nodes.

:func:`graph_data` is what a question's page hands its graph library: the file's recorded
graph (``ok.stats.retrieval.graph``), else the graph read back from its ``FormalTriplet``
text (:mod:`kag.results.graph_text`), its nodes named, its seeds ranked, its gold evidence
marked as retrieval quality finds it, and reduced to the neighbourhood of the seeds and
the gold when it is larger than :data:`MAX_SHOWN` nodes.
"""

from __future__ import annotations

import functools
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

from kag.grading.retrieval_quality import normalized_triple
from kag.grading.triplets.normalize import (
    contains_words,
    normalize_prompt,
    normalize_relation,
    normalize_title,
)
from kag.results.graph_text import formal_names, formal_parts
from kag.results.model import RetrievedGraph

MAX_LINES = 5000
MAX_NODES = 80
_LINE = re.compile(r"\((?P<a>[^()]{0,200})\)-\[(?P<rel>[^\]]{0,200})\]->\((?P<b>.{0,2000})\)")


class Triplet(NamedTuple):
    """One statement of a retrieval text (a tuple: a text has hundreds, built per page)."""

    subject: str
    relation: str
    object: str
    property: bool  # a property line: ``object`` is the value


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    x: float
    y: float
    evidence: bool


@dataclass(frozen=True)
class Graph:
    triplets: tuple[Triplet, ...]
    other_lines: int
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int, str], ...]
    truncated: bool


def parse_triplets(text: str) -> tuple[list[Triplet], int]:
    """The triplets of a retrieval text (at most MAX_LINES lines read) and the count of other lines."""
    out: list[Triplet] = []
    other = 0
    match, add = _LINE.fullmatch, out.append
    for line in text.splitlines()[:MAX_LINES]:
        line = line.strip()
        if not line:
            continue
        m = match(line)
        if m is None:
            other += 1
            continue
        a, rel, b = m.groups()
        if rel[:1] != ":" and len(b) >= 2 and b[0] == '"' == b[-1]:
            add(Triplet(a, rel.strip(), b[1:-1], True))
        else:
            add(Triplet(a, rel.lstrip(":").strip(), b, False))
    return out, other


@functools.lru_cache(maxsize=64)
def build_graph(text: str, evidence: tuple[str, ...] = ()) -> Graph:
    """The graph of a retrieval text (kept for the last 64 texts: a page opened again is not laid out again)."""
    triplets, other = parse_triplets(text)
    names: dict[str, str] = {}
    for t in triplets:
        if t.property and t.relation in {"name", "title", "label"} and t.subject not in names:
            names[t.subject] = t.object
    order: dict[str, int] = {}
    edges: list[tuple[int, int, str]] = []
    truncated = False
    for t in triplets:
        if t.property:
            continue
        for n in (t.subject, t.object):
            if n not in order:
                if len(order) >= MAX_NODES:
                    truncated = True
                    break
                order[n] = len(order)
        if t.subject in order and t.object in order:
            edges.append((order[t.subject], order[t.object], t.relation))
    ids = list(order)
    wanted = [normalize_prompt(e) for e in evidence]
    positions = _layout(len(ids), [(a, b) for a, b, _ in edges])
    nodes = []
    for i, node_id in enumerate(ids):
        label = names.get(node_id, node_id)
        text_norm = normalize_prompt(label)
        hit = any(w and contains_words(text_norm, w) for w in wanted)
        nodes.append(Node(node_id, label, positions[i][0], positions[i][1], hit))
    return Graph(tuple(triplets), other, tuple(nodes), tuple(edges), truncated)


def _layout(n: int, edges: list[tuple[int, int]]) -> list[tuple[float, float]]:
    """A radial tree layout in the unit square: each connected component is a breadth-first
    tree from its best-connected node (ties: the first drawn), every node given an angle
    wedge in proportion to the leaves below it and a ring by its depth; with several
    components, their roots share the first ring around an empty centre, the largest first.
    The centre is (0.5, 0.5) and the outer ring touches the unit square.

    Retrieval expands a subgraph outwards from the entities it matched, so its
    breadth-first tree is the shape of how it was found; and the cost is linear in the
    nodes and edges (a force layout of 80 nodes costs tens of milliseconds per graph, and a
    question's page draws one graph per setup). Deterministic: the same text, the same
    drawing.
    """
    if n == 0:
        return []
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if a != b:
            neighbours[a].append(b)
            neighbours[b].append(a)
    degree = [len(set(ns)) for ns in neighbours]
    parent = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[tuple[int, list[int]]] = []  # (root, its component in breadth-first order)
    seen = [False] * n
    for start in sorted(range(n), key=lambda i: (-degree[i], i)):
        if seen[start]:
            continue
        seen[start] = True
        order = [start]
        for node in order:  # grows as it is read: a breadth-first walk
            for other in neighbours[node]:
                if not seen[other]:
                    seen[other] = True
                    parent[other] = node
                    children[node].append(other)
                    order.append(other)
        roots.append((start, order))
    roots.sort(key=lambda r: (-len(r[1]), r[0]))
    leaves = [1] * n
    for _, order in roots:
        for node in reversed(order):
            if children[node]:
                leaves[node] = sum(leaves[c] for c in children[node])
    depth = [0] * n
    angle = [0.0] * n
    wedges: list[tuple[int, float, float]] = []  # (node, start, width) of each root
    single = len(roots) == 1
    total = sum(leaves[r] for r, _ in roots)
    at = 0.0
    for root, _ in roots:
        width = 2 * math.pi * leaves[root] / total
        wedges.append((root, at, width))
        at += width
    for root, first, width in wedges:
        depth[root] = 0 if single else 1
        stack: list[tuple[int, float, float]] = [(root, first, width)]
        while stack:
            node, lo, span = stack.pop()
            angle[node] = lo + span / 2
            inner = lo
            for c in children[node]:
                share = span * leaves[c] / leaves[node]
                depth[c] = depth[node] + 1
                stack.append((c, inner, share))
                inner += share
    rings = max(depth) or 1
    return [
        (0.5 + 0.5 * depth[i] / rings * math.cos(angle[i]), 0.5 + 0.5 * depth[i] / rings * math.sin(angle[i]))
        for i in range(n)
    ]


#: The properties that label a node read back from text when it has no ``name`` (the one
#: retrieval quality matches the gold against): labels only, never matched.
LABEL_KEYS = ("title", "label", "value")
#: The most nodes of one subgraph a question's page draws: past it, the neighbourhood of
#: the seeds and the gold evidence (see :func:`graph_data`).
MAX_SHOWN = 150


@functools.lru_cache(maxsize=64)
def graph_data(
    text: str,
    recorded: RetrievedGraph | None,
    entities: tuple[str, ...] = (),
    triples: tuple[tuple[str, str, str], ...] = (),
    limit: int = MAX_SHOWN,
) -> dict[str, Any]:
    """The subgraph a question's page draws, as JSON-ready values: the file's ``recorded``
    graph, else the one read back from its ``FormalTriplet`` ``text`` (no seeds).

    - ``nodes``: ``{"id", "key", "label", "seed", "gold", "x", "y"}``: ``id`` the drawing's
      own (``n0``, ``n1``...), ``key`` the node's id in the file, ``label`` its name (read
      back from text without one, the first of its :data:`LABEL_KEYS` properties; else its
      id), ``seed`` its rank among the seeds (1 = best; None when it is not
      one), ``gold`` whether it is a gold entity or an end of a gold triple that was found;
      ``x``, ``y`` a start layout in the unit square (:func:`_layout`);
    - ``edges``: ``{"id", "source", "target", "label", "gold"}``, ``label`` the
      relationship's type, ``gold`` whether it is a gold triple;
    - ``total_nodes``, ``total_edges``, ``hidden_nodes``, ``hidden_edges``;
      ``seeds``: whether the file holds seeds; ``recorded``: whether the graph is the
      recorded one.

    Names, types and triples are compared as the retrieval-quality measure compares them
    in its ``exact`` mode (:mod:`kag.grading.retrieval_quality`). Past ``limit`` nodes, the
    nodes kept are the seeds (best first) and the gold nodes, then their neighbours ring by
    ring (breadth first, in the order of the relationships) up to ``limit``; without any
    seed or gold node, the same from the best-connected node. A relationship whose ends are
    not both kept is hidden; a relationship to a node the graph does not list is left out.
    """
    seeds: list[str] | None
    if recorded is not None:
        names = {n.id: n.name for n in recorded.nodes}
        parts = [(r.start, r.type, r.end) for r in recorded.relationships]
        seeds = [seed.id for seed in recorded.seeds] if recorded.seeds is not None else None
        labels: dict[str, str] = {}
    else:  # the parts of graph_from_formal_text's graph, without a dataclass per node
        names, parts = formal_parts(text)
        seeds = None
        labels = formal_names(text, LABEL_KEYS)
    keys = list(names)
    at = {key: i for i, key in enumerate(keys)}
    rels = [(at[a], t, at[b]) for a, t, b in parts if a in at and b in at]
    seed_rank: dict[int, int] = {}
    for rank, seed in enumerate(seeds or (), start=1):
        if seed in at:
            seed_rank.setdefault(at[seed], rank)
    normal = [normalize_title(name) if (name := names[k]) else "" for k in keys]
    gold_names = {normalize_title(e) for e in entities}
    gold_triples = {normalized_triple(t) for t in triples}
    gold_edges = [(normal[a], normalize_relation(t), normal[b]) in gold_triples for a, t, b in rels]
    gold = [bool(name) and name in gold_names for name in normal]
    for (a, _, b), hit in zip(rels, gold_edges, strict=True):
        if hit:
            gold[a] = gold[b] = True
    kept = _neighbourhood(
        len(keys),
        rels,
        [*sorted(seed_rank, key=seed_rank.__getitem__), *(i for i, g in enumerate(gold) if g)],
        limit,
    )
    shown = sorted(kept)
    new = {old: i for i, old in enumerate(shown)}
    edges = [(i, rel) for i, rel in enumerate(rels) if rel[0] in new and rel[2] in new]
    positions = _layout(len(shown), [(new[a], new[b]) for _, (a, _, b) in edges])
    return {
        "nodes": [
            {
                "id": f"n{new[old]}",
                "key": keys[old],
                "label": names[keys[old]] or labels.get(keys[old]) or keys[old],
                "seed": seed_rank.get(old),
                "gold": gold[old],
                "x": round(positions[new[old]][0], 4),
                "y": round(positions[new[old]][1], 4),
            }
            for old in shown
        ],
        "edges": [
            {"id": f"e{j}", "source": f"n{new[a]}", "target": f"n{new[b]}", "label": t, "gold": gold_edges[i]}
            for j, (i, (a, t, b)) in enumerate(edges)
        ],
        "total_nodes": len(keys),
        "total_edges": len(rels),
        "hidden_nodes": len(keys) - len(shown),
        "hidden_edges": len(rels) - len(edges),
        "seeds": seeds is not None,
        "recorded": recorded is not None,
    }


def _neighbourhood(n: int, rels: list[tuple[int, str, int]], focus: list[int], limit: int) -> set[int]:
    """The nodes (of ``0..n-1``) kept of a graph of ``n`` nodes: all of them up to ``limit``;
    past it, ``focus`` (in order) and then its neighbours breadth first, up to ``limit``;
    with no ``focus``, breadth first from the best-connected node not yet reached (ties:
    the first), component after component."""
    if n <= limit:
        return set(range(n))
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, _, b in rels:
        if a != b:
            neighbours[a].append(b)
            neighbours[b].append(a)
    kept: set[int] = set()
    queue: deque[int] = deque()
    for node in focus:
        if node not in kept and len(kept) < limit:
            kept.add(node)
            queue.append(node)
    starts = iter(sorted(range(n), key=lambda i: (-len(neighbours[i]), i))) if not focus else iter(())
    while len(kept) < limit:
        if not queue:
            start = next((s for s in starts if s not in kept), None)
            if start is None:
                break
            kept.add(start)
            queue.append(start)
            continue
        for other in neighbours[queue.popleft()]:
            if other not in kept and len(kept) < limit:
                kept.add(other)
                queue.append(other)
    return kept
