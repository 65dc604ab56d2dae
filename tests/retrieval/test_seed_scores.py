"""The seeds' scores: LadybugDB's exact cosine on a real embedded database, Neo4j's vector
index score as the real driver reads it off the wire, and the record a result file keeps
of them (null where a backend reports none)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kag.retrieval.importer import import_graph
from kag.retrieval.ladybug_backend import LadybugGraph, LadybugSettings, VectorIndex
from kag.retrieval.neo4j_backend import Neo4jGraph, Neo4jSettings, subgraph_from_records
from kag.retrieval.subgraph import Subgraph, retrieved_graph
from tests.bolt_server import BoltNode, BoltRelationship, FakeBolt, Rows
from tests.graph_helpers import TokenEmbedder, write_csv

NAMES = ["scurvy", "vitamin c", "vitamin c deficiency", "rickets", "vitamin d", "iron"]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture
def vitamins(tmp_path: Path) -> tuple[Path, TokenEmbedder]:
    pytest.importorskip("ladybug")
    rows = [(str(i + 1), "Concept", name) for i, name in enumerate(NAMES)]
    nodes = write_csv(tmp_path / "nodes.csv", ["id:ID", ":LABEL", "name"], rows)
    rels = write_csv(tmp_path / "rels.csv", [":START_ID", ":END_ID", ":TYPE"], [("1", "3", "CAUSED_BY")])
    embedder = TokenEmbedder(dimension=24)
    path = tmp_path / "kg.lbug"
    import_graph(path, [str(nodes)], [str(rels)], embedder)
    return path, embedder


def test_ladybug_seeds_carry_their_cosine_best_first(vitamins: tuple[Path, TokenEmbedder]) -> None:
    path, embedder = vitamins
    query = embedder.vector("vitamin c deficiency scurvy")
    graph = LadybugGraph(LadybugSettings("kg", str(path)))
    try:
        subgraph = graph.fetch_sync(query.tolist(), 3, 1, "embedding")
    finally:
        graph.close()
    assert len(subgraph.seed_scores) == len(subgraph.seeds) == 3
    names = {k: n.properties["name"] for k, n in subgraph.nodes.items()}
    for seed, score in zip(subgraph.seeds, subgraph.seed_scores, strict=True):
        assert score == pytest.approx(_cosine(query, embedder.vector(names[seed])), abs=1e-5)
    assert list(subgraph.seed_scores) == sorted(subgraph.seed_scores, reverse=True)
    # Every score the query has against the other nodes is at most the last seed's.
    others = [
        _cosine(query, embedder.vector(n)) for n in NAMES if n not in {names[s] for s in subgraph.seeds}
    ]
    assert max(others) <= subgraph.seed_scores[-1] + 1e-6
    # The result file's record keeps them.
    record = retrieved_graph(subgraph)
    assert [s.score for s in record.seeds] == list(subgraph.seed_scores)
    assert all(isinstance(s.score, float) for s in record.seeds)


def test_scored_top_k_is_top_k_with_its_scores() -> None:
    keys = ("a", "b", "c")
    matrix = np.array([[1, 0], [0.6, 0.8], [0, 1]], dtype=np.float32)
    index = VectorIndex("embedding", keys, matrix)
    assert index.scored_top_k([1.0, 1.0], 2) == [
        ("b", pytest.approx((0.6 + 0.8) / math.sqrt(2), abs=1e-6)),
        ("a", pytest.approx(1 / math.sqrt(2), abs=1e-6)),
    ]
    assert index.top_k([1.0, 1.0], 2) == ["b", "a"]
    assert index.scored_top_k([-1.0, 0.0], 1) == [("c", pytest.approx(0.0, abs=1e-6))]


# ---------------------------------------------------------------- Neo4j


DB = "0b5e2c1a-5d1f-4f7e-9c1b-123456789abc"


def _rows(fields: list[str], scores: Any) -> Rows:
    scurvy = BoltNode(1, ["Disease"], {"name": "Scurvy"}, f"4:{DB}:1")
    deficiency = BoltNode(2, ["Concept"], {"name": "Vitamin C deficiency"}, f"4:{DB}:2")
    rel = BoltRelationship(7, scurvy, deficiency, "CAUSED_BY", {}, f"5:{DB}:7")
    seeds = [scurvy.element_id, deficiency.element_id]
    values = {"seeds": seeds, "seed_scores": scores, "source": scurvy, "predicate": rel, "target": deficiency}
    return Rows(fields, [[values[f] for f in fields]])


def _fetch_over_bolt(rows: Rows) -> Subgraph:
    with FakeBolt(lambda query, params: rows) as server:
        settings = Neo4jSettings("db", uri=f"127.0.0.1:{server.port}", password="secret")
        graph = Neo4jGraph(settings, max_retry_time=0.0)

        async def run() -> Subgraph:
            try:
                return await graph.fetch([0.1, 0.2], 2, 1, "idx")
            finally:
                await graph.aclose()

        subgraph = asyncio.run(run())
        (_, *runs) = server.sent("RUN")
    assert "collect(score) AS scores" in runs[0][0] and "scores AS seed_scores" in runs[0][0]
    return subgraph


def test_neo4j_seeds_carry_the_index_scores_read_by_the_real_driver() -> None:
    subgraph = _fetch_over_bolt(
        _rows(["seeds", "seed_scores", "source", "predicate", "target"], [0.93, 0.81])
    )
    assert subgraph.seeds == ("1", "2")
    assert subgraph.seed_scores == (0.93, 0.81)
    assert [s.score for s in retrieved_graph(subgraph).seeds] == [0.93, 0.81]


def test_neo4j_rows_without_scores_give_seeds_without_scores() -> None:
    subgraph = _fetch_over_bolt(_rows(["seeds", "source", "predicate", "target"], None))
    assert subgraph.seeds == ("1", "2") and subgraph.seed_scores == ()
    assert [s.score for s in retrieved_graph(subgraph).seeds] == [None, None]


@pytest.mark.parametrize("scores", [None, [0.9], [0.9, "high"], [True, 0.5], "0.9,0.8", [0.9, 0.8, 0.7]])
def test_neo4j_scores_that_are_not_one_number_per_seed_are_left_out(scores: Any) -> None:
    record = {
        "seeds": [f"4:{DB}:1", f"4:{DB}:2"],
        "seed_scores": scores,
        "source_labels": [],
        "source": f"4:{DB}:1",
        "source_properties": [],
        "target_labels": [],
        "target": f"4:{DB}:2",
        "target_properties": [],
        "predicate": _Predicate(),
    }
    subgraph = subgraph_from_records([record])
    assert subgraph.seeds == ("1", "2") and subgraph.seed_scores == ()


def test_neo4j_integer_scores_are_read_as_floats() -> None:
    record = {
        "seeds": [f"4:{DB}:1"],
        "seed_scores": [1],
        "source_labels": [],
        "source": f"4:{DB}:1",
        "source_properties": [],
        "target_labels": [],
        "target": f"4:{DB}:1",
        "target_properties": [],
        "predicate": _Predicate(),
    }
    scores = subgraph_from_records([record]).seed_scores
    assert scores == (1.0,) and isinstance(scores[0], float)


class _Predicate:
    element_id = f"5:{DB}:7"
    type = "CAUSED_BY"

    def items(self) -> list[tuple[str, Any]]:
        return []
