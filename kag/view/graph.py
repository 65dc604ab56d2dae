"""The retrieved context of a result file as triplets and as a laid-out graph.

The retrieval text kag and the Rust tool write holds one statement a line,
``(A)-[:REL]->(B)`` for a relationship and ``(A)-[key]->("value")`` for a property of A.
Lines of another shape are kept as they are (the table shows them) and not drawn.
The layout is a deterministic spring layout of at most :data:`MAX_NODES` nodes.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from kag.grading.triplets.normalize import contains_words, normalize_prompt

MAX_LINES = 5000
MAX_NODES = 80
_LINE = re.compile(r"\((?P<a>[^()]{0,200})\)-\[(?P<rel>[^\]]{0,200})\]->\((?P<b>.{0,2000})\)")


@dataclass(frozen=True)
class Triplet:
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
    out, other = [], 0
    for line in text.splitlines()[:MAX_LINES]:
        line = line.strip()
        if not line:
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            other += 1
            continue
        rel, b = m["rel"], m["b"]
        prop = not rel.startswith(":") and b.startswith('"') and b.endswith('"') and len(b) >= 2
        out.append(Triplet(m["a"], rel.lstrip(":").strip(), b[1:-1] if prop else b, prop))
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


def _layout(n: int, edges: list[tuple[int, int]], iterations: int = 30) -> list[tuple[float, float]]:
    """Fruchterman-Reingold in the unit square from a circle (deterministic), scaled to 0..1."""
    import numpy as np

    if n == 0:
        return []
    angles = 2 * np.pi * np.arange(n) / n
    pos = np.stack([0.5 + 0.45 * np.cos(angles), 0.5 + 0.45 * np.sin(angles)], axis=1)
    k = math.sqrt(1.0 / n)
    temp = 0.1
    pairs = np.array([(a, b) for a, b in edges if a != b], dtype=np.int64).reshape(-1, 2)
    for _ in range(iterations):
        delta = pos[:, None, :] - pos[None, :, :]
        d2 = np.maximum((delta**2).sum(axis=2), 1e-9)
        np.fill_diagonal(d2, np.inf)
        disp = (delta * (k * k / d2)[:, :, None]).sum(axis=1)
        if len(pairs):
            dv = pos[pairs[:, 0]] - pos[pairs[:, 1]]
            dist = np.maximum(np.sqrt((dv**2).sum(axis=1)), 1e-9)
            pull = dv * (dist / k)[:, None]
            for axis in (0, 1):
                disp[:, axis] -= np.bincount(pairs[:, 0], pull[:, axis], n)
                disp[:, axis] += np.bincount(pairs[:, 1], pull[:, axis], n)
        length = np.maximum(np.sqrt((disp**2).sum(axis=1)), 1e-9)
        pos += disp / length[:, None] * np.minimum(length, temp)[:, None]
        temp *= 0.95
    low, span = pos.min(axis=0), pos.max(axis=0) - pos.min(axis=0)
    span[span == 0] = 1.0
    scaled = (pos - low) / span
    return [(float(x), float(y)) for x, y in scaled]
