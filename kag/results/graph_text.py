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

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator

from kag.results.model import RetrievedGraph, RetrievedNode, RetrievedRelationship

# Whole-text scans (one C loop each) rather than a Python loop over the lines: a KAG file's
# text has hundreds to thousands of lines, and `kag stats` reads every one.
_RELATIONSHIP_TEXT = r"\(([^)\n]*)\)-\[:([^\]\s{]+)(?: \{[^\n]*\})?\]->\(([^)\n]*)\)"
_RELATIONSHIP = re.compile(rf"\n{_RELATIONSHIP_TEXT}(?=\n)")
# One relationship line, as a whole line: `_RELATIONSHIP` matches exactly the lines of a
# text this matches in full, with the same groups (neither spans a newline).
_RELATIONSHIP_LINE = re.compile(_RELATIONSHIP_TEXT)

#: The node property that names a node unless ``--node-name`` chooses others.
DEFAULT_NAME_KEYS = ("name",)

Triple = tuple[str, str, str]
# A substring search: ``find(text, sub, start)`` as ``str.find`` answers it.
Find = Callable[[str, str, int], int]


@functools.cache
def _property_lines(name_keys: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"\n{_property_line(name_keys).pattern}(?=\n)")


@functools.cache
def _property_line(name_keys: tuple[str, ...]) -> re.Pattern[str]:
    """One property line of ``name_keys``, as a whole line: ``_property_lines`` matches
    exactly the lines of a text this matches in full (a match never spans a newline when
    no key holds one)."""
    keys = "|".join(re.escape(k) for k in name_keys)
    return re.compile(rf"\(([^)\n]*)\)-\[({keys})\]->\(([^\n]*)\)")


def value_text(raw: str) -> str:
    """A property value's text: a JSON string's content; anything else as written."""
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        if "\\" not in raw:
            return raw[1:-1]
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, str):
            return value
    return raw


def formal_parts(
    text: str, name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS
) -> tuple[dict[str, str | None], list[Triple]]:
    """The nodes (id -> name, None without one) and relationships (start, type, end) of
    ``FormalTriplet`` ``text``: nodes in the order the relationship lines first mention
    them, then the nodes only a name line mentions; relationships in line order."""
    relationships = formal_relationships(text)
    nodes: dict[str, str | None] = {}
    for start, _, end in relationships:
        nodes[start] = None
        nodes[end] = None
    nodes.update(formal_names(text, name_keys))
    return nodes, relationships


def formal_relationships(text: str) -> list[Triple]:
    """The relationships (start, type, end) of ``FormalTriplet`` ``text``, in line order."""
    found: list[Triple] = _RELATIONSHIP.findall(f"\n{text}\n")
    return found


def formal_relationships_from(text: str, starts: Iterable[str], find: Find = str.find) -> list[Triple]:
    """The relationships of :func:`formal_relationships` whose start is one of ``starts``
    (node ids), in line order: only the lines that begin with one of them are read (found
    by ``find``, as :func:`names_its_node` takes it)."""
    found: list[tuple[int, Triple]] = []
    for start in set(starts):
        for at, end in _lines_with(text, f"({start})-[:", find):
            line = _RELATIONSHIP_LINE.fullmatch(text, at, end)
            if line is not None:
                found.append((at, line.groups()))  # type: ignore[arg-type]
    found.sort()
    return [r for _, r in found]


def formal_names(text: str, name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS) -> dict[str, str]:
    """The names of the nodes of ``FormalTriplet`` ``text`` that have one (id -> name, the
    first of ``name_keys`` present), without reading the relationship lines."""
    rank = {key: i for i, key in enumerate(name_keys)}
    best: dict[str, int] = {}
    names: dict[str, str] = {}
    for node, key, raw in _property_lines(tuple(name_keys)).findall(f"\n{text}\n"):
        at = rank[key]
        if node not in best or at < best[node]:
            best[node] = at
            names[node] = value_text(raw)
    return names


def property_line_at(text: str, start: int, end: int, name_keys: tuple[str, ...]) -> re.Match[str] | None:
    """The match of the property line ``text[start:end]`` of one of ``name_keys`` (groups:
    node, key, raw value; :func:`value_text` reads the value), None when it is not one; as
    :func:`formal_property_at`, without reading the value."""
    return _property_line(name_keys).fullmatch(text, start, end)


def formal_property_at(
    text: str, start: int, end: int, name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS
) -> tuple[str, str, str] | None:
    """(node, key, value's text) of the line ``text[start:end]`` when it is a property line
    of one of ``name_keys``, else None. ``start`` and ``end`` bound one whole line (the text's
    ends or newlines), and no key holds a newline."""
    found = _property_line(name_keys).fullmatch(text, start, end)
    if found is None:
        return None
    node, key, raw = found.groups()
    return node, key, value_text(raw)


def _first_property_line(text: str, node: str, key: str, name_keys: tuple[str, ...], find: Find) -> int:
    """The start of the first property line of ``node`` and ``key`` in ``text``, -1 when none."""
    for at, end in _lines_with(text, f"({node})-[{key}]->(", find):
        line = formal_property_at(text, at, end, name_keys)
        if line is not None and line[0] == node and line[1] == key:
            return at
    return -1


def _lines_with(text: str, head: str, find: Find) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``text`` that starts with ``head``, in order (found by
    ``find``, a search for the newline and ``head``; a line's end is a newline or the text's)."""
    at = 0 if text.startswith(head) else _next_line_with(text, head, 0, find)
    while at != -1:
        end = text.find("\n", at)
        yield at, len(text) if end == -1 else end
        at = _next_line_with(text, head, at, find)


def _next_line_with(text: str, head: str, at: int, find: Find) -> int:
    """The start of the first line after the one at ``at`` that starts with ``head``, -1 when none."""
    found = find(text, "\n" + head, at)
    return -1 if found == -1 else found + 1


def names_its_node(
    text: str, start: int, node: str, key: str, name_keys: tuple[str, ...], find: Find = str.find
) -> bool:
    """Whether the property line of ``node`` and ``key`` starting at ``start`` gives the
    node its name in :func:`formal_names`: the node has no line of a key before ``key`` in
    ``name_keys``, and this is its first line of ``key``. No key holds a newline. ``find``:
    a substring search with the arguments and answer of ``str.find(text, sub, start)``."""
    if len(name_keys) == 1:
        # The usual case, one key: this line is its node's first when no line before it
        # starts with its head (the first line found is the newline before this one).
        head = f"({node})-[{key}]->("
        if start == 0 or (not text.startswith(head) and find(text, "\n" + head, 0) == start - 1):
            return True
    rank = {k: i for i, k in enumerate(name_keys)}
    if any(
        _first_property_line(text, node, k, name_keys, find) != -1 for k, i in rank.items() if i < rank[key]
    ):
        return False
    return _first_property_line(text, node, key, name_keys, find) == start


def graph_from_formal_text(text: str, name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS) -> RetrievedGraph:
    """The graph of ``FormalTriplet`` ``text`` (see the module docstring and
    :func:`formal_parts`), without seeds (None)."""
    nodes, relationships = formal_parts(text, name_keys)
    return RetrievedGraph(
        None,
        tuple(RetrievedNode(node, (), name) for node, name in nodes.items()),
        tuple(RetrievedRelationship(*r) for r in relationships),
    )
