"""The Neo4j backend: the one parameterized Cypher query per retrieval, the rows ->
subgraph translation (on the driver's own Node/Relationship objects), errors as
RetrievalError, and a live test against a real server when NEO4J_URI is set."""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import pytest

from kag.retrieval.base import RetrievalError
from kag.retrieval.neo4j_backend import (
    Neo4jGraph,
    Neo4jSettings,
    build_query,
    driver_uri,
    node_key,
    subgraph_from_records,
)
from kag.retrieval.translate import FormalTriplet

neo4j = pytest.importorskip("neo4j")
from neo4j.graph import Graph, Node

DB = "0b5e2c1a-5d1f-4f7e-9c1b-123456789abc"


def test_query_text_for_two_hops() -> None:
    assert build_query(2) == (
        "CALL db.index.vector.queryNodes($index, $top_k, $vector) YIELD node\n"
        "WITH collect(node) AS seeds\n"
        "UNWIND seeds AS seed\n"
        "MATCH (seed)-[*0..2]-(reachable)\n"
        "WITH seeds, collect(DISTINCT reachable) AS nodes\n"
        "UNWIND nodes AS n\n"
        "MATCH (n)-[rel]->(m)\n"
        "WHERE m IN nodes\n"
        "WITH DISTINCT seeds, rel\n"
        "RETURN [s IN seeds | elementId(s)] AS seeds,\n"
        "       startNode(rel) AS source, rel AS predicate, endNode(rel) AS target"
    )


def test_query_only_interpolates_the_hop_count() -> None:
    zero, five = build_query(0), build_query(5)
    assert "[*0..0]" in zero and "[*0..5]" in five
    assert zero.replace("[*0..0]", "[*0..5]") == five
    assert set(re.findall(r"\$\w+", five)) == {"$index", "$top_k", "$vector"}


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


def test_rows_render_in_the_rust_format() -> None:
    translation = FormalTriplet(
        property_filters={
            frozenset({"MeSH", "MeSHConcept"}): ("name",),
            frozenset({"MeSH", "MeSHDescriptor"}): ("name",),
        }
    )
    rendered = translation.render(subgraph_from_records(_records()))
    assert rendered.text == (
        "(129620460)-[:MAPPED_TO]->(39239927)\n"
        '(129620460)-[name]->("Intubation")\n'
        '(39239927)-[ui]->("C0021925")\n'
        "(8434707)-[:HAS_CONCEPT { isPreferred: true }]->(129620460)\n"
        '(8434707)-[name]->("Intubation")\n'
        "(8434707)-[:MAPPED_TO]->(39239927)\n"
    )
    assert (rendered.vertices, rendered.relationships, rendered.properties) == (3, 3, 4)


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


# ---------------------------------------------------------------- a real server, when there is one

LIVE = os.environ.get("NEO4J_URI")


@pytest.mark.skipif(
    not LIVE, reason="NEO4J_URI is not set: no Neo4j server to test against (set NEO4J_URI, NEO4J_PASSWORD)"
)
def test_live_server_retrieval_matches_the_offline_translation() -> None:  # pragma: no cover - needs a server
    """Writes a tiny labelled graph with a vector index into NEO4J_DATABASE (default
    neo4j), retrieves around it, and removes it."""
    uri, password = LIVE or "", os.environ.get("NEO4J_PASSWORD", "")
    user, database = os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_DATABASE", "neo4j")
    tag = f"KagTest{os.getpid()}"
    index = f"kag_test_{os.getpid()}"

    async def run() -> tuple[str, str]:
        driver = neo4j.AsyncGraphDatabase.driver(driver_uri(uri), auth=(user, password))
        try:
            await driver.execute_query(
                f"CREATE (a:{tag} {{name: 'a', v: [1.0, 0.0]}})-[:R {{w: 1}}]->(b:{tag} {{name: 'b', v: [0.0, 1.0]}}),"
                f" (b)-[:S]->(c:{tag} {{name: 'c', v: [0.7, 0.7]}})",
                database_=database,
            )
            await driver.execute_query(
                f"CREATE VECTOR INDEX {index} FOR (n:{tag}) ON n.v OPTIONS {{indexConfig: {{"
                "`vector.dimensions`: 2, `vector.similarity_function`: 'cosine'}}",
                database_=database,
            )
            await driver.execute_query(f"CALL db.awaitIndex('{index}')", database_=database)
            graph = Neo4jGraph(Neo4jSettings("db", uri=uri, user=user, password=password, database=database))
            try:
                one = await graph.fetch([1.0, 0.0], 1, 1, index)
                two = await graph.fetch([1.0, 0.0], 1, 2, index)
            finally:
                await graph.aclose()
            return (
                FormalTriplet(property_filters={frozenset({tag}): ("name",)}).render(one).text,
                FormalTriplet(property_filters={frozenset({tag}): ("name",)}).render(two).text,
            )
        finally:
            await driver.execute_query(f"DROP INDEX {index} IF EXISTS", database_=database)
            await driver.execute_query(f"MATCH (n:{tag}) DETACH DELETE n", database_=database)
            await driver.close()

    one, two = asyncio.run(run())
    assert one.count("\n") == 3 and "[:R { w: 1 }]" in one and '[name]->("a")' in one and "[:S]" not in one
    assert "[:S]" in two and '[name]->("c")' in two
