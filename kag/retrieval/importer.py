"""``kag graph import``: CSV files in Neo4j admin-import style -> a Ladybug database or a
Neo4j database (`import_graph`, the target a path or Neo4j settings).

The steps, one module each: `kag.retrieval.graph_csv` reads and checks every file (the
format and its errors are described there), `kag.retrieval.node_embeddings` embeds one
property's text per node, `kag.retrieval.ladybug_writer` or `kag.retrieval.neo4j_writer`
writes the database. This module runs them in order and, for Ladybug, makes the result
atomic.

Every problem is an InputError naming the file, the line and the column, found before
the database is written. The database is built under a temporary name next to the
target and renamed into place when complete, so a failed import leaves nothing behind
and a reader never sees half a graph. Each node gets an embedding of one property's text
(``name`` by default) from an embedding model (the bundled MiniLM by default), stored
as float32 bytes; nodes without that property get none (they can be reached, never
seeds). See `kag.retrieval.ladybug_backend` for the schema.

The embedding model is passed in (an `Embedder`): choosing it from the configuration's
providers is the caller's job (`kag.generation.graph_import`), so retrieval never imports
generation.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kag import __version__
from kag.embedding import Embedder
from kag.errors import UsageError
from kag.retrieval.graph_csv import GraphData, load_graph
from kag.retrieval.ladybug_backend import DEFAULT_INDEX, FORMAT
from kag.retrieval.ladybug_writer import import_ladybug, write_database
from kag.retrieval.neo4j_backend import Neo4jSettings
from kag.retrieval.node_embeddings import embed_nodes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportReport:
    path: str
    nodes: int
    relationships: int
    relationship_types: int
    embedded: int
    dimension: int
    model: str
    read_seconds: float
    embed_seconds: float
    write_seconds: float


def _remove_database(path: Path) -> None:
    for candidate in (path, Path(f"{path}.wal"), Path(f"{path}.shadow")):
        if candidate.is_dir():
            raise UsageError(f"{candidate}: is a directory, not a Ladybug database file; remove it yourself")
        candidate.unlink(missing_ok=True)


def import_graph(
    target: str | Path | Neo4jSettings,
    node_files: Sequence[str],
    rel_files: Sequence[str],
    embedder: Embedder,
    embed_property: str = "name",
    index: str = DEFAULT_INDEX,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    """Build the graph of the CSV files (see the module docstring) with an embedding of each
    node's ``embed_property`` under ``index``: in the Ladybug database file ``target`` (a
    path; an existing one is an error unless ``replace``), or in the Neo4j database of
    ``target``'s settings, with a vector index ``index`` over the embeddings (see
    `kag.retrieval.neo4j_writer`; a database holding nodes is an error unless ``replace``).
    The target is checked before the files are read and embedded. Raises InputError (bad
    files), UsageError (bad choices) or GraphWriteError (the Neo4j server refused)."""
    if isinstance(target, Neo4jSettings):
        where, write = _neo4j(target, index, replace, progress)
    else:
        where, write = _ladybug(Path(target), embedder, embed_property, index, replace, progress)
    began = time.perf_counter()
    data = load_graph(node_files, rel_files, reserved=(index,))
    read_seconds = time.perf_counter() - began
    began = time.perf_counter()
    blobs, dimension = embed_nodes(
        data.nodes,
        embedder,
        embed_property,
        (lambda d, t: progress("embeddings", d, t)) if progress else None,
    )
    embed_seconds = time.perf_counter() - began
    embedded = sum(blob is not None for blob in blobs)
    if embedded < len(data.nodes):
        log.warning(
            "%d of %d node(s) have no %r property: they get no embedding (reachable, never seeds)",
            len(data.nodes) - embedded,
            len(data.nodes),
            embed_property,
        )
    began = time.perf_counter()
    write(data, list(blobs), dimension)
    return ImportReport(
        path=where,
        nodes=len(data.nodes),
        relationships=sum(len(rows) for rows in data.relationships.values()),
        relationship_types=len(data.relationships),
        embedded=embedded,
        dimension=dimension,
        model=embedder.name,
        read_seconds=read_seconds,
        embed_seconds=embed_seconds,
        write_seconds=time.perf_counter() - began,
    )


#: Writes the read graph (its data, one embedding blob per node, their dimension).
_Write = Callable[[GraphData, list[bytes | None], int], None]


def _ladybug(
    target: Path,
    embedder: Embedder,
    embed_property: str,
    index: str,
    replace: bool,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[str, _Write]:
    """Check the Ladybug target; return its name and the writer that builds the database
    under a temporary name and renames it into place (atomic)."""
    if not index.strip() or "`" in index:
        raise UsageError(f"invalid embedding property name {index!r}")
    if target.is_dir():
        raise UsageError(f"{target}: is a directory, not a Ladybug database file")
    if target.exists() and not replace:
        raise UsageError(f"{target}: already exists (use --replace to rebuild it)")
    if not target.parent.is_dir():
        raise UsageError(f"{target.parent}: no such directory")
    import_ladybug()  # before minutes of embedding, not after

    def write(data: GraphData, blobs: list[bytes | None], dimension: int) -> None:
        meta = {
            "format": FORMAT,
            "kag_version": __version__,
            "embeddings": json.dumps(
                {index: {"model": embedder.name, "dimension": dimension, "property": embed_property}},
                sort_keys=True,
            ),
        }
        staging = target.with_name(f".{target.name}.importing-{os.getpid()}")
        _remove_database(staging)
        try:
            write_database(staging, data, blobs, index, meta, progress)
            for leftover in (Path(f"{target}.wal"), Path(f"{target}.shadow")):
                leftover.unlink(missing_ok=True)  # the old database's, if it had any
            os.replace(staging, target)  # atomic: readers see the old graph or the new one
            wal = Path(f"{staging}.wal")
            if wal.exists():  # not checkpointed at close: it belongs with the file
                os.replace(wal, Path(f"{target}.wal"))
        except BaseException:
            _remove_database(staging)
            raise

    return str(target), write


def _neo4j(
    settings: Neo4jSettings,
    index: str,
    replace: bool,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[str, _Write]:
    """Check the Neo4j target (reachable, empty unless ``replace``); return its name and
    the writer that loads the graph and creates the vector index."""
    from kag.retrieval.neo4j_writer import check_neo4j, where, write_neo4j

    if not index.strip():
        raise UsageError(f"invalid embedding property name {index!r}")
    check_neo4j(settings, replace)  # before minutes of embedding, not after

    def write(data: GraphData, blobs: list[bytes | None], _dimension: int) -> None:
        write_neo4j(settings, data, blobs, index, replace, progress)

    return where(settings), write
