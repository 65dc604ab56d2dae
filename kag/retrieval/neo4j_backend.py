"""Neo4j (5.x, 2025.x, 2026.x): one parameterized Cypher query per retrieval, one driver per run.

The query is the compatible one (docs/architecture.md), plus the seed list (for the
rendering order). Its first clause finds the seeds, in one of two forms chosen per
database (``query = "auto" | "procedure" | "search"``)::

    CALL db.index.vector.queryNodes($index, $candidates, $vector) YIELD node, score
    WITH node, score ORDER BY score DESC LIMIT $top_k                         # procedure
    WITH collect(node) AS seeds, collect(score) AS scores

    CYPHER 25
    MATCH (node) SEARCH node IN (VECTOR INDEX `idx` FOR $vector LIMIT $candidates) SCORE AS score
    WITH node, score ORDER BY score DESC LIMIT $top_k                         # search
    WITH collect(node) AS seeds, collect(score) AS scores

Neo4j's vector index is approximate (HNSW) and searches as wide as the number of
neighbours asked for: asked for 3, it missed the 3 nearest nodes of an example question
(measured on 5.26 and 2026.08), so both forms ask for ``$candidates`` =
max(``top_k``, ``CANDIDATES``) and keep the ``top_k`` best. Then, for both::

    UNWIND seeds AS seed
    MATCH (seed)-[*0..N]-(reachable)
    WITH seeds, scores, collect(DISTINCT reachable) AS nodes
    UNWIND nodes AS n
    OPTIONAL MATCH (n)-[rel]->(m)
    WHERE m IN nodes
    WITH DISTINCT seeds, scores, n, rel WHERE rel IS NOT NULL OR n IN seeds
    WITH seeds, scores, rel, coalesce(startNode(rel), n) AS a, endNode(rel) AS b
    RETURN [s IN seeds | elementId(s)] AS seeds, scores AS seed_scores,
           elementId(a) AS source, labels(a) AS source_labels,
           [k IN keys(a) WHERE k <> $hidden | [k, a[k]]] AS source_properties,
           rel AS predicate,
           elementId(b) AS target, labels(b) AS target_labels,
           [k IN keys(b) WHERE k <> $hidden | [k, b[k]]] AS target_properties

The match of the relationships is optional, so that a seed with no relationship to
another reached node (a seed with no neighbour, every seed of a 0-hop retrieval) still has
a row: a null ``rel``, its own properties as the source's and no target. Every other reached
node lies on a path from a seed, so a relationship row holds it. The subgraph then holds
every reached node and the seeds, as LadybugDB's does, even when no relationship was
reached (the rendered text is the same: it is written from the relationships and their
ends alone); the Rust tool's ``MATCH`` dropped those rows, and with them the seeds of a
retrieval that reached no relationship. Only seeds get such a row, so a retrieval returns
at most top-k rows more than the Rust tool's query did (on a 5,000-node graph at 2 hops,
Neo4j 2026: median 46.9 ms against 46.7).

Each row also carries the seeds' scores, as the vector index reports them (for the
cosine index ``kag graph import`` creates, (1 + cosine) / 2, in [0, 1]), in seed order.
The rows carry each end node's properties but the vector index's own property
(``$hidden``, looked up once per run and index with ``SHOW INDEXES``), as LadybugDB
leaves its embeddings out: returning whole nodes made a 2-hop retrieval on a
50,000-node graph 9 times slower (936 against 107 ms on 2026.08, 384 floats per node and
row), and a vector in the prompt helps no model.

The ``SEARCH`` clause exists from Neo4j 2026.01 under Cypher 25 only; the procedure is
deprecated in Cypher 25 from 2026.04 but still runs. ``auto`` asks the server its
version once per run (the driver's server agent) and takes ``SEARCH`` from 2026.01.

``N`` (the neighborhood) is written into the text because Cypher cannot parameterize a
variable-length bound; it is an ``int`` checked at configuration time, so only digits
reach the query. ``SEARCH`` cannot take the index name as a parameter either: it is
written as a quoted identifier (backticks doubled), so no name can change the query.
Everything else is a parameter.

Nodes are printed by their numeric id (the last part of the element id, what Cypher's
``id()`` gives), so results match compatible files line for line. The label
``KagNode``, which ``kag graph import`` gives every node so that one vector index covers
them, is left out of the labels.
The driver is asynchronous (``neo4j.AsyncGraphDatabase``): no thread is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kag.retrieval.base import RetrievalError
from kag.retrieval.subgraph import Node, Relationship, Subgraph

log = logging.getLogger(__name__)

# A database that is down fails after these, not after the driver's defaults (30 s of
# retries on top of a 30 s connect timeout, for every task of a run).
CONNECTION_TIMEOUT = 10.0
MAX_RETRY_TIME = 2.0
SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
QueryForm = Literal["auto", "procedure", "search"]
QUERY_FORMS: tuple[QueryForm, ...] = ("auto", "procedure", "search")
# The first Neo4j release with the SEARCH clause (Cypher 25).
SEARCH_SINCE = (2026, 1)
# The index is asked for at least this many neighbours (see the module docstring).
CANDIDATES = 100
# The label `kag graph import` gives every node (one vector index covers one label).
IMPORT_LABEL = "KagNode"


def quote_name(name: str) -> str:
    """``name`` as a Cypher identifier in backticks, backticks inside doubled."""
    return "`" + name.replace("`", "``") + "`"


def build_query(
    neighborhood: int, form: Literal["procedure", "search"] = "procedure", index: str = ""
) -> str:
    """The retrieval query for ``neighborhood`` hops. The procedure form takes the
    parameters ``$index``, ``$candidates``, ``$top_k`` and ``$vector``; the search form the
    same but ``$index``: the index is quoted in the text. Raises ValueError for anything but a
    non-negative int, or an empty index name in the search form."""
    if isinstance(neighborhood, bool) or not isinstance(neighborhood, int) or neighborhood < 0:
        raise ValueError(f"neighborhood must be a non-negative integer (got {neighborhood!r})")
    if form == "search":
        if not index:
            raise ValueError("the SEARCH form needs the index name")
        seeds = (
            "CYPHER 25\n"
            f"MATCH (node) SEARCH node IN (VECTOR INDEX {quote_name(index)} FOR $vector LIMIT $candidates)"
            " SCORE AS score\n"
        )
    else:
        seeds = "CALL db.index.vector.queryNodes($index, $candidates, $vector) YIELD node, score\n"
    return seeds + (
        "WITH node, score ORDER BY score DESC LIMIT $top_k\n"
        "WITH collect(node) AS seeds, collect(score) AS scores\n"
        "UNWIND seeds AS seed\n"
        f"MATCH (seed)-[*0..{neighborhood}]-(reachable)\n"
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


def node_key(element_id: str) -> str:
    """``"4:0b5e…:129620460"`` -> ``"129620460"`` (the numeric id);
    an element id of any other shape is used whole."""
    head, _, tail = element_id.rpartition(":")
    return tail if head and tail.isdigit() else element_id


def _node(entity: Any) -> Node:
    return Node(
        key=node_key(str(entity.element_id)),
        labels=frozenset(entity.labels) - {IMPORT_LABEL},
        properties={k: v for k, v in entity.items() if v is not None},
    )


def _lean_node(record: Mapping[str, Any], end: str) -> Node:
    return Node(
        key=node_key(str(record[end])),
        labels=frozenset(record[f"{end}_labels"] or ()) - {IMPORT_LABEL},
        properties={str(k): v for k, v in record[f"{end}_properties"] or () if v is not None},
    )


def subgraph_from_records(records: Iterable[Mapping[str, Any]]) -> Subgraph:
    """Build the subgraph from the query's rows (``seeds``, ``seed_scores``, ``source``,
    ``predicate``, ``target``: driver ``Node``/``Relationship`` objects, or anything with
    their ``element_id``, ``labels``, ``type`` and ``items()``). A row without
    ``seed_scores`` gives seeds without scores; a row without ``predicate`` gives its source
    node alone (a reached node without a relationship to another). No rows: the empty
    subgraph (the index gave no seed)."""
    seeds: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    nodes: dict[str, Node] = {}
    relationships: dict[str, Relationship] = {}
    for record in records:
        if not seeds:
            seeds = tuple(node_key(str(s)) for s in record["seeds"] or ())
            scores = _scores(record.get("seed_scores"), len(seeds))
        lean = record.get("source_labels") is not None  # the query's rows: ids, labels, property pairs
        source = _lean_node(record, "source") if lean else _node(record["source"])  # else whole driver nodes
        nodes.setdefault(source.key, source)
        predicate = record["predicate"]
        if predicate is None:  # a reached node without a relationship to another one
            continue
        target = _lean_node(record, "target") if lean else _node(record["target"])
        nodes.setdefault(target.key, target)
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
    return Subgraph(seeds=seeds, nodes=nodes, relationships=tuple(relationships.values()), seed_scores=scores)


def _scores(values: Any, count: int) -> tuple[float, ...]:
    """The seeds' scores as the vector index reports them, one per seed; () when a row
    carries none or not one per seed (rows of an older query, or of another server)."""
    if not isinstance(values, (list, tuple)) or len(values) != count:
        return ()
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return ()
    return tuple(float(v) for v in values)


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
    query: QueryForm = "auto"


def server_version(agent: str) -> tuple[int, int] | None:
    """``"Neo4j/2026.08.1"`` -> ``(2026, 8)``; None for an agent of another shape."""
    _, _, version = agent.partition("/")
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def choose_form(query: QueryForm, agent: str) -> Literal["procedure", "search"]:
    """The query form for ``query`` on a server announcing ``agent``: ``auto`` takes
    ``search`` from Neo4j 2026.01, else the procedure (an unknown agent included)."""
    if query != "auto":
        return query
    version = server_version(agent)
    return "search" if version is not None and version >= SEARCH_SINCE else "procedure"


# What to do about the server's errors, by the code's last part (see `_hint`).
HINTS = {
    "Unauthorized": "check 'user' and 'password' of the database's table in the configuration",
    "AuthenticationRateLimit": "check 'user' and 'password'; the server refuses logins for a while",
    "DatabaseNotFound": "check 'database' of the database's table (SHOW DATABASES lists them)",
    "Forbidden": "the user lacks read rights on this database: grant them (GRANT MATCH, TRAVERSE ...)",
    "AccessMode": "the user lacks read rights on this database: grant them (GRANT MATCH, TRAVERSE ...)",
}


def _hint(code: str | None, message: str, index: str) -> str:
    """One sentence saying what to do about a failed retrieval."""
    last = (code or "").rsplit(".", 1)[-1]
    if last in HINTS:
        return HINTS[last]
    lowered = message.lower()
    if "dimension" in lowered:
        return "the retriever's embedding model must be the one that built the index (same dimensions)"
    if "index" in lowered and ("no such" in lowered or "not exist" in lowered or "not found" in lowered):
        return f"create the vector index {index!r} (kag graph import does) or fix the retriever's 'index'"
    if "cypher version" in lowered or ("search" in lowered and "syntax" in (code or "").lower()):
        return 'this server has no SEARCH clause (Neo4j 2026.01 and later): set query = "procedure" or "auto"'
    if code is None:
        return "is the server running and reachable at this URI?"
    return "see the server's message"


def describe_error(exc: BaseException, index: str) -> str:
    """A driver error as one line: its code (``Neo.ClientError...``) or type, its message
    with the line breaks folded (the driver puts the reason on a second line, and a
    syntax error's caret on a third), then what to do."""
    code = getattr(exc, "code", None)
    raw = str(getattr(exc, "message", None) or exc)
    message = " ".join(raw.split('\n"', 1)[0].split()) or type(exc).__name__
    if len(message) > 400:
        message = message[:397] + "..."
    head = f"{code}: {message}" if code else f"{type(exc).__name__}: {message}"
    return f"{head} ({_hint(code, message, index)})"


class Neo4jGraph:
    """One ``AsyncDriver`` for the whole run, created on the first retrieval."""

    backend = "neo4j"

    def __init__(self, settings: Neo4jSettings, max_retry_time: float = MAX_RETRY_TIME) -> None:
        self.settings = settings
        self.max_retry_time = max_retry_time
        self._driver: Any = None
        self._form: Literal["procedure", "search"] | None = None
        self._hidden: dict[str, str] = {}  # index -> the node property it covers ("" unknown)

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
        try:
            import neo4j

            driver = self._open()
            if self._form is None:
                agent = ""
                if self.settings.query == "auto":
                    agent = (await driver.get_server_info()).agent
                self._form = choose_form(self.settings.query, agent)
                log.debug("Neo4j %s (%s): the %s query form", self.settings.uri, agent, self._form)
            if index not in self._hidden:
                self._hidden[index] = await self._vector_property(driver, index)
            query = build_query(neighborhood, self._form, index)
            parameters = {
                "hidden": self._hidden[index],
                "top_k": top_k,
                "candidates": max(top_k, CANDIDATES),
                "vector": [float(x) for x in vector],
            }
            if self._form == "procedure":
                parameters["index"] = index
            result = await driver.execute_query(
                query,
                parameters_=parameters,
                database_=self.settings.database,
                routing_=neo4j.RoutingControl.READ,
            )
        except RetrievalError:
            raise
        except Exception as exc:  # noqa: BLE001 - the driver's errors have no common base worth naming
            raise RetrievalError(
                f"Neo4j at {self.settings.uri} (database {self.settings.database!r}, index {index!r}):"
                f" {describe_error(exc, index)}"
            ) from None
        return subgraph_from_records(result.records)

    async def _vector_property(self, driver: Any, index: str) -> str:
        """The node property ``index`` covers; "" when the index is not found (the
        retrieval query then fails with the server's message) or has several."""
        import neo4j

        try:
            result = await driver.execute_query(
                "SHOW INDEXES YIELD name, properties WHERE name = $index RETURN properties",
                parameters_={"index": index},
                database_=self.settings.database,
                routing_=neo4j.RoutingControl.READ,
            )
        except neo4j.exceptions.ClientError as exc:
            if exc.code != "Neo.ClientError.Security.Forbidden":
                raise
            # A user may read the graph without the right to list indexes: then the rows
            # carry the vectors too (slower, same text wherever a filter names the properties).
            return ""
        for record in result.records:
            properties = record.get("properties")
            if isinstance(properties, list) and len(properties) == 1:
                return str(properties[0])
        return ""

    async def aclose(self) -> None:
        if self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.close()
