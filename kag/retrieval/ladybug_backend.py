"""LadybugDB (PyPI ``ladybug``, pinned 0.22.0): an embedded graph database, no server.

The database is one file built by ``kag graph import`` (`kag.retrieval.importer`) with
this schema:

- node table ``Node``: ``id STRING`` (primary key, what the translations print),
  ``_labels STRING[]`` (the Neo4j-style labels), one column per node property, and one
  ``BLOB`` column per embedding (float32, little-endian; ``embedding`` by default);
- one relationship table per relationship type (``FROM Node TO Node``, one column per
  property); the table name is the type when the type is a plain identifier, else
  ``Rel<n>``;
- ``KagMeta(key, value)``: the format version, the embedding columns (model, dimension)
  and the table -> type map.

Retrieval runs as three steps behind one lock, off the event loop (``asyncio.to_thread``):

1. seeds: exact cosine top-k in numpy over the embedding matrix, loaded once per run
   (each seed's cosine similarity is its score)
   (0.22.0's vector index is an extension downloaded at run time, which fails offline;
   measured, numpy over 50,000 x 384 beats ``array_cosine_similarity`` in Cypher, and
   ``ORDER BY ... LIMIT k`` followed by ``WITH collect(...)`` returns wrong rows in
   0.19.1-0.22.0, so that query shape is never used);
2. expansion: one query per hop from the frontier (``WHERE offset(id(a)) IN $offsets``,
   the nodes' row offsets, loaded with their keys once per run); then the reached
   nodes' labels and properties, looked up by primary key;
3. every relationship from a reached node, kept when it ends at a reached node.

One read-only connection serves the run, used from worker threads behind a lock: the
simplest safe use of one connection (a retrieval takes milliseconds next to a model
call, so tasks queueing for it cost little). Read-only, so other processes (another run,
the Ladybug shell) can read the same file at the same time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kag.install import missing_extra
from kag.retrieval.base import RetrievalError
from kag.retrieval.subgraph import Node, Relationship, Subgraph

log = logging.getLogger(__name__)

NODE_TABLE = "Node"
KEY_COLUMN = "id"
LABELS_COLUMN = "_labels"
META_TABLE = "KagMeta"
FORMAT = "kag-graph/1"
DEFAULT_INDEX = "embedding"


def quote(identifier: str) -> str:
    """A Cypher identifier in backticks (names with a backtick are refused at import)."""
    if "`" in identifier:
        raise ValueError(f"identifier {identifier!r} contains a backtick")
    return f"`{identifier}`"


@dataclass(frozen=True)
class LadybugSettings:
    """``[databases.<name>] type = "Ladybug"``; ``path`` relative to the working directory."""

    name: str
    path: str


@dataclass(frozen=True)
class VectorIndex:
    """Embeddings of one column: ``keys[i]`` is the node of row ``i`` of ``matrix``
    (rows L2-normalized; keys sorted, so ties in similarity go to the smaller key)."""

    column: str
    keys: tuple[str, ...]
    matrix: npt.NDArray[np.float32]

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 else 0

    def top_k(self, vector: Sequence[float], k: int) -> list[str]:
        """The keys of :meth:`scored_top_k`."""
        return [key for key, _ in self.scored_top_k(vector, k)]

    def scored_top_k(self, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """The ``k`` nodes most similar to ``vector`` by cosine, best first, with their
        cosine similarity (in [-1, 1]); ties by key.

        Exact (every row is scored). ``k`` past the number of rows gives every row. A
        zero query vector scores every row 0 (so the first ``k`` keys). Raises
        RetrievalError when the vector's size is not the index's.
        """
        n = len(self.keys)
        if n == 0 or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or query.shape[0] != self.dimension:
            raise RetrievalError(
                f"the query embedding has {query.shape[0] if query.ndim == 1 else query.shape} dimensions but"
                f" the '{self.column}' embeddings have {self.dimension} (was the database built with another model?)"
            )
        if not np.all(np.isfinite(query)):
            raise RetrievalError("the query embedding holds NaN or infinite values")
        norm = float(np.linalg.norm(query))
        scores = self.matrix @ (query / norm if norm > 0 else query)
        if k >= n:
            candidates = np.arange(n)
        else:
            # Everything tied with the k-th best competes, so the cut is decided by key.
            threshold = np.partition(scores, n - k)[n - k]
            candidates = np.flatnonzero(scores >= threshold)
        order = sorted(candidates.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(self.keys[i], float(scores[i])) for i in order[:k]]


def _normalized(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0.0, 1.0, norms)).astype(np.float32, copy=False)


class LadybugGraph:
    """A read-only connection to a kag graph database, opened on first use."""

    backend = "ladybug"

    def __init__(self, settings: LadybugSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._db: Any = None
        self._conn: Any = None
        self._columns: dict[str, str] = {}
        self._meta: dict[str, str] = {}
        self._rel_types: dict[str, str] = {}
        self._indexes: dict[str, VectorIndex] = {}
        self._offset_of: dict[str, int] = {}
        self._key_of: dict[int, str] = {}
        self._rel_columns: list[str] = []

    # -- opening

    def _open(self) -> Any:
        if self._conn is not None:
            return self._conn
        path = Path(self.settings.path)
        if not path.exists():
            raise RetrievalError(f"{path}: no such Ladybug database (build it with `kag graph import`)")
        try:
            import ladybug
        except ImportError:
            raise RetrievalError(missing_extra("ladybug", "graph")) from None
        try:
            self._db = ladybug.Database(str(path), read_only=True)
            self._conn = ladybug.Connection(self._db)
            tables = {row[1]: row[2] for row in self._conn.execute("CALL show_tables() RETURN *").get_all()}
            if NODE_TABLE not in tables:
                raise RetrievalError(
                    f"{path}: not a kag graph database (no '{NODE_TABLE}' table); build it with `kag graph import`"
                )
            self._columns = {
                row[1]: row[2]
                for row in self._conn.execute(f"CALL table_info('{NODE_TABLE}') RETURN *").get_all()
            }
            if META_TABLE in tables:
                rows = self._conn.execute(f"MATCH (m:{META_TABLE}) RETURN m.key, m.value").get_all()
                self._meta = {k: v for k, v in rows}
            self._rel_types = json.loads(self._meta.get("relationship_types", "{}"))
            rel_columns: dict[str, None] = {}
            for table, kind in tables.items():
                if kind == "REL":
                    for row in self._conn.execute(f"CALL table_info('{table}') RETURN *").get_all():
                        rel_columns[row[1]] = None
            self._rel_columns = list(rel_columns)
        except RetrievalError:
            self._close()
            raise
        except RuntimeError as exc:  # the engine's one exception type
            self._close()
            raise RetrievalError(f"{path}: cannot open the Ladybug database: {_first_line(exc)}") from None
        return self._conn

    def _embedding_columns(self) -> set[str]:
        return set(json.loads(self._meta.get("embeddings", "{}")))

    def _property_columns(self, index: str) -> list[str]:
        hidden = {KEY_COLUMN, LABELS_COLUMN, index} | self._embedding_columns()
        return [name for name in self._columns if name not in hidden]

    def _index(self, column: str) -> VectorIndex:
        if column in self._indexes:
            return self._indexes[column]
        if column not in self._columns:
            raise RetrievalError(
                f"{self.settings.path}: index '{column}' is not a node property of this database"
                f" (properties: {', '.join(sorted(self._columns)) or 'none'})"
            )
        kind = self._columns[column].upper()
        rows = self._conn.execute(
            f"MATCH (n:{NODE_TABLE}) WHERE n.{quote(column)} IS NOT NULL RETURN n.{KEY_COLUMN}, n.{quote(column)}"
        ).get_all()
        rows.sort(key=lambda row: row[0])
        keys = tuple(row[0] for row in rows)
        if kind == "BLOB":
            sizes = {len(row[1]) for row in rows}
            if len(sizes) > 1 or any(size % 4 for size in sizes):
                raise RetrievalError(
                    f"{self.settings.path}: index '{column}' holds embeddings of different sizes"
                )
            size = sizes.pop() // 4 if sizes else 0
            matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), size)
        elif re.fullmatch(r"(FLOAT|DOUBLE)\[\d*\]", kind):
            try:
                matrix = np.asarray([row[1] for row in rows], dtype=np.float32).reshape(len(rows), -1)
            except ValueError:
                raise RetrievalError(
                    f"{self.settings.path}: index '{column}' holds embeddings of different sizes"
                ) from None
        else:
            raise RetrievalError(
                f"{self.settings.path}: index '{column}' is a {kind} property, not an embedding (BLOB or FLOAT[])"
            )
        index = VectorIndex(column, keys, _normalized(matrix.astype(np.float32)))
        log.debug(
            "loaded %d embeddings of %d dimensions from %s", len(keys), index.dimension, self.settings.path
        )
        self._indexes[column] = index
        return index

    # -- retrieval

    def _offsets(self) -> dict[str, int]:
        """Node key -> the engine's row offset in the node table, loaded once per run.

        Queries filter on ``offset(id(n)) IN $offsets``: integer comparisons, several
        times faster than ``n.id IN $ids`` on strings, which the engine evaluates as a
        list scan for every row of the table (measured on 50,000 nodes: 28 ms against
        157 ms for 191 nodes' relationships)."""
        if not self._offset_of:
            rows = self._conn.execute(
                f"MATCH (n:{NODE_TABLE}) RETURN n.{KEY_COLUMN}, offset(id(n))"
            ).get_all()
            self._offset_of = {key: offset for key, offset in rows}
            self._key_of = {offset: key for key, offset in rows}
        return self._offset_of

    def _expand(self, seeds: list[str], neighborhood: int) -> list[int]:
        """Offsets of every node within ``neighborhood`` hops of a seed (either direction),
        seeds first: one query per hop, from the frontier."""
        offset_of = self._offsets()
        frontier = [offset_of[key] for key in seeds]
        reached = dict.fromkeys(frontier)
        for _ in range(neighborhood):
            if not frontier:
                break
            rows = self._conn.execute(
                f"MATCH (a:{NODE_TABLE})-[]-(b:{NODE_TABLE}) WHERE offset(id(a)) IN $offsets RETURN DISTINCT offset(id(b))",
                {"offsets": frontier},
            ).get_all()
            frontier = [row[0] for row in rows if row[0] not in reached]
            reached.update(dict.fromkeys(frontier))
        return list(reached)

    def _nodes(self, offsets: list[int], index: str) -> dict[str, Node]:
        """The reached nodes' labels and properties, looked up by primary key."""
        columns = self._property_columns(index)
        projection = ", ".join(
            [f"n.{KEY_COLUMN}", f"n.{quote(LABELS_COLUMN)}" if LABELS_COLUMN in self._columns else "NULL"]
            + [f"n.{quote(c)}" for c in columns]
        )
        rows = self._conn.execute(
            f"UNWIND $ids AS k MATCH (n:{NODE_TABLE}) WHERE n.{KEY_COLUMN} = k RETURN {projection}",
            {"ids": [self._key_of[offset] for offset in offsets]},
        ).get_all()
        nodes = {}
        for row in rows:
            properties = {
                name: value for name, value in zip(columns, row[2:], strict=True) if value is not None
            }
            nodes[row[0]] = Node(key=row[0], labels=frozenset(row[1] or ()), properties=properties)
        return nodes

    def _relationships(self, offsets: list[int]) -> list[Relationship]:
        """Every relationship from a reached node to a reached node."""
        # Properties are projected one by one: returning `r` whole costs twice as much.
        columns = self._rel_columns
        projection = "".join(f", r.{quote(c)}" for c in columns)
        rows = self._conn.execute(
            f"MATCH (a:{NODE_TABLE})-[r]->(b:{NODE_TABLE}) WHERE offset(id(a)) IN $offsets"
            f" RETURN offset(id(a)), offset(id(b)), label(r), offset(id(r)){projection}",
            {"offsets": offsets},
        ).get_all()
        reached = set(offsets)
        relationships = []
        for start, end, table, rel_offset, *values in rows:
            if end not in reached:
                continue
            relationships.append(
                Relationship(
                    key=f"{table}:{rel_offset}",
                    type=self._rel_types.get(table, table),
                    start=self._key_of[start],
                    end=self._key_of[end],
                    properties={
                        name: value for name, value in zip(columns, values, strict=True) if value is not None
                    },
                )
            )
        return relationships

    def fetch_sync(self, vector: Sequence[float], top_k: int, neighborhood: int, index: str) -> Subgraph:
        """The subgraph around the ``top_k`` nodes nearest to ``vector`` (see the module
        docstring). Raises RetrievalError."""
        with self._lock:
            self._open()
            try:
                scored = self._index(index).scored_top_k(vector, top_k)
                if not scored:
                    return Subgraph()
                seeds = [key for key, _ in scored]
                offsets = self._expand(seeds, neighborhood)
                nodes = self._nodes(offsets, index)
                relationships = self._relationships(offsets)
            except RetrievalError:
                raise
            except RuntimeError as exc:  # the engine's one exception type
                raise RetrievalError(f"{self.settings.path}: query failed: {_first_line(exc)}") from None
        return Subgraph(
            seeds=tuple(seeds),
            nodes=nodes,
            relationships=tuple(relationships),
            seed_scores=tuple(score for _, score in scored),
        )

    async def fetch(self, vector: Sequence[float], top_k: int, neighborhood: int, index: str) -> Subgraph:
        return await asyncio.to_thread(self.fetch_sync, vector, top_k, neighborhood, index)

    def _close(self) -> None:
        conn, db = self._conn, self._db
        self._conn = self._db = None
        self._indexes.clear()
        self._offset_of, self._key_of = {}, {}
        for handle in (conn, db):
            if handle is not None:
                try:
                    handle.close()
                except Exception as exc:  # noqa: BLE001 - closing must not hide the run's outcome
                    log.debug("closing %s failed: %s", self.settings.path, exc)

    def close(self) -> None:
        with self._lock:
            self._close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
