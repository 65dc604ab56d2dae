"""The Ladybug backend on real embedded databases: exact top-k (and the engine bug it
avoids), expansion by hops, relationships among reached nodes only, the same text as
Neo4j for the same graph, concurrency, and failures as RetrievalError."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kag.retrieval.base import RetrievalError
from kag.retrieval.importer import import_graph
from kag.retrieval.ladybug_backend import LadybugGraph, LadybugSettings, VectorIndex
from kag.retrieval.neo4j_backend import subgraph_from_records
from kag.retrieval.subgraph import Subgraph
from kag.retrieval.translate import FormalTriplet, parse_translation
from tests.graph_helpers import EINSTEIN_NODES, EINSTEIN_RELS, TokenEmbedder, einstein_db, write_csv

ladybug = pytest.importorskip("ladybug")


def fetch(
    path: Path,
    text: str,
    top_k: int = 1,
    neighborhood: int = 1,
    index: str = "embedding",
    embedder: TokenEmbedder | None = None,
) -> Subgraph:
    graph = LadybugGraph(LadybugSettings("kg", str(path)))
    try:
        return graph.fetch_sync(
            (embedder or TokenEmbedder()).vector(text).tolist(), top_k, neighborhood, index
        )
    finally:
        graph.close()


# ---------------------------------------------------------------- top-k


def _brute_force(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    norms = np.linalg.norm(matrix, axis=1)
    scores = matrix @ query / np.where(norms == 0, 1, norms) / (np.linalg.norm(query) or 1)
    return sorted(range(len(matrix)), key=lambda i: (-round(float(scores[i]), 5), i))[:k]


@settings(max_examples=80, deadline=None)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 4), st.just(4)),
        elements=st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]),
    ),
    st.lists(st.integers(0, 3), min_size=1, max_size=40),
    arrays(np.float32, st.just(4), elements=st.sampled_from([-1.0, 0.0, 1.0])),
    st.integers(1, 45),
)
def test_top_k_is_a_full_sort_by_score_then_key(
    pool: np.ndarray, picks: list[int], query: np.ndarray, k: int
) -> None:
    """Rows drawn from a pool of a few vectors, so many scores tie exactly: the k best by
    cosine, ties by key, as a full sort of the same scores gives them."""
    matrix = pool[[p % len(pool) for p in picks]]
    keys = tuple(f"n{i:03d}" for i in range(len(matrix)))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
    index = VectorIndex("embedding", keys, normalized)
    got = index.top_k(query.tolist(), k)
    qn = float(np.linalg.norm(query))
    scores = normalized @ (query / qn if qn else query)
    expected = sorted(range(len(keys)), key=lambda i: (-float(scores[i]), keys[i]))[:k]
    assert got == [keys[i] for i in expected]
    assert len(got) == min(k, len(keys))


def test_top_k_refuses_a_vector_of_another_size() -> None:
    index = VectorIndex("embedding", ("a",), np.ones((1, 3), np.float32))
    with pytest.raises(RetrievalError, match="has 2 dimensions but the 'embedding' embeddings have 3"):
        index.top_k([1.0, 0.0], 1)


def _scattered_name(i: int, n: int = 400) -> str:
    return f"target item {i}" if i >= n - 5 else f"filler {i}"


def _scattered_db(folder: Path, n: int = 400) -> tuple[Path, TokenEmbedder]:
    """n nodes; the five whose names a query repeats ("target item <i>") were inserted last."""
    rows = [(f"n{i:04d}", "Item", _scattered_name(i, n)) for i in range(n)]
    nodes = write_csv(folder / "nodes.csv", ["id:ID", ":LABEL", "name"], rows)
    embedder = TokenEmbedder(dimension=48)
    path = folder / "kg.lbug"
    import_graph(path, [str(nodes)], [], embedder)
    return path, embedder


def test_seeds_are_the_true_top_k_not_the_first_rows(tmp_path: Path) -> None:
    """Would catch the ORDER BY ... LIMIT ... WITH collect bug of 0.19.1-0.22.0, which
    returns the first k rows in storage order instead of the k best."""
    path, embedder = _scattered_db(tmp_path)
    query = embedder.vector("target item")
    graph = LadybugGraph(LadybugSettings("kg", str(path)))
    try:
        graph._open()
        index = graph._index("embedding")
        seeds = index.top_k(query.tolist(), 5)
    finally:
        graph.close()
    matrix = np.vstack([embedder.vector(_scattered_name(i)) for i in range(400)])
    expected = [f"n{i:04d}" for i in _brute_force(matrix, query, 5)]
    assert seeds == expected
    assert all(int(key[1:]) >= 395 for key in seeds)  # the last rows inserted, not the first


def test_the_pinned_engine_still_has_the_collect_bug(tmp_path: Path) -> None:
    """Why kag ranks in numpy: on 0.22.0 this query shape returns the first rows stored.
    If this fails after an upgrade, the bug is fixed and the shape could be used again."""
    db = ladybug.Database(str(tmp_path / "bug.lbug"))
    conn = ladybug.Connection(db)
    try:
        conn.execute("CREATE NODE TABLE N(id INT64, v FLOAT[2], PRIMARY KEY(id))")
        conn.execute(
            "UNWIND $rows AS r CREATE (:N {id: r.i, v: r.v})",
            {"rows": [{"i": i, "v": [1.0, 0.0] if i >= 95 else [0.0, 1.0]} for i in range(100)]},
        )
        best = "MATCH (n:N) WITH n, array_cosine_similarity(n.v, $q) AS s ORDER BY s DESC LIMIT 3"
        plain = sorted(r[0] for r in conn.execute(best + " RETURN n.id", {"q": [1.0, 0.0]}).get_all())
        collected = conn.execute(best + " WITH collect(n.id) AS ids RETURN ids", {"q": [1.0, 0.0]}).get_all()[
            0
        ][0]
    finally:
        conn.close()
        db.close()
    assert len(plain) == 3 and all(i >= 95 for i in plain)  # three of the five best (tied)
    assert sorted(collected) == [0, 1, 2]


# ---------------------------------------------------------------- expansion


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """alpha -> beta -> gamma -> delta, and delta -> alpha' shortcut gamma -> alpha."""
    nodes = write_csv(
        tmp_path / "nodes.csv",
        ["id:ID", ":LABEL", "name"],
        [
            ("a", "X", "alpha"),
            ("b", "X", "beta"),
            ("c", "X", "gamma"),
            ("d", "X", "delta"),
            ("e", "X", "epsilon"),
        ],
    )
    rels = write_csv(
        tmp_path / "rels.csv",
        [":START_ID", ":END_ID", ":TYPE"],
        [("a", "b", "NEXT"), ("b", "c", "NEXT"), ("c", "d", "NEXT"), ("c", "a", "BACK"), ("d", "e", "NEXT")],
    )
    path = tmp_path / "kg.lbug"
    import_graph(path, [str(nodes)], [str(rels)], TokenEmbedder())
    return path


