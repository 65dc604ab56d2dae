"""The retrieved context as triplets and as a laid-out graph (kag/view/graph.py)."""

from __future__ import annotations

import math

import pytest

from kag.results.model import RetrievedGraph, RetrievedNode, RetrievedRelationship, Seed
from kag.view.graph import MAX_NODES, _layout, build_graph, graph_data, parse_triplets


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


RUST_TEXT = (
    '(1)-[:CAUSED_BY]->(2)\n(1)-[name]->("Scurvy")\n(2)-[name]->("Vitamin C deficiency")\n'
    '(4)-[:CAUSED_BY]->(5)\n(4)-[name]->("Rickets")\n(5)-[:DEFICIENCY_OF]->(6)\n'
)
GOLD = (("Scurvy", "Vitamin C"), (("Scurvy", "caused by", "Vitamin C deficiency"),))


def _nodes(data: dict[str, object]) -> list[tuple[object, ...]]:
    return [(n["key"], n["label"], n["seed"], n["gold"]) for n in data["nodes"]]  # type: ignore[attr-defined,index]


def test_graph_data_reads_back_the_text_names_its_nodes_and_marks_the_gold_found() -> None:
    data = graph_data(RUST_TEXT, None, *GOLD)
    # Named by their name property, else by their id; no seeds in a text; the gold triple
    # found (its type normalized: CAUSED_BY reads "caused by") marks its edge and both ends.
    assert _nodes(data) == [
        ("1", "Scurvy", None, True),
        ("2", "Vitamin C deficiency", None, True),
        ("4", "Rickets", None, False),
        ("5", "5", None, False),
        ("6", "6", None, False),
    ]
    edges = [(e["source"], e["label"], e["target"], e["gold"]) for e in data["edges"]]  # type: ignore[attr-defined]
    assert edges == [
        ("n0", "CAUSED_BY", "n1", True),
        ("n2", "CAUSED_BY", "n3", False),
        ("n3", "DEFICIENCY_OF", "n4", False),
    ]
    assert (data["seeds"], data["recorded"], data["hidden_nodes"], data["hidden_edges"]) == (
        False,
        False,
        0,
        0,
    )
    assert all(0.0 <= n["x"] <= 1.0 and 0.0 <= n["y"] <= 1.0 for n in data["nodes"])  # type: ignore[attr-defined]


def test_graph_data_prefers_the_recorded_graph_with_its_seeds_ranked() -> None:
    recorded = RetrievedGraph(
        (Seed("4", 0.9), Seed("1", 0.5), Seed("99", 0.1)),  # a seed that is not a node is passed over
        (
            RetrievedNode("1", ("Disease",), "scurvy"),
            RetrievedNode("3", (), "VITAMIN_C"),
            RetrievedNode("4", (), None),
        ),
        (RetrievedRelationship("1", "R", "3"), RetrievedRelationship("1", "R", "77")),  # 77: no such node
    )
    data = graph_data("ignored when a graph is recorded", recorded, *GOLD)
    # Entities compared as retrieval quality compares them: case folded, _ as a space.
    assert _nodes(data) == [("1", "scurvy", 2, True), ("3", "VITAMIN_C", None, True), ("4", "4", 1, False)]
    assert (data["seeds"], data["recorded"], data["total_edges"]) == (True, True, 1)


def test_a_large_graph_is_cut_to_the_neighbourhood_of_the_seeds_and_the_gold() -> None:
    # A chain 0-1-2-...-399 and the gold node at its far end: past 20 nodes, the seed (node
    # 200) and the gold (node 0) come first, then their neighbours ring by ring.
    names = {str(i): f"node {i}" for i in range(400)}
    recorded = RetrievedGraph(
        (Seed("200", 1.0),),
        tuple(RetrievedNode(k, (), v) for k, v in names.items()),
        tuple(RetrievedRelationship(str(i), "NEXT", str(i + 1)) for i in range(399)),
    )
    data = graph_data("", recorded, ("node 0",), (), limit=20)
    kept = {int(n["key"]) for n in data["nodes"]}  # type: ignore[attr-defined]
    assert len(kept) == 20 and {0, 200} <= kept
    # The seed's ring grows both ways along the chain, the gold's one way: 13 and 7 nodes.
    assert kept == set(range(7)) | set(range(194, 207))
    assert (data["hidden_nodes"], data["total_nodes"]) == (380, 400)
    assert len(data["edges"]) == 18 and data["hidden_edges"] == 399 - 18  # type: ignore[arg-type]
    assert data == graph_data("", recorded, ("node 0",), (), limit=20)  # deterministic


def test_without_seeds_or_gold_a_large_graph_keeps_the_best_connected_node_s_neighbourhood() -> None:
    text = "".join(f"(a{i})-[:R]->(a{i + 1})\n" for i in range(50)) + "".join(
        f"(hub)-[:R]->(h{i})\n" for i in range(30)
    )
    data = graph_data(text, None, (), (), limit=10)
    assert [n["key"] for n in data["nodes"]][:1] == ["hub"]  # type: ignore[index]
    assert {n["key"] for n in data["nodes"]} == {"hub", *(f"h{i}" for i in range(9))}  # type: ignore[attr-defined]
    assert data["hidden_nodes"] == 51 + 31 - 10


def test_a_node_read_back_without_a_name_is_labelled_by_its_title_label_or_value_never_matched() -> None:
    text = '(1)-[:R]->(2)\n(1)-[value]->("Scurvy")\n(2)-[title]->("Vitamin C")\n(2)-[value]->("other")\n'
    data = graph_data(text, None, ("Scurvy", "Vitamin C"), ())
    # Labelled for the reader; not gold, as retrieval quality matches names only.
    assert _nodes(data) == [("1", "Scurvy", None, False), ("2", "Vitamin C", None, False)]
