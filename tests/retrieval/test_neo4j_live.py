"""Against a real Neo4j (5.26 and 2026.x, tests/neo4j_server.py; `make test-neo4j`):
`kag graph import` into Neo4j, both query forms, the same subgraphs and texts as LadybugDB
for the example graph's questions, and the server's own failures as one-line messages."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.embedding import Embedder, load_embedder
from kag.errors import UsageError
from kag.retrieval.base import RetrievalError
from kag.retrieval.importer import import_graph
from kag.retrieval.ladybug_backend import LadybugGraph, LadybugSettings
from kag.retrieval.neo4j_backend import Neo4jGraph, Neo4jSettings
from kag.retrieval.subgraph import Node, Relationship, Subgraph
from kag.retrieval.translate import parse_translation
from tests.graph_helpers import TokenEmbedder, einstein_files
from tests.neo4j_server import Neo4jServer

pytestmark = pytest.mark.neo4j
neo4j = pytest.importorskip("neo4j")

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "graph"
NODE_FILES = [str(EXAMPLE / "nodes.csv"), str(EXAMPLE / "drugs.csv")]
REL_FILES = [str(EXAMPLE / "relationships.csv")]


def _questions() -> list[str]:
    import json

    raw = json.loads((EXAMPLE / "datasets.json").read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("input"), str):
                found.append(value["input"])
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(raw)
    return found


class CachedEmbedder:
    """The bundled MiniLM, each text embedded once per session."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache: dict[str, npt.NDArray[np.float32]] = {}

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for text, row in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = np.asarray(row, dtype=np.float32)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self.cache[t] for t in texts])


@pytest.fixture(scope="session")
def minilm() -> CachedEmbedder:
    return CachedEmbedder(load_embedder(None))


# What each server holds now ("example" or a test's own graph): the example graph is
# imported again only after a test wrote another one.
_CONTENT: dict[str, str] = {}


def settings_of(server: Neo4jServer, **changes: Any) -> Neo4jSettings:
    values: dict[str, Any] = {"uri": server.uri, "user": server.user, "password": server.password}
    return Neo4jSettings("kg", **(values | changes))


@pytest.fixture
def example(neo4j_server: Neo4jServer, minilm: CachedEmbedder) -> Neo4jServer:
    """The server holding the example graph (nodes.csv, drugs.csv, relationships.csv)."""
    if _CONTENT.get(neo4j_server.uri) != "example":
        import_graph(settings_of(neo4j_server), NODE_FILES, REL_FILES, minilm, replace=True)
        _CONTENT[neo4j_server.uri] = "example"
    return neo4j_server


@pytest.fixture(scope="session")
def ladybug_example(tmp_path_factory: pytest.TempPathFactory, minilm: CachedEmbedder) -> Path:
    pytest.importorskip("ladybug")
    path = tmp_path_factory.mktemp("ladybug") / "medgraph.lbug"
    import_graph(path, NODE_FILES, REL_FILES, minilm)
    return path


def fetch(graph: Any, calls: list[tuple[list[float], int, int, str]]) -> list[Subgraph]:
    async def run() -> list[Subgraph]:
        try:
            return [await graph.fetch(*call) for call in calls]
        finally:
            await graph.aclose()

    result: list[Subgraph] = asyncio.run(run())
    return result


def by_csv_id(subgraph: Subgraph) -> Subgraph:
    """A Neo4j subgraph with its nodes keyed by their `id:ID` value (the `id` property),
    which is also what LadybugDB keys them by; `id` leaves the properties. The embedding is
    not among them: the query leaves the index's property out."""
    key = {k: str(n.properties["id"]) for k, n in subgraph.nodes.items()}
    assert not any("embedding" in n.properties for n in subgraph.nodes.values())
    nodes = {
        key[k]: Node(key[k], n.labels, {p: v for p, v in n.properties.items() if p != "id"})
        for k, n in subgraph.nodes.items()
    }
    rels = tuple(
        Relationship(r.key, r.type, key[r.start], key[r.end], r.properties) for r in subgraph.relationships
    )
    return Subgraph(tuple(key[s] for s in subgraph.seeds), nodes, rels)


