"""The retrieved graph read back from a result file's rendered ``FormalTriplet`` text.

Files written by the Rust tool keep only the text of the retrieved subgraph
(``ok.stats.retrieval.result``). Its ``FormalTriplet`` lines are read back into a
:class:`~kag.results.model.RetrievedGraph`:

- a relationship line ``(start)-[:TYPE]->(end)``, or ``(start)-[:TYPE { key: value }]->(end)``
  with the relationship's properties (dropped), gives a relationship and its two nodes;
- a property line ``(id)-[key]->(value)`` (the value as JSON) gives a property of node
  ``id``; a node's name is the first of ``name_keys`` it has (a JSON string's text, any
  other value as written).

What cannot be read back: the seeds (the text holds none: ``seeds`` is None), the nodes'
labels, the properties of relationships, and nodes that no line mentions. Any other line
is passed over, so ``TextualTriplet`` text (sentences from templates) gives an empty graph:
for it only the entity names can be sought in the text, as the ``evidence`` block does.
"""

from __future__ import annotations

import json
import re

from kag.results.model import RetrievedGraph, RetrievedNode, RetrievedRelationship

_RELATIONSHIP = re.compile(r"\(([^()\n]*)\)-\[:([^\]\s{]+)(?:\s*\{[^\n]*\})?\]->\(([^()\n]*)\)")
_PROPERTY = re.compile(r"\(([^()\n]*)\)-\[([^\]:\n][^\]\n]*)\]->\((.*)\)")

#: The node property that names a node unless ``--node-name`` chooses others.
DEFAULT_NAME_KEYS = ("name",)


def _value_text(raw: str) -> str:
    """A property value's text: a JSON string's content; anything else as written."""
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, str):
            return value
    return raw


def graph_from_formal_text(text: str, name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS) -> RetrievedGraph:
    """The graph of ``FormalTriplet`` ``text`` (see the module docstring): nodes in the
    order the lines first mention them, relationships in line order, no seeds (None)."""
    order: dict[str, None] = {}
    names: dict[str, tuple[int, str]] = {}  # node -> (rank of its name key, name)
    rank = {key: i for i, key in enumerate(name_keys)}
    relationships: list[RetrievedRelationship] = []
    for line in text.splitlines():
        if not line.startswith("("):
            continue
        rel = _RELATIONSHIP.fullmatch(line)
        if rel is not None:
            start, kind, end = rel.groups()
            order.setdefault(start)
            order.setdefault(end)
            relationships.append(RetrievedRelationship(start, kind, end))
            continue
        prop = _PROPERTY.fullmatch(line)
        if prop is None:
            continue
        node, key, raw = prop.groups()
        order.setdefault(node)
        at = rank.get(key)
        if at is not None and (node not in names or at < names[node][0]):
            names[node] = (at, _value_text(raw))
    nodes = tuple(RetrievedNode(node, (), names[node][1] if node in names else None) for node in order)
    return RetrievedGraph(None, nodes, tuple(relationships))