@pytest.mark.parametrize(
    ("hops", "nodes", "relationships"),
    [
        (0, {"a"}, set()),
        (1, {"a", "b", "c"}, {("a", "b"), ("b", "c"), ("c", "a")}),  # c is one hop back from a
        (2, {"a", "b", "c", "d"}, {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}),
        (3, {"a", "b", "c", "d", "e"}, {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")}),
    ],
)
def test_expansion_by_hops_in_both_directions(
    chain: Path, hops: int, nodes: set[str], relationships: set[tuple[str, str]]
) -> None:
    subgraph = fetch(chain, "alpha", top_k=1, neighborhood=hops)
    assert subgraph.seeds == ("a",)
    assert set(subgraph.nodes) == nodes
    assert {(r.start, r.end) for r in subgraph.relationships} == relationships


def test_seed_without_relationships_renders_nothing(chain: Path) -> None:
    rendered = FormalTriplet().render(fetch(chain, "alpha", top_k=1, neighborhood=0))
    assert (rendered.text, rendered.vertices, rendered.relationships, rendered.properties) == ("", 0, 0, 0)


# ---------------------------------------------------------------- the same text as Neo4j


def _neo4j_records() -> list[dict[str, Any]]:
    """The Einstein graph as the Neo4j driver would return it for seed 1, two hops."""
    neo4j_graph = pytest.importorskip("neo4j.graph")
    graph = neo4j_graph.Graph()
    nodes = {}
    for key, labels, name, age, tags, founded in EINSTEIN_NODES:
        props: dict[str, Any] = {"name": name, "id": key}
        if age:
            props["age"] = int(age)
        if tags:
            props["tags"] = tags.split(";")
        if founded:
            props["founded"] = int(founded)
        props["embedding"] = [0.5, 0.5]  # Neo4j keeps the vector as a property
        nodes[key] = neo4j_graph.Node(graph, f"4:db:{key}", int(key), set(labels.split(";")), props)
    rows = []
    for i, (start, end, rel_type, year) in enumerate(EINSTEIN_RELS):
        rel = graph.relationship_type(rel_type)(
            graph, f"5:db:{100 + i}", 100 + i, {"year": int(year)} if year else {}
        )
        rel._start_node, rel._end_node = nodes[start], nodes[end]
        rows.append({"seeds": ["4:db:1"], "source": nodes[start], "predicate": rel, "target": nodes[end]})
    return rows


TEXTUAL = {
    "type": "TextualTriplet",
    "node_formats": {"Person:Scientist": "the physicist {name}", "Person": "{name}", "City": "{name}"},
    "property_formats": {"Scientist:Person": ["{FROM} is {age} years old."]},
    "relation_formats": {
        "educatedAt": "{FROM} studied at {TO} ({year}).",
        "bornIn": "{FROM} was born in {TO}.",
        "spouse": "{FROM} married {TO} in {year}.",
    },
}
# Neo4j shows every property (the Rust tool's behaviour), Ladybug keeps the key and the
# embedding apart; the filters make the two print the same properties.
FORMAL = {
    "type": "FormalTriplet",
    "property_filters": {
        "Person:Scientist": ["name", "age", "tags"],
        "Person": ["name"],
        "City": ["name"],
        "University": ["name", "founded"],
        "Prize": ["name"],
    },
}


@pytest.mark.parametrize("raw", [FORMAL, TEXTUAL], ids=["formal", "textual"])
def test_both_backends_render_the_same_text_for_the_same_graph(tmp_path: Path, raw: dict[str, Any]) -> None:
    path = einstein_db(tmp_path)
    ladybug_subgraph = fetch(path, "Albert Einstein", top_k=1, neighborhood=2)
    neo4j_subgraph = subgraph_from_records(_neo4j_records())
    translation = parse_translation(raw, "test")
    from_ladybug, from_neo4j = translation.render(ladybug_subgraph), translation.render(neo4j_subgraph)
    assert from_ladybug == from_neo4j
    assert from_ladybug.relationships >= 5 and from_ladybug.text.count("\n") >= 5


def test_ladybug_nodes_carry_labels_and_typed_properties_but_not_the_key_or_embedding(tmp_path: Path) -> None:
    subgraph = fetch(einstein_db(tmp_path), "Albert Einstein", top_k=1, neighborhood=1)
    einstein = subgraph.nodes["1"]
    assert einstein.labels == {"Person", "Scientist"}
    assert dict(einstein.properties) == {
        "name": "Albert Einstein",
        "age": 76,
        "tags": ["physics", "relativity"],
    }
    assert dict(subgraph.nodes["2"].properties) == {"name": "University of Zurich", "founded": 1833}
    award = next(r for r in subgraph.relationships if r.type == "award")
    assert dict(award.properties) == {"year": 1921}
    assert "year" not in next(r for r in subgraph.relationships if r.type == "bornIn").properties


# ---------------------------------------------------------------- concurrency and failures


def test_concurrent_retrievals_share_one_connection_safely(tmp_path: Path) -> None:
    path = einstein_db(tmp_path)
    embedder = TokenEmbedder()
    graph = LadybugGraph(LadybugSettings("kg", str(path)))
    texts = ["Albert Einstein", "Mileva Maric", "Ulm", "Nobel Prize in Physics"] * 4

    async def run() -> list[Subgraph]:
        try:
            return await asyncio.gather(
                *(graph.fetch(embedder.vector(t).tolist(), 1, 1, "embedding") for t in texts)
            )
        finally:
            await graph.aclose()

    results = asyncio.run(run())
    for text, subgraph in zip(texts, results, strict=True):
        assert subgraph == fetch(path, text)


def test_missing_database_file(tmp_path: Path) -> None:
    with pytest.raises(
        RetrievalError, match=r"kg.lbug: no such Ladybug database \(build it with `kag graph import`\)"
    ):
        fetch(tmp_path / "kg.lbug", "x")


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "kg.lbug"
    path.write_text("not a database")
    with pytest.raises(
        RetrievalError, match="cannot open the Ladybug database: .*not a valid Lbug database file"
    ):
        fetch(path, "x")


def test_a_database_without_the_node_table(tmp_path: Path) -> None:
    db = ladybug.Database(str(tmp_path / "other.lbug"))
    conn = ladybug.Connection(db)
    conn.execute("CREATE NODE TABLE Person(name STRING, PRIMARY KEY(name))")
    conn.close()
    db.close()
    with pytest.raises(RetrievalError, match="not a kag graph database \\(no 'Node' table\\)"):
        fetch(tmp_path / "other.lbug", "x")


def test_index_that_is_not_a_property(tmp_path: Path) -> None:
    with pytest.raises(RetrievalError, match="index 'vectors' is not a node property of this database"):
        fetch(einstein_db(tmp_path), "x", index="vectors")


def test_index_that_is_not_an_embedding(tmp_path: Path) -> None:
    with pytest.raises(RetrievalError, match="index 'name' is a STRING property, not an embedding"):
        fetch(einstein_db(tmp_path), "x", index="name")


def test_query_from_another_model(tmp_path: Path) -> None:
    path = einstein_db(tmp_path, TokenEmbedder(dimension=32))
    with pytest.raises(RetrievalError, match="has 16 dimensions but the 'embedding' embeddings have 32"):
        fetch(path, "x", embedder=TokenEmbedder(dimension=16))
