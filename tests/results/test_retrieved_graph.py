"""The retrieved subgraph in result files: written by kag beside the Rust tool's fields,
read back through the one codec, and read back from ``FormalTriplet`` text for files
written by the Rust tool."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kag.results.codec import dump_result, grading_fields, parse_result
from kag.results.graph_text import formal_relationships, formal_relationships_from, graph_from_formal_text
from kag.results.model import (
    OkResult,
    OkStats,
    Retrieval,
    RetrievedGraph,
    RetrievedNode,
    RetrievedRelationship,
    Seed,
)
from kag.retrieval.subgraph import Node, Relationship, Subgraph, retrieved_graph
from kag.retrieval.translate import FormalTriplet

ids = st.sampled_from(["1", "22", "a:3", "x y"])
words = st.text(max_size=6)
graphs = st.builds(
    RetrievedGraph,
    st.lists(st.builds(Seed, ids, st.none() | st.floats(-1, 1)), max_size=3).map(tuple),
    st.lists(
        st.builds(
            RetrievedNode, ids, st.lists(words, max_size=2).map(lambda x: tuple(sorted(x))), st.none() | words
        ),
        max_size=4,
    ).map(tuple),
    st.lists(st.builds(RetrievedRelationship, ids, words, ids), max_size=4).map(tuple),
)


@given(graphs)
def test_a_result_with_its_graph_round_trips(graph: RetrievedGraph):
    result = OkResult("A", OkStats(retrieval=Retrieval(result="(1)-[:R]->(2)", graph=graph)))
    assert parse_result(dump_result(result)) == result


def test_the_graph_is_additive_beside_the_rust_fields():
    graph = RetrievedGraph((Seed("1", 0.9),), (RetrievedNode("1", ("Concept",), "Scurvy"),), ())
    raw = orjson.loads(dump_result(OkResult("A", OkStats(retrieval=Retrieval(result="t", graph=graph)))))
    retrieval = raw["ok"]["stats"]["retrieval"]
    assert list(retrieval) == ["result", "stats", "graph"]
    assert retrieval["graph"] == {
        "seeds": [{"id": "1", "score": 0.9}],
        "nodes": [{"id": "1", "labels": ["Concept"], "name": "Scurvy"}],
        "relationships": [],
    }
    # Without a graph the file is the compatible one, field for field.
    plain = orjson.loads(dump_result(OkResult("A", OkStats(retrieval=Retrieval(result="t")))))
    assert "graph" not in plain["ok"]["stats"]["retrieval"]


def test_the_fast_grading_reader_reads_the_graph_with_the_text():
    graph = RetrievedGraph((Seed("1"),), (RetrievedNode("1", (), "Scurvy"),), ())
    raw = orjson.loads(dump_result(OkResult("A", OkStats(retrieval=Retrieval(result="t", graph=graph)))))
    assert grading_fields(raw, retrieval_text=True).retrieval_graph == graph
    assert grading_fields(raw).retrieval_graph is None


def test_a_mistyped_graph_counts_as_absent():
    raw = orjson.loads(dump_result(OkResult("A", OkStats(retrieval=Retrieval(result="t")))))
    raw["ok"]["stats"]["retrieval"]["graph"] = {"seeds": "x", "nodes": [], "relationships": []}
    assert grading_fields(raw, retrieval_text=True).retrieval_graph is None


FORMAL = """(8441097)-[:HAS_PHARMACOLOGICAL_ACTION]->(8432924)
(8441097)-[name]->("Pancrelipase")
(8432924)-[name]->("Gastrointestinal Agents")
(8434707)-[:HAS_CONCEPT { isPreferred: true }]->(8441097)
(8434707)-[ui]->("C0030286")
(8434707)-[name]->("a \\"quoted\\" (name)")
"""


def test_formal_text_reads_back_relationships_and_names():
    graph = graph_from_formal_text(FORMAL)
    assert graph.seeds is None
    assert graph.relationships == (
        RetrievedRelationship("8441097", "HAS_PHARMACOLOGICAL_ACTION", "8432924"),
        RetrievedRelationship("8434707", "HAS_CONCEPT", "8441097"),
    )
    assert [(n.id, n.name) for n in graph.nodes] == [
        ("8441097", "Pancrelipase"),
        ("8432924", "Gastrointestinal Agents"),
        ("8434707", 'a "quoted" (name)'),
    ]


_IDS = ["1", "2", "x y", "1)", ""]
_LINE_PARTS = st.sampled_from(["(", ")", "-[:", "R", " { k: 1 }", "]->", "\n", " ", "\r", "(1)-[:R]->(2)"])
_FORMALISH = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(_IDS), st.sampled_from(["R", "R S", "{"]), st.sampled_from(_IDS)).map(
            lambda r: f"({r[0]})-[:{r[1]}]->({r[2]})"
        ),
        _LINE_PARTS,
    ),
    max_size=12,
).map("".join)


@given(_FORMALISH, st.sets(st.sampled_from(_IDS)))
def test_the_relationships_from_some_starts_are_those_of_every_line_from_them(text, starts):
    every = formal_relationships(text)
    assert formal_relationships_from(text, starts) == [r for r in every if r[0] in starts]


def test_node_name_keys_choose_the_name_first_present_first():
    graph = graph_from_formal_text(FORMAL, ("ui", "name"))
    assert [n.name for n in graph.nodes] == ["Pancrelipase", "Gastrointestinal Agents", "C0030286"]


def test_textual_triplet_text_gives_an_empty_graph():
    graph = graph_from_formal_text("Pancrelipase has pharmacological action Gastrointestinal Agents.\n")
    assert graph.nodes == () and graph.relationships == ()


node_keys = st.sampled_from(["1", "2", "3", "10"])
subgraphs = st.builds(
    lambda names, rels: Subgraph(
        seeds=("1",),
        nodes={k: Node(k, frozenset({"L"}), {"name": v} if v else {}) for k, v in names.items()},
        relationships=tuple(
            Relationship(str(i), t, s, e) for i, (s, t, e) in enumerate(rels) if s in names and e in names
        ),
    ),
    st.dictionaries(node_keys, st.text(max_size=5), min_size=1),
    st.lists(st.tuples(node_keys, st.sampled_from(["R", "MAPPED_TO"]), node_keys), max_size=6),
)


@given(subgraphs)
def test_formal_text_reads_back_what_kag_records_of_the_same_subgraph(subgraph: Subgraph):
    recorded = retrieved_graph(subgraph)
    read = graph_from_formal_text(FormalTriplet().render(subgraph).text)
    assert read.relationships == recorded.relationships
    named = {n.id: n.name for n in recorded.nodes}
    assert {n.id: n.name for n in read.nodes} == {n.id: named[n.id] for n in read.nodes}


def test_the_real_med_kag_text_reads_back(med_kag: Path):
    path = next((med_kag / "results").rglob("*neo4j-embedding-triplet-formal.json"))
    raw = orjson.loads(path.read_bytes())
    retrieval = raw["ok"]["stats"]["retrieval"]
    graph = graph_from_formal_text(retrieval["result"])
    counts = retrieval["stats"]["embedder"]["database"]["neo4j"]
    assert len(graph.relationships) == counts["relationships"]
    assert 0 < len(graph.nodes) <= counts["vertices"]
    assert any(n.name for n in graph.nodes)


def test_the_retriever_records_the_graph_it_rendered():
    import asyncio

    from kag.retrieval.embedder import EmbedderRetriever, RetrieverSettings

    subgraph = Subgraph(
        seeds=("1",),
        nodes={
            "1": Node("1", frozenset({"Disease"}), {"name": "Scurvy"}),
            "2": Node("2", properties={"name": "C"}),
        },
        relationships=(Relationship("r", "CAUSED_BY", "1", "2"),),
        seed_scores=(0.9,),
    )

    class Backend:
        backend = "ladybug"

        async def fetch(self, vector, top_k, neighborhood, index):
            return subgraph

        async def aclose(self):
            return None

    async def embed(model, texts):
        return [[0.5, 0.5]]

    settings = RetrieverSettings("r", "p", "m", 1, "idx", 1, FormalTriplet())
    retrieval = asyncio.run(EmbedderRetriever(settings, "db", Backend(), embed).retrieve("q"))  # type: ignore[arg-type]
    assert retrieval.graph == RetrievedGraph(
        (Seed("1", 0.9),),
        (RetrievedNode("1", ("Disease",), "Scurvy"), RetrievedNode("2", (), "C")),
        (RetrievedRelationship("1", "CAUSED_BY", "2"),),
    )
    assert graph_from_formal_text(retrieval.result).relationships == retrieval.graph.relationships