def shape(subgraph: Subgraph) -> tuple[Any, ...]:
    """Seeds in order, nodes with labels and properties, relationships by ends and type."""
    return (
        subgraph.seeds,
        {k: (n.labels, dict(n.properties)) for k, n in subgraph.nodes.items()},
        sorted((r.start, r.type, r.end, sorted(r.properties.items())) for r in subgraph.relationships),
    )


# ---------------------------------------------------------------- import


def test_import_writes_nodes_relationships_and_an_online_vector_index(
    example: Neo4jServer, minilm: CachedEmbedder
) -> None:
    driver = neo4j.GraphDatabase.driver(example.uri, auth=(example.user, example.password))
    try:
        nodes = driver.execute_query("MATCH (n:KagNode) RETURN count(n) AS c").records[0]["c"]
        rels = driver.execute_query("MATCH ()-[r]->() RETURN count(r) AS c").records[0]["c"]
        types = driver.execute_query("MATCH ()-[r]->() RETURN count(DISTINCT type(r)) AS c").records[0]["c"]
        index = driver.execute_query(
            "SHOW VECTOR INDEXES YIELD name, state, labelsOrTypes, properties, options"
        ).records
        metformin = driver.execute_query(
            "MATCH (n {id: 'metformin'}) RETURN labels(n) AS l, n.name AS name, size(n.embedding) AS d"
        ).records
    finally:
        driver.close()
    assert (nodes, rels, types) == (541, 835, 12)
    assert [(r["name"], r["state"], r["labelsOrTypes"], r["properties"]) for r in index] == [
        ("embedding", "ONLINE", ["KagNode"], ["embedding"])
    ]
    config = index[0]["options"]["indexConfig"]
    assert (config["vector.dimensions"], config["vector.similarity_function"].lower()) == (384, "cosine")
    assert [(sorted(r["l"]), r["name"], r["d"]) for r in metformin] == [
        (["Drug", "KagNode"], "Metformin", 384)
    ]


def test_import_refuses_a_database_with_nodes_and_replace_rebuilds_it(
    example: Neo4jServer, minilm: CachedEmbedder, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=r"holds nodes already \(use --replace"):
        import_graph(settings_of(example), NODE_FILES, REL_FILES, minilm)
    nodes, rels = einstein_files(tmp_path)
    _CONTENT[example.uri] = "einstein"
    report = import_graph(settings_of(example), [str(nodes)], [str(rels)], TokenEmbedder(), replace=True)
    assert (report.nodes, report.relationships, report.dimension) == (6, 6, 32)
    again = import_graph(settings_of(example), [str(nodes)], [str(rels)], TokenEmbedder(), replace=True)
    assert (again.nodes, again.relationships) == (6, 6)
    driver = neo4j.GraphDatabase.driver(example.uri, auth=(example.user, example.password))
    try:
        counts = driver.execute_query(
            "MATCH (n) OPTIONAL MATCH (n)-[r]->() RETURN count(DISTINCT n) AS n, count(r) AS r"
        ).records[0]
        dims = driver.execute_query("SHOW VECTOR INDEXES YIELD options").records[0]["options"]
        einstein = driver.execute_query(
            "MATCH (n {id: '1'}) RETURN n.age AS age, n.tags AS tags, labels(n) AS labels"
        ).records[0]
    finally:
        driver.close()
    assert (counts["n"], counts["r"]) == (6, 6)  # the second import replaced the first, not added to it
    assert dims["indexConfig"]["vector.dimensions"] == 32
    assert (einstein["age"], einstein["tags"], sorted(einstein["labels"])) == (
        76,
        ["physics", "relativity"],
        ["KagNode", "Person", "Scientist"],
    )


