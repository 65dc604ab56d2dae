"""``kag graph import``: CSV files in Neo4j admin-import style -> a Ladybug database
(`import_graph`) or a Neo4j database (`import_graph_neo4j`).

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
    path: str | Path,
    node_files: Sequence[str],
    rel_files: Sequence[str],
    embedder: Embedder,
    embed_property: str = "name",
    index: str = DEFAULT_INDEX,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    """Build the Ladybug database at ``path`` from the CSV files (see the module
    docstring). An existing database is an error unless ``replace``. Raises InputError
    (bad files) or UsageError (bad choices)."""
    target = Path(path)
    if not index.strip() or "`" in index:
        raise UsageError(f"invalid embedding property name {index!r}")
    if target.is_dir():
        raise UsageError(f"{target}: is a directory, not a Ladybug database file")
    if target.exists() and not replace:
        raise UsageError(f"{target}: already exists (use --replace to rebuild it)")
    if not target.parent.is_dir():
        raise UsageError(f"{target.parent}: no such directory")
    import_ladybug()  # before minutes of embedding, not after
    data, blobs, dimension, read_seconds, embed_seconds = _read_and_embed(
        node_files, rel_files, embedder, embed_property, index, progress
    )
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
    began = time.perf_counter()
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
    return _report(str(target), data, blobs, dimension, embedder, read_seconds, embed_seconds, began)


def import_graph_neo4j(
    settings: Neo4jSettings,
    node_files: Sequence[str],
    rel_files: Sequence[str],
    embedder: Embedder,
    embed_property: str = "name",
    index: str = DEFAULT_INDEX,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    """Load the CSV files into the Neo4j database of ``settings`` with a vector index
    ``index`` over the embeddings (see `kag.retrieval.neo4j_writer`). A database holding
    nodes is an error unless ``replace``. Raises InputError (bad files), UsageError (bad
    choices) or GraphWriteError (the server refused)."""
    from kag.retrieval.neo4j_writer import check_neo4j, where, write_neo4j

    if not index.strip():
        raise UsageError(f"invalid embedding property name {index!r}")
    check_neo4j(settings, replace)  # before minutes of embedding, not after
    data, blobs, dimension, read_seconds, embed_seconds = _read_and_embed(
        node_files, rel_files, embedder, embed_property, index, progress
    )
    began = time.perf_counter()
    write_neo4j(settings, data, blobs, index, replace, progress)
    return _report(where(settings), data, blobs, dimension, embedder, read_seconds, embed_seconds, began)


def _read_and_embed(
    node_files: Sequence[str],
    rel_files: Sequence[str],
    embedder: Embedder,
    embed_property: str,
    index: str,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[GraphData, list[bytes | None], int, float, float]:
    """Read and check the files, then embed the nodes: the data, one blob per node,
    the dimension, and the seconds each step took."""
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
    return data, list(blobs), dimension, read_seconds, embed_seconds


def _report(
    path: str,
    data: GraphData,
    blobs: Sequence[bytes | None],
    dimension: int,
    embedder: Embedder,
    read_seconds: float,
    embed_seconds: float,
    write_began: float,
) -> ImportReport:
    return ImportReport(
        path=path,
        nodes=len(data.nodes),
        relationships=sum(len(rows) for rows in data.relationships.values()),
        relationship_types=len(data.relationships),
        embedded=sum(blob is not None for blob in blobs),
        dimension=dimension,
        model=embedder.name,
        read_seconds=read_seconds,
        embed_seconds=embed_seconds,
        write_seconds=time.perf_counter() - write_began,
    )
