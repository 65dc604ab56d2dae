"""The Neo4j backend: the one parameterized Cypher query per retrieval, the rows ->
subgraph translation (on the driver's own Node/Relationship objects), the real driver
against a loopback server speaking Bolt (query text and parameters on the wire, one
connection for several retrievals, server errors), errors as RetrievalError. A real Neo4j
runs the queries in test_neo4j_live.py."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from kag.retrieval.base import RetrievalError
from kag.retrieval.neo4j_backend import (
    Neo4jGraph,
    Neo4jSettings,
    build_query,
    choose_form,
    driver_uri,
    node_key,
    subgraph_from_records,
)
from kag.retrieval.translate import FormalTriplet
from tests.bolt_server import BoltNode, BoltRelationship, Failure, FakeBolt, Rows

neo4j = pytest.importorskip("neo4j")
from neo4j.graph import Graph, Node

DB = "0b5e2c1a-5d1f-4f7e-9c1b-123456789abc"


def test_query_text_for_two_hops() -> None:
    assert build_query(2) == (
        "CALL db.index.vector.queryNodes($index, $candidates, $vector) YIELD node, score\n"
        "WITH node, score ORDER BY score DESC LIMIT $top_k\n"
        "WITH collect(node) AS seeds, collect(score) AS scores\n"
        "UNWIND seeds AS seed\n"
        "MATCH (seed)-[*0..2]-(reachable)\n"
        "WITH seeds, scores, collect(DISTINCT reachable) AS nodes\n"
        "UNWIND nodes AS n\n"
        "OPTIONAL MATCH (n)-[rel]->(m)\n"
        "WHERE m IN nodes\n"
        "WITH DISTINCT seeds, scores, n, rel WHERE rel IS NOT NULL OR n IN seeds\n"
        "WITH seeds, scores, rel, coalesce(startNode(rel), n) AS a, endNode(rel) AS b\n"
        "RETURN [s IN seeds | elementId(s)] AS seeds, scores AS seed_scores,\n"
        "       elementId(a) AS source, labels(a) AS source_labels,\n"
        "       [k IN keys(a) WHERE k <> $hidden | [k, a[k]]] AS source_properties,\n"
        "       rel AS predicate,\n"
        "       elementId(b) AS target, labels(b) AS target_labels,\n"
        "       [k IN keys(b) WHERE k <> $hidden | [k, b[k]]] AS target_properties"
    )


def test_query_only_interpolates_the_hop_count() -> None:
    zero, five = build_query(0), build_query(5)
    assert "[*0..0]" in zero and "[*0..5]" in five
    assert zero.replace("[*0..0]", "[*0..5]") == five
    assert set(re.findall(r"\$\w+", five)) == {"$index", "$candidates", "$top_k", "$vector", "$hidden"}


def test_the_search_form_quotes_the_index_and_runs_under_cypher_25() -> None:
    query = build_query(1, "search", "my`index")
    assert query.startswith(
        "CYPHER 25\n"
        "MATCH (node) SEARCH node IN (VECTOR INDEX `my``index` FOR $vector LIMIT $candidates) SCORE AS score\n"
        "WITH node, score ORDER BY score DESC LIMIT $top_k\n"
    )
    assert (
        query.split("WITH collect(node) AS seeds, collect(score) AS scores\n", 1)[1]
        == build_query(1).split("WITH collect(node) AS seeds, collect(score) AS scores\n", 1)[1]
    )
    assert set(re.findall(r"\$\w+", query)) == {"$candidates", "$top_k", "$vector", "$hidden"}
    with pytest.raises(ValueError, match="needs the index name"):
        build_query(1, "search", "")


@pytest.mark.parametrize(
    ("query", "agent", "form"),
    [
        ("auto", "Neo4j/5.26.30", "procedure"),
        ("auto", "Neo4j/2025.10.1", "procedure"),
        ("auto", "Neo4j/2026.01.0", "search"),
        ("auto", "Neo4j/2026.08.1", "search"),
        ("auto", "Memgraph", "procedure"),
        ("procedure", "Neo4j/2026.08.1", "procedure"),
        ("search", "Neo4j/5.26.30", "search"),
    ],
)
def test_auto_takes_search_from_2026_01(query: Any, agent: str, form: str) -> None:
    assert choose_form(query, agent) == form


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1; MATCH (n) DETACH DELETE n"])
def test_query_refuses_anything_but_a_hop_count(bad: Any) -> None:
    with pytest.raises(ValueError, match="non-negative integer"):
        build_query(bad)


def test_node_key_is_the_numeric_id_the_rust_tool_printed() -> None:
    assert node_key(f"4:{DB}:129620460") == "129620460"
    assert node_key("129620460") == "129620460"
    assert node_key("custom-id") == "custom-id"
    assert node_key(f"4:{DB}:x7") == f"4:{DB}:x7"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("127.0.0.1:7687", "bolt://127.0.0.1:7687"),
        ("neo4j+s://db.example:7687", "neo4j+s://db.example:7687"),
        ("bolt://h:1", "bolt://h:1"),
    ],
)
def test_driver_uri_adds_the_scheme_the_rust_tool_did_not_need(uri: str, expected: str) -> None:
    assert driver_uri(uri) == expected


def test_driver_uri_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="unsupported URI scheme 'http'"):
        driver_uri("http://h:7474")


def _records() -> list[dict[str, Any]]:
    """Rows as the driver hydrates them for the query: real neo4j.graph objects."""
    graph = Graph()

    def node(n: int, labels: set[str], **props: Any) -> Node:
        return Node(graph, f"4:{DB}:{n}", n, labels, props)

    def rel(n: int, rel_type: str, start: Node, end: Node, **props: Any) -> Any:
        relationship = graph.relationship_type(rel_type)(graph, f"5:{DB}:{n}", n, props)
        relationship._start_node, relationship._end_node = start, end
        return relationship

    intubation = node(129620460, {"MeSH", "MeSHConcept"}, name="Intubation", embedding=[0.1, 0.2])
    umls = node(39239927, {"UMLS"}, ui="C0021925")
    descriptor = node(8434707, {"MeSH", "MeSHDescriptor"}, name="Intubation")
    seeds = [f"4:{DB}:129620460", f"4:{DB}:8434707"]
    return [
        {
            "seeds": seeds,
            "source": descriptor,
            "predicate": rel(2, "HAS_CONCEPT", descriptor, intubation, isPreferred=True),
            "target": intubation,
        },
        {
            "seeds": seeds,
            "source": intubation,
            "predicate": rel(1, "MAPPED_TO", intubation, umls),
            "target": umls,
        },
        {
            "seeds": seeds,
            "source": descriptor,
            "predicate": rel(3, "MAPPED_TO", descriptor, umls),
            "target": umls,
        },
    ]


def test_rows_become_the_subgraph() -> None:
    subgraph = subgraph_from_records(_records())
    assert subgraph.seeds == ("129620460", "8434707")
    assert set(subgraph.nodes) == {"129620460", "39239927", "8434707"}
    assert subgraph.nodes["129620460"].labels == {"MeSH", "MeSHConcept"}
    assert subgraph.nodes["39239927"].properties == {"ui": "C0021925"}
    assert sorted((r.start, r.type, r.end, dict(r.properties)) for r in subgraph.relationships) == [
        ("129620460", "MAPPED_TO", "39239927", {}),
        ("8434707", "HAS_CONCEPT", "129620460", {"isPreferred": True}),
        ("8434707", "MAPPED_TO", "39239927", {}),
    ]


MESH_FILTERS = FormalTriplet(
    property_filters={
        frozenset({"MeSH", "MeSHConcept"}): ("name",),
        frozenset({"MeSH", "MeSHDescriptor"}): ("name",),
    }
)


# The Rust tool's text of the Intubation rows (_records(), and _bolt_rows() on the wire) under MESH_FILTERS.
MESH_TEXT = (
    "(129620460)-[:MAPPED_TO]->(39239927)\n"
    '(129620460)-[name]->("Intubation")\n'
    '(39239927)-[ui]->("C0021925")\n'
    "(8434707)-[:HAS_CONCEPT { isPreferred: true }]->(129620460)\n"
    '(8434707)-[name]->("Intubation")\n'
    "(8434707)-[:MAPPED_TO]->(39239927)\n"
)


def test_rows_render_in_the_rust_format() -> None:
    rendered = MESH_FILTERS.render(subgraph_from_records(_records()))
    assert rendered.text == MESH_TEXT
    assert (rendered.vertices, rendered.relationships, rendered.properties) == (3, 3, 4)


def test_a_row_without_a_relationship_gives_its_node_and_keeps_the_seeds() -> None:
    """The query's row for a reached node with no relationship to another (a seed alone, a
    0-hop retrieval): the node is in the subgraph, the seeds and their scores are kept, and
    the text is what the relationships alone render."""
    seeds = [f"4:{DB}:129620460", f"4:{DB}:8434707"]

    def lone(n: int, labels: list[str], properties: list[list[Any]]) -> dict[str, Any]:
        return {
            "seeds": seeds,
            "seed_scores": [0.9, 0.8],
            "source": f"4:{DB}:{n}",
            "source_labels": labels,
            "source_properties": properties,
            "predicate": None,
            "target": None,
            "target_labels": None,
            "target_properties": None,
        }

    rows = [lone(129620460, ["MeSH", "MeSHConcept"], [["name", "Intubation"]]), lone(8434707, ["MeSH"], [])]
    subgraph = subgraph_from_records(rows)
    assert subgraph.seeds == ("129620460", "8434707")
    assert subgraph.seed_scores == (0.9, 0.8)
    assert set(subgraph.nodes) == {"129620460", "8434707"}
    assert subgraph.nodes["129620460"].properties == {"name": "Intubation"}
    assert subgraph.relationships == ()
    assert MESH_FILTERS.render(subgraph).text == ""
    # Beside relationship rows, such a row adds its node and changes nothing else.
    with_lone = subgraph_from_records([*_records(), lone(77, ["UMLS"], [["ui", "C1"]])])
    alone = subgraph_from_records(_records())
    assert set(with_lone.nodes) == {*alone.nodes, "77"}
    assert with_lone.relationships == alone.relationships
    assert MESH_FILTERS.render(with_lone).text == MESH_TEXT


def test_no_rows_is_the_empty_subgraph() -> None:
    subgraph = subgraph_from_records([])
    assert subgraph.seeds == () and not subgraph.nodes and not subgraph.relationships


def test_a_database_that_is_down_is_a_retrieval_error_without_the_password() -> None:
    graph = Neo4jGraph(Neo4jSettings("db", uri="127.0.0.1:9", password="s3cret-pw"), max_retry_time=0.0)

    async def run() -> None:
        try:
            await graph.fetch([0.1, 0.2], 3, 1, "idx")
        finally:
            await graph.aclose()

    with pytest.raises(RetrievalError) as info:
        asyncio.run(run())
    message = str(info.value)
    assert message.startswith("Neo4j at 127.0.0.1:9 (database 'neo4j', index 'idx'): ServiceUnavailable: ")
    assert "s3cret-pw" not in message and "\n" not in message


# ---------------------------------------------------------------- the real driver on the wire


def _bolt_rows() -> Rows:
    intubation = BoltNode(129620460, ["MeSH", "MeSHConcept"], {"name": "Intubation"}, f"4:{DB}:129620460")
    umls = BoltNode(39239927, ["UMLS"], {"ui": "C0021925"}, f"4:{DB}:39239927")
    descriptor = BoltNode(8434707, ["MeSH", "MeSHDescriptor"], {"name": "Intubation"}, f"4:{DB}:8434707")
    seeds = [intubation.element_id, descriptor.element_id]
    rels = [
        BoltRelationship(2, descriptor, intubation, "HAS_CONCEPT", {"isPreferred": True}, f"5:{DB}:2"),
        BoltRelationship(1, intubation, umls, "MAPPED_TO", {}, f"5:{DB}:1"),
        BoltRelationship(3, descriptor, umls, "MAPPED_TO", {}, f"5:{DB}:3"),
    ]
    return Rows(["seeds", "source", "predicate", "target"], [[seeds, r.start, r, r.end] for r in rels])


def _fetch_all(settings: Neo4jSettings, calls: list[tuple[list[float], int, int, str]]) -> list[Any]:
    graph = Neo4jGraph(settings, max_retry_time=0.0)

    async def run() -> list[Any]:
        try:
            return [await graph.fetch(*call) for call in calls]
        finally:
            await graph.aclose()

    return asyncio.run(run())


def test_the_driver_sends_one_parameterized_query_per_retrieval_over_one_connection() -> None:
    with FakeBolt(lambda query, params: _bolt_rows()) as server:
        settings = Neo4jSettings("db", uri=f"127.0.0.1:{server.port}", password="secret", database="medkag")
        one, two = _fetch_all(
            settings, [([0.1, 0.2, 0.3], 3, 1, "MESH_INDEX"), ([0.5, 0.25, 0.0], 2, 2, "MESH_INDEX")]
        )
    show, *runs = server.sent("RUN")
    # Once per run and index: the property the index covers, left out of the rows.
    assert show[0].startswith("SHOW INDEXES") and show[1] == {"index": "MESH_INDEX"}
    assert [run[0] for run in runs] == [build_query(1), build_query(2)]
    vectors = ([0.1, 0.2, 0.3], [0.5, 0.25, 0.0])
    assert [run[1] for run in runs] == [
        {"hidden": "", "index": "MESH_INDEX", "candidates": 100, "top_k": k, "vector": v}
        for k, v in zip((3, 2), vectors, strict=True)
    ]
    assert all(
        begin[0].get("db") == "medkag" and begin[0].get("mode") == "r" for begin in server.sent("BEGIN")
    )
    assert server.connections == 1 and len(server.sent("HELLO")) == 1  # one driver, one connection, reused
    hello = server.sent("HELLO")[0][0]
    assert (hello["scheme"], hello["principal"], hello["user_agent"]) == ("basic", "neo4j", "kag")
    # The driver hydrated the Bolt structures; the text is the Rust tool's.
    assert one.seeds == ("129620460", "8434707")
    assert MESH_FILTERS.render(two).text == MESH_TEXT


def test_a_missing_index_is_the_servers_error_as_a_retrieval_error() -> None:
    failure = Failure(
        "Neo.ClientError.Procedure.ProcedureCallFailed",
        "Failed to invoke procedure `db.index.vector.queryNodes`: Caused by: java.lang.IllegalArgumentException:"
        " There is no such vector schema index: NOPE",
    )
    with FakeBolt(lambda query, params: failure) as server, pytest.raises(RetrievalError) as info:
        _fetch_all(Neo4jSettings("db", uri=server.uri, password="secret"), [([0.1], 3, 1, "NOPE")])
    assert str(info.value) == (
        f"Neo4j at {server.uri} (database 'neo4j', index 'NOPE'): Neo.ClientError.Procedure.ProcedureCallFailed:"
        " Failed to invoke procedure `db.index.vector.queryNodes`: Caused by: java.lang.IllegalArgumentException:"
        " There is no such vector schema index: NOPE (create the vector index 'NOPE' (kag graph import does)"
        " or fix the retriever's 'index')"
    )
    assert len(server.sent("RUN")) == 1  # a client error is not retried


def test_a_wrong_password_is_a_retrieval_error_that_does_not_show_it() -> None:
    with (
        FakeBolt(lambda query, params: _bolt_rows(), password="right") as server,
        pytest.raises(RetrievalError) as info,
    ):
        _fetch_all(Neo4jSettings("db", uri=server.uri, password="wrong-pw-123"), [([0.1], 3, 1, "IDX")])
    assert "Neo.ClientError.Security.Unauthorized" in str(info.value)
    assert "wrong-pw-123" not in str(info.value)
    assert server.sent("RUN") == []


def test_no_rows_is_an_empty_result_through_the_retriever() -> None:
    from kag.retrieval.factory import open_retriever

    with FakeBolt(lambda query, params: Rows(["seeds", "source", "predicate", "target"], [])) as server:
        databases = {"neo": {"type": "Neo4j", "uri": server.uri, "password": "secret"}}
        retrievers = {
            "r": {"type": "Embedder", "provider": "p", "model": "m", "extra": {"neo": {"index": "IDX"}}}
        }

        async def embed(model: str, texts: list[str]) -> list[list[float]]:
            return [[0.25, 0.75]]

        retriever = open_retriever("r", "neo", retrievers, databases, embed)

        async def run() -> Any:
            try:
                return await retriever.retrieve("Is intubation harder in a helicopter?")
            finally:
                await retriever.aclose()

        retrieval = asyncio.run(run())
    assert retrieval.result == "" and retrieval.vector == [0.25, 0.75]
    assert retrieval.database is not None and retrieval.database.backend == "neo4j"
    assert (retrieval.database.vertices, retrieval.database.relationships, retrieval.database.properties) == (
        0,
        0,
        0,
    )
    assert server.sent("RUN")[1][1] == {
        "hidden": "",
        "index": "IDX",
        "candidates": 100,
        "top_k": 5,
        "vector": [0.25, 0.75],
    }


def test_a_user_without_read_rights_is_told_to_grant_them() -> None:
    """Community Edition (what the real-server tests run) has no per-user rights, so the
    Enterprise server's refusal is replayed here."""
    failure = Failure(
        "Neo.ClientError.Security.Forbidden",
        "Read operations are not allowed for user 'reader' with roles [PUBLIC] restricted to ACCESS.",
    )
    with FakeBolt(lambda query, params: failure) as server, pytest.raises(RetrievalError) as info:
        _fetch_all(Neo4jSettings("db", uri=server.uri, password="secret"), [([0.1], 3, 1, "IDX")])
    assert str(info.value).endswith(
        "Neo.ClientError.Security.Forbidden: Read operations are not allowed for user 'reader' with roles [PUBLIC]"
        " restricted to ACCESS. (the user lacks read rights on this database: grant them (GRANT MATCH, TRAVERSE ...))"
    )
