"""The rendering order of a subgraph: breadth-first from the seeds, then relationships
grouped by start node (the Rust query's order, made deterministic)."""

from __future__ import annotations

import pytest

from kag.retrieval.subgraph import Node, Relationship, Subgraph, key_order, node_order, ordered_relationships


def graph(edges: list[tuple[str, str, str]], seeds: tuple[str, ...], extra: tuple[str, ...] = ()) -> Subgraph:
    keys = {k for a, b, _ in edges for k in (a, b)} | set(seeds) | set(extra)
    rels = tuple(Relationship(f"r{i}", t, a, b) for i, (a, b, t) in enumerate(edges))
    return Subgraph(seeds, {k: Node(k) for k in keys}, rels)


def test_seed_by_seed_breadth_first_neighbours_by_type_then_key() -> None:
    #   s1 -A-> x, s1 <-B- y, x -A-> z, s2 -A-> w, w -A-> x ; seeds s1 then s2
    g = graph(
        [("s1", "x", "A"), ("y", "s1", "B"), ("x", "z", "A"), ("s2", "w", "A"), ("w", "x", "A")],
        seeds=("s1", "s2"),
    )
    # From s1: hop 1 (x by A, y by B), hop 2 (z, and w through x); then s2 (w already found).
    assert node_order(g) == ["s1", "x", "y", "w", "z", "s2"]
    assert [(r.start, r.end) for r in ordered_relationships(g)] == [
        ("s1", "x"),
        ("x", "z"),
        ("y", "s1"),
        ("w", "x"),
        ("s2", "w"),
    ]


def test_nodes_no_seed_reaches_come_last_by_key() -> None:
    g = graph([("a", "b", "R"), ("10", "9", "R")], seeds=("a",), extra=("c",))
    assert node_order(g) == ["a", "b", "9", "10", "c"]  # numbers by value, before other keys


def test_parallel_relationships_keep_their_order_by_type_then_key_and_duplicates_go() -> None:
    rels = (
        Relationship("7", "T", "a", "b"),
        Relationship("3", "T", "a", "b"),
        Relationship("5", "S", "a", "b"),
        Relationship("3", "T", "a", "b"),
    )
    g = Subgraph(("a",), {"a": Node("a"), "b": Node("b")}, rels)
    assert [(r.type, r.key) for r in ordered_relationships(g)] == [("S", "5"), ("T", "3"), ("T", "7")]


def test_relationship_to_a_missing_node_is_refused() -> None:
    with pytest.raises(ValueError, match="refers to node 'b'"):
        Subgraph((), {"a": Node("a")}, (Relationship("1", "R", "a", "b"),))


def test_key_order_sorts_numbers_by_value() -> None:
    assert sorted(["10", "9", "b", "a", "100"], key=key_order) == ["9", "10", "100", "a", "b"]
