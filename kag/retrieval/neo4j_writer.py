"""Writing a checked `GraphData` into a Neo4j database (the Neo4j side of ``kag graph
import``, see `kag.retrieval.importer`).

What the database holds afterwards, for `kag.retrieval.neo4j_backend` to read:

- every node with its CSV labels plus ``KagNode`` (one vector index covers one label;
  retrieval leaves ``KagNode`` out), its properties, the ``id:ID`` value as the property
  ``id`` (what a node is called across backends; Neo4j's own ids are what the
  translations print), and its embedding as a list of floats in the index's property;
- every relationship with its type and properties;
- the vector index (cosine, the embeddings' dimensions, without quantization) on
  ``KagNode`` and that property, online when the import returns. Quantization (on by
  default since 5.23) scores with 8-bit vectors: measured on the example graph, it swaps
  seeds whose cosines differ by a few thousandths, so the seeds would not be LadybugDB's
  (exact float32 cosine).

Nodes are created in batches of one label set (labels cannot be parameters), each batch
returning the element ids of its nodes; relationships are created in batches of one type
that find both ends by element id (an index seek, no property index needed). Labels,
types and property names are written as quoted identifiers, values as parameters.

A database that holds any node is refused unless ``replace``, which first drops the index
and deletes every node and relationship (in transactions of ``DELETE_BATCH`` rows). An
import is not atomic: a failure leaves what was written, and ``--replace`` starts again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from kag.errors import UsageError
from kag.install import missing_extra
from kag.retrieval.graph_csv import GraphData
from kag.retrieval.ladybug_backend import KEY_COLUMN
from kag.retrieval.ladybug_writer import GraphWriteError
from kag.retrieval.neo4j_backend import (
    CONNECTION_TIMEOUT,
    IMPORT_LABEL,
    Neo4jSettings,
    describe_error,
    driver_uri,
    quote_name,
)

log = logging.getLogger(__name__)

NODE_BATCH = 2000
REL_BATCH = 5000
DELETE_BATCH = 10000
INDEX_WAIT_SECONDS = 600


def import_neo4j_driver() -> Any:
    """The ``neo4j`` module; UsageError naming the install command when it is missing."""
    try:
        import neo4j
    except ImportError:
        raise UsageError(missing_extra("neo4j", "neo4j")) from None
    return neo4j


def where(settings: Neo4jSettings) -> str:
    """How messages and the summary name the target: URI and database."""
    return f"Neo4j at {settings.uri} (database {settings.database!r})"


def _driver(neo4j: Any, settings: Neo4jSettings) -> Any:
    try:
        return neo4j.GraphDatabase.driver(
            driver_uri(settings.uri),
            auth=(settings.user, settings.password),
            connection_timeout=CONNECTION_TIMEOUT,
            user_agent="kag",
        )
    except ValueError as exc:
        raise UsageError(f"{where(settings)}: {exc}") from None


@contextmanager
def _session(neo4j: Any, settings: Neo4jSettings, index: str = "") -> Iterator[Any]:
    """A session on the database of ``settings``, its driver closed after; what the driver
    raises inside is a GraphWriteError naming the database and what to do (``index``: the
    vector index being written, for its messages)."""
    driver = _driver(neo4j, settings)
    try:
        with driver.session(database=settings.database) as session:
            yield session
    except (UsageError, GraphWriteError):
        raise
    except Exception as exc:  # noqa: BLE001 - the driver's errors have no common base worth naming
        raise GraphWriteError(f"{where(settings)}: {describe_error(exc, index)}") from None
    finally:
        driver.close()


def check_neo4j(settings: Neo4jSettings, replace: bool = False) -> None:
    """Before minutes of embedding: the server answers, the credentials and the database
    are right, and the database is empty unless ``replace``. Raises UsageError or
    GraphWriteError."""
    with _session(import_neo4j_driver(), settings) as session:
        _occupied(session, settings, replace)


def write_neo4j(
    settings: Neo4jSettings,
    data: GraphData,
    blobs: Sequence[bytes | None],
    index: str,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> None:
    """Write ``data`` into the Neo4j database of ``settings`` and create the vector
    index ``index`` (also the property that holds the embeddings). Raises UsageError
    when the database holds nodes and not ``replace``, GraphWriteError when the server
    refuses something (its code and message, and what to do)."""
    neo4j = import_neo4j_driver()
    for labels in {tuple(row.labels) for row in data.nodes}:
        if IMPORT_LABEL in labels:
            raise UsageError(f"the label {IMPORT_LABEL!r} is kag's own in Neo4j: rename it in the CSV files")
    dimension = next((len(b) // 4 for b in blobs if b is not None), 0)
    with _session(neo4j, settings, index) as session:
        _prepare(session, settings, index, replace)
        element_ids = _write_nodes(session, data, blobs, index, progress)
        _write_relationships(session, data, element_ids, progress)
        if dimension:
            session.run(
                f"CREATE VECTOR INDEX {quote_name(index)} FOR (n:{IMPORT_LABEL}) ON n.{quote_name(index)}"
                " OPTIONS {indexConfig: {`vector.dimensions`: $dimension,"
                " `vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false}}",
                dimension=dimension,
            ).consume()
            session.run(
                "CALL db.awaitIndex($index, $seconds)", index=index, seconds=INDEX_WAIT_SECONDS
            ).consume()


def _occupied(session: Any, settings: Neo4jSettings, replace: bool) -> bool:
    """Whether the database holds nodes; UsageError when it does and not ``replace``."""
    occupied = bool(session.run("MATCH (n) RETURN count(n) > 0 AS any").single()["any"])
    if occupied and not replace:
        raise UsageError(
            f"{where(settings)}: holds nodes already (use --replace to delete everything in it and import again)"
        )
    return occupied


def _prepare(session: Any, settings: Neo4jSettings, index: str, replace: bool) -> None:
    """Refuse a database that holds nodes, or (``replace``) empty it and drop ``index``."""
    occupied = _occupied(session, settings, replace)
    session.run(f"DROP INDEX {quote_name(index)} IF EXISTS").consume()
    if occupied:
        # Auto-commit, in batches: one transaction for a whole graph would need its size in memory.
        session.run(
            f"MATCH (n) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF {DELETE_BATCH} ROWS"
        ).consume()


def _write_nodes(
    session: Any,
    data: GraphData,
    blobs: Sequence[bytes | None],
    index: str,
    progress: Callable[[str, int, int], None] | None,
) -> dict[str, str]:
    """Create the nodes; returns their element ids by CSV key."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, row in enumerate(data.nodes):
        groups.setdefault(tuple(sorted(set(row.labels))), []).append(i)
    element_ids: dict[str, str] = {}
    done, total = 0, len(data.nodes)
    for labels, rows in groups.items():
        label_text = "".join(f":{quote_name(label)}" for label in (IMPORT_LABEL, *labels))
        create = (
            f"UNWIND $rows AS r CREATE (n{label_text}) SET n = r.p"
            " RETURN r.p." + quote_name(KEY_COLUMN) + " AS key, elementId(n) AS element"
        )
        for start in range(0, len(rows), NODE_BATCH):
            batch = []
            for i in rows[start : start + NODE_BATCH]:
                row = data.nodes[i]
                properties = {k: v for k, v in row.properties.items() if v is not None}
                properties[KEY_COLUMN] = row.key
                blob = blobs[i]
                if blob is not None:
                    properties[index] = np.frombuffer(blob, dtype="<f4").astype(float).tolist()
                batch.append({"p": properties})
            for record in session.execute_write(_run_list, create, batch):
                element_ids[record["key"]] = record["element"]
            done += len(batch)
            if progress is not None:
                progress("nodes", done, total)
    return element_ids


def _write_relationships(
    session: Any,
    data: GraphData,
    element_ids: dict[str, str],
    progress: Callable[[str, int, int], None] | None,
) -> None:
    done, total = 0, sum(len(rows) for rows in data.relationships.values())
    for rel_type, rows in data.relationships.items():
        create = (
            "UNWIND $rows AS r MATCH (a) WHERE elementId(a) = r.s MATCH (b) WHERE elementId(b) = r.t"
            f" CREATE (a)-[x:{quote_name(rel_type)}]->(b) SET x = r.p"
        )
        for start in range(0, len(rows), REL_BATCH):
            batch = [
                {
                    "s": element_ids[row.start],
                    "t": element_ids[row.end],
                    "p": {k: v for k, v in row.properties.items() if v is not None},
                }
                for row in rows[start : start + REL_BATCH]
            ]
            session.execute_write(_run_consume, create, batch)
            done += len(batch)
            if progress is not None:
                progress("relationships", done, total)


def _run_list(tx: Any, query: str, rows: list[dict[str, Any]]) -> list[Any]:
    return list(tx.run(query, rows=rows))


def _run_consume(tx: Any, query: str, rows: list[dict[str, Any]]) -> None:
    tx.run(query, rows=rows).consume()
