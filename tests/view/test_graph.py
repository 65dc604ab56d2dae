"""The retrieved context as triplets and as a laid-out graph (kag/view/graph.py)."""

from __future__ import annotations

import math

import pytest

from kag.view.graph import MAX_NODES, _layout, build_graph, parse_triplets


def test_parse_triplets_reads_relationships_and_properties_and_counts_other_lines() -> None:
    text = '(1)-[:TREATS]->(2)\n  (1)-[name]->("Vitamin C")\n\nnot a triplet\n(2)-[:R]->(3'
    triplets, other = parse_triplets(text)
    assert [(t.subject, t.relation, t.object, t.property) for t in triplets] == [
        ("1", "TREATS", "2", False),
        ("1", "name", "Vitamin C", True),
    ]
    assert other == 2


def test_a_property_needs_a_quoted_value_and_a_relationship_a_colon() -> None:
    triplets, _ = parse_triplets('(3)-[k]->(")\n(3)-[k]->("")\n(3)-[ :R ]->("q")\n(3)-[: R ]->(4)')
    assert [(t.relation, t.object, t.property) for t in triplets] == [
        ("k", '"', False),
        ("k", "", True),
        (":R", "q", True),  # a colon only after a space: read as a property
        ("R", "4", False),
    ]


def test_layout_is_in_the_unit_square_deterministic_and_separates_the_nodes() -> None:
    # A star around node 0, a path hanging off it, and a second component.
    edges = [(0, i) for i in range(1, 8)] + [(7, 8), (8, 9), (10, 11)]
    first = _layout(12, edges)
    assert first == _layout(12, edges)
    assert all(0.0 <= x <= 1.0 and 0.0 <= y <= 1.0 for x, y in first)
    closest = min(math.dist(a, b) for i, a in enumerate(first) for b in first[i + 1 :])
    assert closest > 0.05


def test_the_best_connected_node_is_the_centre_and_its_neighbours_are_nearer_than_theirs() -> None:
    edges = [(3, i) for i in range(5) if i != 3] + [(0, 5), (5, 6)]
    pos = _layout(7, edges)
    centre = (0.5, 0.5)
    assert math.dist(pos[3], centre) < 0.05
    assert math.dist(pos[0], centre) < math.dist(pos[5], centre) < math.dist(pos[6], centre)


def test_layout_of_no_node_one_node_and_self_loops() -> None:
    assert _layout(0, []) == []
    assert _layout(1, [(0, 0)]) == [(0.5, 0.5)]
    two = _layout(2, [(0, 1), (1, 1)])
    assert math.dist(two[0], two[1]) == pytest.approx(0.5)


def test_build_graph_names_nodes_marks_evidence_and_stops_at_max_nodes() -> None:
    text = '(1)-[:TREATS]->(2)\n(1)-[name]->("Vitamin C")\n(2)-[name]->("Scurvy")\n'
    graph = build_graph(text, ("vitamin c",))
    assert [(n.id, n.label, n.evidence) for n in graph.nodes] == [
        ("1", "Vitamin C", True),
        ("2", "Scurvy", False),
    ]
    assert graph.edges == ((0, 1, "TREATS"),) and not graph.truncated
    big = "\n".join(f"(hub)-[:R]->(n{i})" for i in range(MAX_NODES + 5))
    wide = build_graph(big)
    assert len(wide.nodes) == MAX_NODES and wide.truncated
    assert len(wide.edges) == MAX_NODES - 1