def test_kag_graph_import_into_neo4j_prints_the_summary(
    neo4j_server: Neo4jServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, rels = einstein_files(tmp_path)
    (tmp_path / "config.toml").write_text(
        "[databases.kg]\n"
        'type = "Neo4j"\n'
        f'uri = "{neo4j_server.uri}"\n'
        f'user = "{neo4j_server.user}"\n'
        "password = \"{{ env('KAG_TEST_NEO4J_PASSWORD') }}\"\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("KAG_TEST_NEO4J_PASSWORD", neo4j_server.password)
    monkeypatch.chdir(tmp_path)
    _CONTENT[neo4j_server.uri] = "einstein"
    result = CliRunner().invoke(
        app,
        [
            "graph",
            "import",
            "--database",
            "kg",
            "--nodes",
            str(nodes),
            "--relationships",
            str(rels),
            "--replace",
        ],
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"database       Neo4j at {neo4j_server.uri} (database 'neo4j')",
        "nodes          6 (6 embedded)",
        "relationships  6 (4 type(s))",
        "embeddings     bundled:all-MiniLM-L6-v2-int8, 384 dimensions, property 'embedding'",
    ]
    assert neo4j_server.password not in result.stdout + result.stderr


# ---------------------------------------------------------------- both query forms, parity with LadybugDB


@pytest.mark.parametrize("hops", [1, 2])
def test_the_example_questions_give_the_same_subgraphs_as_ladybug(
    example: Neo4jServer, ladybug_example: Path, minilm: CachedEmbedder, hops: int
) -> None:
    questions = _questions()
    assert len(questions) >= 10
    vectors = [[float(x) for x in row] for row in minilm.embed(questions)]
    calls = [(v, 3, hops, "embedding") for v in vectors]
    forms = ["procedure", "search"] if example.search else ["procedure"]
    ladybug = fetch(LadybugGraph(LadybugSettings("kg", str(ladybug_example))), calls)
    config = tomllib.loads((EXAMPLE / "config.toml").read_text(encoding="utf-8"))
    translations = [
        parse_translation(config["retrievers"][name]["extra"]["medgraph"]["translation"], name)
        for name in ("minilm-formal", "minilm-textual")
    ]
    for form in forms:
        found = [by_csv_id(s) for s in fetch(Neo4jGraph(settings_of(example, query=form)), calls)]
        for question, mine, theirs in zip(questions, found, ladybug, strict=True):
            assert shape(mine) == shape(theirs), (form, question)
            for translation in translations:
                assert translation.render(mine) == translation.render(theirs), (form, question)
            assert mine.relationships, question  # every question reaches some relationship


def test_a_retrieval_that_reaches_no_relationship_keeps_its_seeds_and_nodes_as_ladybug_does(
    example: Neo4jServer, ladybug_example: Path, minilm: CachedEmbedder
) -> None:
    """0 hops reach the seeds alone, and few of them are related: each seed is still a
    node of the subgraph, with its properties, as in LadybugDB's; the text (relationships
    and their ends only) is the same."""
    questions = _questions()
    vectors = [[float(x) for x in row] for row in minilm.embed(questions)]
    calls = [(v, 3, 0, "embedding") for v in vectors]
    forms = ["procedure", "search"] if example.search else ["procedure"]
    ladybug = fetch(LadybugGraph(LadybugSettings("kg", str(ladybug_example))), calls)
    translation = parse_translation(
        tomllib.loads((EXAMPLE / "config.toml").read_text(encoding="utf-8"))["retrievers"]["minilm-formal"][
            "extra"
        ]["medgraph"]["translation"],
        "minilm-formal",
    )
    for form in forms:
        found = [by_csv_id(s) for s in fetch(Neo4jGraph(settings_of(example, query=form)), calls)]
        for question, mine, theirs in zip(questions, found, ladybug, strict=True):
            assert len(mine.seeds) == 3 and set(mine.nodes) == set(mine.seeds), (form, question)
            assert shape(mine) == shape(theirs), (form, question)
            assert translation.render(mine) == translation.render(theirs), (form, question)
    # Some question's seeds share no relationship: the rows the query would have dropped.
    assert any(not s.relationships for s in ladybug)


def test_the_seeds_carry_the_vector_index_score(
    example: Neo4jServer, ladybug_example: Path, minilm: CachedEmbedder
) -> None:
    """Neo4j's cosine index scores a node (1 + cosine) / 2; LadybugDB reports the cosine:
    for the same seeds, one is the other rescaled."""
    vectors = [[float(x) for x in row] for row in minilm.embed(_questions())]
    calls = [(v, 3, 1, "embedding") for v in vectors]
    ladybug = fetch(LadybugGraph(LadybugSettings("kg", str(ladybug_example))), calls)
    forms = ["procedure", "search"] if example.search else ["procedure"]
    for form in forms:
        for mine, theirs in zip(
            fetch(Neo4jGraph(settings_of(example, query=form)), calls), ladybug, strict=True
        ):
            assert len(mine.seed_scores) == len(mine.seeds) == 3, form
            assert by_csv_id(mine).seeds == theirs.seeds, form
            expected = [(1 + cosine) / 2 for cosine in theirs.seed_scores]
            assert list(mine.seed_scores) == pytest.approx(expected, abs=1e-4), form


def test_auto_takes_search_from_2026_and_the_procedure_before(
    example: Neo4jServer, minilm: CachedEmbedder
) -> None:
    graph = Neo4jGraph(settings_of(example))
    vector = [float(x) for x in minilm.embed(["Which organ secretes insulin?"])[0]]
    (subgraph,) = fetch(graph, [(vector, 3, 1, "embedding")])
    assert graph._form == ("search" if example.search else "procedure")
    assert subgraph.nodes


def test_search_on_5_26_says_to_use_the_procedure(example: Neo4jServer) -> None:
    if example.search:
        pytest.skip("this server has the SEARCH clause")
    with pytest.raises(RetrievalError) as info:
        fetch(Neo4jGraph(settings_of(example, query="search")), [([0.1] * 384, 3, 1, "embedding")])
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"Neo4j at {example.uri} (database 'neo4j', index 'embedding'): ")
    assert 'set query = "procedure" or "auto"' in message


@pytest.mark.parametrize("form", ["procedure", "search"])
def test_an_index_name_cannot_change_the_query(example: Neo4jServer, form: str) -> None:
    if form == "search" and not example.search:
        pytest.skip("this server has no SEARCH clause")
    hostile = "embedding`) MATCH (n) DETACH DELETE n //"
    with pytest.raises(RetrievalError) as info:
        fetch(Neo4jGraph(settings_of(example, query=form)), [([0.1] * 384, 3, 1, hostile)])
    assert "create the vector index" in str(info.value)
    driver = neo4j.GraphDatabase.driver(example.uri, auth=(example.user, example.password))
    try:
        assert driver.execute_query("MATCH (n) RETURN count(n) AS c").records[0]["c"] == 541
    finally:
        driver.close()


# ---------------------------------------------------------------- the server's failures, one line each


@pytest.mark.parametrize(
    ("changes", "index", "dimension", "code", "hint"),
    [
        (
            {"password": "wrong-password-1"},
            "embedding",
            384,
            "Neo.ClientError.Security.Unauthorized",
            "check 'user' and 'password'",
        ),
        (
            {"database": "nowhere"},
            "embedding",
            384,
            "Neo.ClientError.Database.DatabaseNotFound",
            "check 'database'",
        ),
        ({}, "no_such_index", 384, "Neo.ClientError.", "create the vector index 'no_such_index'"),
        (
            {},
            "embedding",
            32,
            "Neo.ClientError.",
            "the retriever's embedding model must be the one that built the index",
        ),
    ],
    ids=["wrong-password", "unknown-database", "missing-index", "wrong-dimensions"],
)
@pytest.mark.parametrize("form", ["procedure", "search"])
def test_a_failure_is_one_line_naming_the_database_and_what_to_do(
    example: Neo4jServer,
    form: str,
    changes: dict[str, str],
    index: str,
    dimension: int,
    code: str,
    hint: str,
) -> None:
    if form == "search" and not example.search:
        pytest.skip("this server has no SEARCH clause")
    settings = settings_of(example, query=form, **changes)
    with pytest.raises(RetrievalError) as info:
        fetch(Neo4jGraph(settings, max_retry_time=0.0), [([0.1] * dimension, 3, 1, index)])
    message = str(info.value)
    assert "\n" not in message and "wrong-password-1" not in message
    assert message.startswith(
        f"Neo4j at {example.uri} (database {settings.database!r}, index {index!r}): {code}"
    )
    assert hint in message
