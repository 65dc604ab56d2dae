"""The runner's contract: `validate_retrieval` (every configuration problem as a
ConfigError naming the file, the component and the problem) and `open_retriever` (a
retriever whose `retrieve` gives the result file's retrieval block, or fails as the spec
says: an error result, never a crashed run)."""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path
from typing import Any

import pytest

from kag.errors import ConfigError
from kag.results import Retrieval
from kag.retrieval.base import RetrievalError
from kag.retrieval.factory import open_retriever, validate_retrieval
from kag.retrieval.translate import FormalTriplet, TextualTriplet
from tests.graph_helpers import TokenEmbedder, einstein_db

pytest.importorskip("ladybug")
CFG = "config.toml"


def tables(db_path: str) -> dict[str, Any]:
    return {
        "providers": {"fe": {"type": "FastEmbed"}, "ol": {"type": "Ollama"}},
        "databases": {
            "kg": {"type": "Ladybug", "path": db_path},
            "neo": {"type": "Neo4j", "uri": "127.0.0.1:7687", "password": "pw-secret-1"},
        },
        "retrievers": {
            "r": {
                "type": "Embedder",
                "provider": "fe",
                "top_k": 1,
                "extra": {
                    "kg": {"type": "Ladybug", "neighborhood": 1, "translation": {"type": "FormalTriplet"}},
                    "neo": {"type": "Neo4j", "index": "MESH_INDEX"},
                },
            }
        },
    }


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One database for the tests that only read it."""
    return str(einstein_db(tmp_path_factory.mktemp("kg")))


def validate(t: dict[str, Any], retriever: str = "r", database: str = "kg") -> None:
    validate_retrieval(CFG, retriever, database, t["retrievers"], t["databases"], t["providers"])


def test_valid_pairs_pass(db: str) -> None:
    t = tables(db)
    validate(t)
    validate(t, database="neo")
    t["retrievers"]["r"]["extra"].pop("kg")  # Ladybug needs no extra table: defaults
    validate(t)


def _set(t: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    node = t
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value


_DELETE = object()

CASES = [
    (
        "retrievers/q",
        {"type": "Embedder"},
        "r",
        "kg",
        "retrievers.x: not defined (the [retrievers] tables are: q, r)",
        "x",
    ),
    (
        "databases/kg/type",
        "Sqlite",
        "r",
        "kg",
        "databases.kg: unknown database type 'Sqlite' (expected one of Neo4j, Ladybug)",
        None,
    ),
    ("databases/kg/type", _DELETE, "r", "kg", "databases.kg: missing required key 'type'", None),
    ("databases/kg/path", _DELETE, "r", "kg", "databases.kg: missing required key 'path'", None),
    ("databases/kg/path", "", "r", "kg", "databases.kg: 'path' must not be empty", None),
    (
        "databases/kg/path",
        "nowhere.lbug",
        "r",
        "kg",
        "databases.kg: nowhere.lbug: no such database (build it with `kag graph import -c config.toml --database kg ...`)",
        None,
    ),
    ("databases/neo/password", _DELETE, "r", "neo", "databases.neo: missing required key 'password'", None),
    (
        "databases/neo/uri",
        "http://h:7474",
        "r",
        "neo",
        "databases.neo: 'uri': unsupported URI scheme 'http'",
        None,
    ),
    ("databases/neo/user", 3, "r", "neo", "databases.neo: 'user' must be a string (got integer)", None),
    (
        "retrievers/r/type",
        "Keyword",
        "r",
        "kg",
        "retrievers.r: unknown retriever type 'Keyword' (expected one of Embedder)",
        None,
    ),
    ("retrievers/r/provider", _DELETE, "r", "kg", "retrievers.r: missing required key 'provider'", None),
    (
        "retrievers/r/provider",
        "nope",
        "r",
        "kg",
        "retrievers.r: provider 'nope' is not defined (providers: fe, ol)",
        None,
    ),
    (
        "retrievers/r/provider",
        "ol",
        "r",
        "kg",
        "retrievers.r: missing required key 'model' (the embedding model of provider 'ol')",
        None,
    ),
    ("retrievers/r/top_k", 0, "r", "kg", "retrievers.r: 'top_k' must be an integer >= 1 (got 0)", None),
    ("retrievers/r/top_k", True, "r", "kg", "retrievers.r: 'top_k' must be an integer >= 1 (got True)", None),
    ("retrievers/r/top_k", "3", "r", "kg", "retrievers.r: 'top_k' must be an integer >= 1 (got '3')", None),
    (
        "retrievers/r/extra",
        [],
        "r",
        "kg",
        "retrievers.r: 'extra' must be a table of per-database tables (got array)",
        None,
    ),
    ("retrievers/r/extra/kg", "x", "r", "kg", "retrievers.r.extra.kg: must be a table (got string)", None),
    (
        "retrievers/r/extra/kg/type",
        "Neo4j",
        "r",
        "kg",
        "retrievers.r.extra.kg: type 'Neo4j' does not match databases.kg (type 'Ladybug')",
        None,
    ),
    (
        "retrievers/r/extra/kg/neighborhood",
        -1,
        "r",
        "kg",
        "retrievers.r.extra.kg: 'neighborhood' must be an integer >= 0 (got -1)",
        None,
    ),
    ("retrievers/r/extra/kg/index", "", "r", "kg", "retrievers.r.extra.kg: 'index' must not be empty", None),
    (
        "retrievers/r/extra/kg/translation",
        {"type": "Fancy"},
        "r",
        "kg",
        "retrievers.r.extra.kg.translation: unknown translation type 'Fancy'",
        None,
    ),
    (
        "retrievers/r/extra/neo",
        _DELETE,
        "r",
        "neo",
        "retrievers.r.extra.neo: missing (a Neo4j database needs the retriever's extra.neo table",
        None,
    ),
    (
        "retrievers/r/extra/neo/index",
        _DELETE,
        "r",
        "neo",
        "retrievers.r.extra.neo: missing required key 'index'",
        None,
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "retriever", "database", "message", "ask"),
    CASES,
    ids=[c[4].split(":")[0] + "|" + c[4].split(": ", 1)[1][:30] for c in CASES],
)
def test_configuration_errors_name_file_component_and_problem(
    db: str, path: str, value: Any, retriever: str, database: str, message: str, ask: str | None
) -> None:
    t = tables(db)
    _set(t, path, value if value is _DELETE else copy.deepcopy(value))
    with pytest.raises(ConfigError) as info:
        validate(t, retriever=ask or retriever, database=database)
    assert str(info.value).startswith(f"{CFG}: ")
    assert message in str(info.value)
    assert "pw-secret-1" not in str(info.value)


def test_unknown_keys_are_warned_about(db: str, caplog: pytest.LogCaptureFixture) -> None:
    t = tables(db)
    t["retrievers"]["r"]["extra"]["kg"]["neighbourhood"] = 2
    with caplog.at_level(logging.WARNING, logger="kag.retrieval.factory"):
        validate(t)
    assert "config.toml: retrievers.r.extra.kg: ignored unknown key(s) 'neighbourhood'" in caplog.text


def test_open_retriever_reads_the_settings(db: str) -> None:
    t = tables(db)
    t["retrievers"]["r"]["extra"]["kg"]["translation"] = {
        "type": "TextualTriplet",
        "relation_formats": {"R": "{FROM}"},
    }
    retriever = open_retriever("r", "kg", t["retrievers"], t["databases"], TokenEmbedder().embed_fn)
    assert (retriever.name, retriever.database) == ("r", "kg")
    assert (retriever.settings.top_k, retriever.settings.neighborhood, retriever.settings.index) == (
        1,
        1,
        "embedding",
    )
    assert isinstance(retriever.settings.translation, TextualTriplet)
    neo = open_retriever("r", "neo", t["retrievers"], t["databases"], TokenEmbedder().embed_fn)
    assert neo.graph.backend == "neo4j" and neo.settings.index == "MESH_INDEX" and neo.settings.top_k == 1
    assert isinstance(neo.settings.translation, FormalTriplet)


# ---------------------------------------------------------------- retrieve


def retrieve(t: dict[str, Any], text: str, embed: Any = None, database: str = "kg") -> Retrieval:
    retriever = open_retriever(
        "r", database, t["retrievers"], t["databases"], embed or TokenEmbedder().embed_fn
    )

    async def run() -> Retrieval:
        try:
            return await retriever.retrieve(text)
        finally:
            await retriever.aclose()

    return asyncio.run(run())


def test_retrieval_block_of_the_result_file(db: str) -> None:
    t = tables(db)
    t["retrievers"]["r"]["extra"]["kg"]["translation"] = {
        "property_filters": {"Person:Scientist": ["name"], "City": []}
    }
    retrieval = retrieve(t, "Albert Einstein")
    assert retrieval.result == (
        "(1)-[:award { year: 1921 }]->(4)\n"
        '(1)-[name]->("Albert Einstein")\n'
        '(4)-[name]->("Nobel Prize in Physics")\n'
        "(1)-[:bornIn]->(3)\n"
        "(1)-[:educatedAt { year: 1896 }]->(2)\n"
        "(2)-[founded]->(1833)\n"
        '(2)-[name]->("University of Zurich")\n'
        "(5)-[:spouse { year: 1903 }]->(1)\n"
        '(5)-[name]->("Mileva Maric")\n'
        "(5)-[:educatedAt { year: 1896 }]->(2)\n"
    )
    assert retrieval.retriever == "embedder"
    assert retrieval.document == "Albert Einstein"
    assert retrieval.vector is not None and len(retrieval.vector) == 32
    assert retrieval.vector == [
        float(str(__import__("numpy").float32(x))) for x in TokenEmbedder().vector("Albert Einstein")
    ]
    db = retrieval.database
    assert db is not None and db.backend == "ladybug"
    # 5 relationships, 5 nodes (3 in a line, filtered to nothing), 4 + 5 properties.
    assert (db.vertices, db.relationships, db.properties) == (5, 5, 9)
    assert (
        db.time is not None and retrieval.time is not None and retrieval.time.seconds >= db.time.seconds > 0
    )


def test_empty_subgraph_gives_an_empty_result(db: str) -> None:
    t = tables(db)
    t["retrievers"]["r"]["extra"]["kg"]["neighborhood"] = 0  # one seed, no relationship
    retrieval = retrieve(t, "Albert Einstein")
    assert retrieval.result == ""
    assert retrieval.database is not None and (
        retrieval.database.vertices,
        retrieval.database.relationships,
    ) == (0, 0)


PREFIX = "Failed during the knowledge retrieval phase (KAG) on database 'kg': "


def test_database_gone_at_run_time_is_a_retrieval_error(tmp_path: Path) -> None:
    path = einstein_db(tmp_path)
    t = tables(str(path))
    validate(t)
    path.unlink()
    with pytest.raises(RetrievalError) as info:
        retrieve(t, "Albert Einstein")
    assert str(info.value).startswith(PREFIX) and "no such Ladybug database" in str(info.value)


def test_missing_index_is_a_retrieval_error(db: str) -> None:
    t = tables(db)
    t["retrievers"]["r"]["extra"]["kg"]["index"] = "vec"
    with pytest.raises(RetrievalError, match=r"^Failed during .*'kg': .*index 'vec' is not a node property"):
        retrieve(t, "x")


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        ([], "did not return one vector"),
        ([[]], "returned an empty vector"),
        ([["a"]], "not numbers"),
        ([[float("nan")] * 32], "NaN or infinite"),
        ([[0.1] * 8], "has 8 dimensions but the 'embedding' embeddings have 32"),
    ],
)
def test_bad_embeddings_are_retrieval_errors(db: str, vectors: Any, message: str) -> None:
    t = tables(db)

    async def embed(model: str, texts: list[str]) -> Any:
        return vectors

    with pytest.raises(RetrievalError, match=message):
        retrieve(t, "x", embed)


def test_provider_failures_pass_through_for_the_runner_to_report(db: str) -> None:
    t = tables(db)

    class Boom(Exception):
        pass

    async def embed(model: str, texts: list[str]) -> Any:
        raise Boom("provider down")

    with pytest.raises(Boom):
        retrieve(t, "x", embed)


def test_the_retriever_passes_its_model_to_the_provider(db: str) -> None:
    t = tables(db)
    t["retrievers"]["r"]["model"] = "minilm"
    seen: list[tuple[str, list[str]]] = []

    async def embed(model: str, texts: list[str]) -> list[list[float]]:
        seen.append((model, texts))
        return await TokenEmbedder().embed_fn(model, texts)

    retrieve(t, "Albert Einstein", embed)
    assert seen == [("minilm", ["Albert Einstein"])]
