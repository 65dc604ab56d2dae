"""Neo4j (5.x, 2025.x): one parameterized Cypher query per retrieval, one driver per run.

The query is the compatible one (docs/architecture.md), plus the seed list (for the
rendering order)::

    CALL db.index.vector.queryNodes($index, $top_k, $vector) YIELD node
    WITH collect(node) AS seeds
    UNWIND seeds AS seed
    MATCH (seed)-[*0..N]-(reachable)
    WITH seeds, collect(DISTINCT reachable) AS nodes
    UNWIND nodes AS n
    MATCH (n)-[rel]->(m)
    WHERE m IN nodes
    WITH DISTINCT seeds, rel
    RETURN [s IN seeds | elementId(s)] AS seeds,
           startNode(rel) AS source, rel AS predicate, endNode(rel) AS target

``N`` (the neighborhood) is written into the text because Cypher cannot parameterize a
variable-length bound; it is an ``int`` checked at configuration time, so only digits
reach the query. Everything else is a parameter.

Nodes are printed by their numeric id (the last part of the element id, what Cypher's
``id()`` gives), so results match compatible files line for line.
The driver is asynchronous (``neo4j.AsyncGraphDatabase``): no thread is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.retrieval.base import RetrievalError
from kag.retrieval.subgraph import Node, Relationship, Subgraph

log = logging.getLogger(__name__)

# A database that is down fails after these, not after the driver's defaults (30 s of
# retries on top of a 30 s connect timeout, for every task of a run).
CONNECTION_TIMEOUT = 10.0
MAX_RETRY_TIME = 2.0
SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def build_query(neighborhood: int) -> str:
    """The retrieval query for ``neighborhood`` hops (parameters ``$index``, ``$top_k``,
    ``$vector``). Raises ValueError for anything but a non-negative int."""
    if isinstance(neighborhood, bool) or not isinstance(neighborhood, int) or neighborhood < 0:
        raise ValueError(f"neighborhood must be a non-negative integer (got {neighborhood!r})")
    return (
        "CALL db.index.vector.queryNodes($index, $top_k, $vector) YIELD node\n"
        "WITH collect(node) AS seeds\n"
        "UNWIND seeds AS seed\n"
        f"MATCH (seed)-[*0..{neighborhood}]-(reachable)\n"
        "WITH seeds, collect(DISTINCT reachable) AS nodes\n"
        "UNWIND nodes AS n\n"
        "MATCH (n)-[rel]->(m)\n"
        "WHERE m IN nodes\n"
        "WITH DISTINCT seeds, rel\n"
        "RETURN [s IN seeds | elementId(s)] AS seeds,\n"
        "       startNode(rel) AS source, rel AS predicate, endNode(rel) AS target"
    )


def node_key(element_id: str) -> str:
    """``"4:0b5e…:129620460"`` -> ``"129620460"`` (the numeric id);
    an element id of any other shape is used whole."""
    head, _, tail = element_id.rpartition(":")
    return tail if head and tail.isdigit() else element_id


def _node(entity: Any) -> Node:
    return Node(
        key=node_key(str(entity.element_id)),
        labels=frozenset(entity.labels),
        properties={k: v for k, v in entity.items() if v is not None},
    )


def subgraph_from_records(records: Iterable[Mapping[str, Any]]) -> Subgraph:
    """Build the subgraph from the query's rows (``seeds``, ``source``, ``predicate``,
    ``target``: driver ``Node``/``Relationship`` objects, or anything with their
    ``element_id``, ``labels``, ``type`` and ``items()``). No rows: the empty subgraph
    (no relationship among the reached nodes renders nothing)."""
    seeds: tuple[str, ...] = ()
    nodes: dict[str, Node] = {}
    relationships: dict[str, Relationship] = {}
    for record in records:
        if not seeds:
            seeds = tuple(node_key(str(s)) for s in record["seeds"] or ())
        source, target = _node(record["source"]), _node(record["target"])
        nodes.setdefault(source.key, source)
        nodes.setdefault(target.key, target)
        predicate = record["predicate"]
        key = str(predicate.element_id)
        relationships.setdefault(
            key,
            Relationship(
                key=node_key(key),
                type=str(predicate.type),
                start=source.key,
                end=target.key,
                properties={k: v for k, v in predicate.items() if v is not None},
            ),
        )
    return Subgraph(seeds=seeds, nodes=nodes, relationships=tuple(relationships.values()))


def driver_uri(uri: str) -> str:
    """``uri`` with ``bolt://`` when it has no scheme: configurations write ``host:port``,
    the Python driver wants a scheme. ValueError for a scheme it does not speak."""
    scheme, sep, _ = uri.partition("://")
    if sep and scheme in SCHEMES:
        return uri
    if sep:
        raise ValueError(f"unsupported URI scheme {scheme!r} (expected one of {', '.join(SCHEMES)})")
    return f"bolt://{uri}"


@dataclass(frozen=True)
class Neo4jSettings:
    """``[databases.<name>] type = "Neo4j"``."""

    name: str
    uri: str = "127.0.0.1:7687"
    user: str = "neo4j"
    password: str = field(default="", repr=False)
    database: str = "neo4j"


def _describe(exc: BaseException) -> str:
    """A driver error as one line: its code (``Neo.ClientError...``) or type, and its
    message with the line breaks folded (the driver puts the reason on a second line)."""
    code = getattr(exc, "code", None)
    message = " ".join(str(getattr(exc, "message", None) or exc).split()) or type(exc).__name__
    if len(message) > 400:
        message = message[:397] + "..."
    return f"{code}: {message}" if code else f"{type(exc).__name__}: {message}"


class Neo4jGraph:
    """One ``AsyncDriver`` for the whole run, created on the first retrieval."""

    backend = "neo4j"

    def __init__(self, settings: Neo4jSettings, max_retry_time: float = MAX_RETRY_TIME) -> None:
        self.settings = settings
        self.max_retry_time = max_retry_time
        self._driver: Any = None

    def _open(self) -> Any:
        if self._driver is None:
            import neo4j  # heavy: only when a KAG setup runs against Neo4j

            # The driver logs each retry as a warning; the final error is what a user sees.
            logging.getLogger("neo4j").addHandler(logging.NullHandler())
            self._driver = neo4j.AsyncGraphDatabase.driver(
                driver_uri(self.settings.uri),
                auth=(self.settings.user, self.settings.password),
                connection_timeout=CONNECTION_TIMEOUT,
                max_transaction_retry_time=self.max_retry_time,
                user_agent="kag",
            )
        return self._driver

    async def fetch(self, vector: Sequence[float], top_k: int, neighborhood: int, index: str) -> Subgraph:
        """Run the retrieval query; raises RetrievalError (database down, index missing,
        authentication, dimension mismatch) with the driver's code and message."""
        query = build_query(neighborhood)
        try:
            import neo4j

            driver = self._open()
            result = await driver.execute_query(
                query,
                parameters_={"index": index, "top_k": top_k, "vector": [float(x) for x in vector]},
                database_=self.settings.database,
                routing_=neo4j.RoutingControl.READ,
            )
        except RetrievalError:
            raise
        except Exception as exc:  # noqa: BLE001 - the driver's errors have no common base worth naming
            raise RetrievalError(
                f"Neo4j at {self.settings.uri} (database {self.settings.database!r}, index {index!r}): {_describe(exc)}"
            ) from None
        return subgraph_from_records(result.records)

    async def aclose(self) -> None:
        if self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.close()
