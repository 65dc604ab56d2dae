"""``kag graph import``: CSV files in Neo4j admin-import style -> a Ladybug database.

Node files have a header naming ``<name>:ID`` (or ``:ID``; the node's key), optionally
``:LABEL`` (labels separated by ``;``) and property columns ``<name>`` or
``<name>:<type>``. Relationship files name ``:START_ID``, ``:END_ID``, ``:TYPE`` and
property columns. Types: ``string`` (default), ``char``, ``int``, ``long``, ``short``,
``byte`` (64-bit integers), ``float``, ``double`` (64-bit floats), ``boolean``
(``true``/``false``), each also as an array (``int[]``: values separated by ``;``).
Temporal and spatial types are kept as their text. ``:IGNORE`` columns are skipped. An
empty field is an absent property. ID groups (``:ID(Group)``) are accepted, but keys must
be unique across all node files.

Every problem is an InputError naming the file, the line and the column, found before
the database is written. The database is built under a temporary name next to the
target and renamed into place when complete, so a failed import leaves nothing behind
and a reader never sees half a graph. Nodes are written in batches of ``CREATE``;
relationship types with scalar properties only are loaded with ``COPY FROM`` a temporary
CSV file (about ten times faster), the others in batches of ``CREATE``. Each node gets an embedding of one property's text
(``name`` by default) from an embedding model (the bundled MiniLM by default), stored
as float32 bytes; nodes without that property get none (they can be reached, never
seeds). See `kag.retrieval.ladybug_backend` for the schema.
"""

from __future__ import annotations

import asyncio
import csv
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from kag import __version__
from kag.errors import InputError, KagError, UsageError
from kag.retrieval.ladybug_backend import (
    DEFAULT_INDEX,
    FORMAT,
    KEY_COLUMN,
    LABELS_COLUMN,
    META_TABLE,
    NODE_TABLE,
    quote,
)

log = logging.getLogger(__name__)

ARRAY_DELIMITER = ";"
NODE_BATCH = 2000
REL_BATCH = 2000
EMBED_BATCH = 512
SCALAR_TYPES = {
    "string": "string",
    "char": "string",
    "int": "int",
    "long": "int",
    "short": "int",
    "byte": "int",
    "float": "float",
    "double": "float",
    "boolean": "boolean",
}
TEXT_TYPES = {"date", "localtime", "time", "localdatetime", "datetime", "duration", "point"}
ENGINE_TYPES = {"string": "STRING", "int": "INT64", "float": "DOUBLE", "boolean": "BOOLEAN"}
_FIELD = re.compile(r"^(?P<kind>[A-Za-z_]+)(?:\((?P<group>[^)]*)\))?(?P<array>\[\])?(?:\{.*\})?$")
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# Names the engine gives relationship internals, and its own node-table name rules.
_REL_RESERVED = {"_src", "_dst", "_label", "_id"}


class GraphWriteError(KagError):
    """The database engine failed while the graph was written."""


class Embedder(Protocol):
    """What the import needs from an embedding model (`kag.embedding.Embedder` fits)."""

    name: str

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


# ---------------------------------------------------------------- headers


@dataclass(frozen=True)
class Column:
    """One header field: ``role`` is id, label, start, end, type, ignore or property."""

    index: int
    name: str
    role: str
    kind: str = "string"
    array: bool = False

    @property
    def engine_type(self) -> str:
        base = ENGINE_TYPES[self.kind]
        return f"{base}[]" if self.array else base


def _column(index: int, text: str, where: str) -> Column:
    name, sep, suffix = text.strip().rpartition(":")
    if not sep:
        name, suffix = text.strip(), ""
    if not suffix:
        if not name:
            raise InputError(f"{where}: empty header field")
        return Column(index, name, "property")
    match = _FIELD.match(suffix)
    if not match:
        raise InputError(f"{where}: header field {text!r}: cannot read the type {suffix!r}")
    kind = match["kind"].lower()
    roles = {
        "id": "id",
        "label": "label",
        "start_id": "start",
        "end_id": "end",
        "type": "type",
        "ignore": "ignore",
    }
    if kind in roles:
        return Column(index, name, roles[kind])
    if kind in TEXT_TYPES:
        log.warning("%s: column %r: type %s is stored as text", where, name, kind)
        return Column(index, name, "property", "string", bool(match["array"]))
    if kind not in SCALAR_TYPES:
        raise InputError(
            f"{where}: header field {text!r}: unknown type {match['kind']!r}"
            f" (expected one of {', '.join(sorted(SCALAR_TYPES))}, optionally with [])"
        )
    if not name:
        raise InputError(f"{where}: header field {text!r}: a property column needs a name")
    return Column(index, name, "property", SCALAR_TYPES[kind], bool(match["array"]))


@dataclass(frozen=True)
class Header:
    path: str
    columns: tuple[Column, ...]

    def role(self, role: str) -> list[Column]:
        return [c for c in self.columns if c.role == role]

    @property
    def properties(self) -> list[Column]:
        return self.role("property")


def _header(path: str, fields: list[str], kind: str) -> Header:
    where = f"{path}: line 1"
    columns = tuple(_column(i, text, where) for i, text in enumerate(fields))
    header = Header(path, columns)
    roles = [c.role for c in columns]
    if kind == "nodes":
        if roles.count("id") != 1:
            raise InputError(
                f"{where}: a node file needs exactly one ID column (like 'id:ID'), found {roles.count('id')}"
            )
        for bad in ("start", "end", "type"):
            if bad in roles:
                raise InputError(f"{where}: a node file has no :START_ID, :END_ID or :TYPE column")
    else:
        for needed, text in (("start", ":START_ID"), ("end", ":END_ID"), ("type", ":TYPE")):
            if roles.count(needed) != 1:
                raise InputError(f"{where}: a relationship file needs exactly one {text} column")
        for bad in ("id", "label"):
            if bad in roles:
                raise InputError(f"{where}: a relationship file has no :ID or :LABEL column")
    names: dict[str, str] = {}
    stored = [*header.properties, *(c for c in header.role("id") if c.name)]
    for column in stored:
        lower = column.name.lower()
        if lower in names:
            raise InputError(f"{where}: columns {names[lower]!r} and {column.name!r} name the same property")
        names[lower] = column.name
        if "`" in column.name:
            raise InputError(f"{where}: column {column.name!r}: a property name cannot contain a backtick")
    return header


# ---------------------------------------------------------------- values


def _scalar(text: str, kind: str) -> Any:
    if kind == "string":
        return text
    stripped = text.strip()
    if kind == "int":
        return int(stripped)
    if kind == "float":
        number = float(stripped)
        if not math.isfinite(number):
            raise ValueError(f"{text!r} is not a finite number")
        return number
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"{text!r} is not true or false")


def _value(text: str, column: Column) -> Any:
    if column.array:
        return [_scalar(part, column.kind) for part in text.split(ARRAY_DELIMITER)]
    return _scalar(text, column.kind)


@dataclass
class NodeRow:
    key: str
    labels: list[str]
    properties: dict[str, Any]
    where: str


@dataclass
class RelRow:
    start: str
    end: str
    type: str
    properties: dict[str, Any]
    where: str


def _open_csv(path: str) -> Iterator[tuple[int, list[str]]]:
    try:
        handle = open(path, newline="", encoding="utf-8-sig")  # noqa: SIM115
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        reader = csv.reader(handle, strict=True)
        try:
            for fields in reader:
                yield reader.line_num, fields
        except csv.Error as exc:
            raise InputError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _read(path: str, kind: str) -> tuple[Header, Iterator[tuple[str, list[str]]]]:
    """The header of a file and an iterator over its data rows (with their location)."""
    lines = _open_csv(path)
    first = next(lines, None)
    if first is None:
        raise InputError(f"{path}: empty file (expected a header line)")
    header = _header(path, first[1], kind)

    def rows() -> Iterator[tuple[str, list[str]]]:
        width = len(header.columns)
        for line, fields in lines:
            if not fields or fields == [""]:
                continue
            where = f"{path}: line {line}"
            if len(fields) != width:
                raise InputError(f"{where}: {len(fields)} field(s), the header has {width}")
            yield where, fields

    return header, rows()


def _properties(header: Header, fields: list[str], where: str) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for column in header.properties:
        text = fields[column.index]
        if text == "":
            continue
        try:
            properties[column.name] = _value(text, column)
        except ValueError:
            raise InputError(
                f"{where}: column {column.name!r}: {text!r} is not a{'n' if column.kind == 'int' else ''}"
                f" {column.kind}{' array' if column.array else ''}"
            ) from None
    return properties


def read_nodes(path: str) -> tuple[Header, list[NodeRow]]:
    """The rows of one node file; raises InputError naming the file, line and column."""
    header, lines = _read(path, "nodes")
    id_column = header.role("id")[0]
    rows: list[NodeRow] = []
    for where, fields in lines:
        key = fields[id_column.index].strip()
        if not key:
            raise InputError(f"{where}: empty node ID")
        labels: list[str] = []
        for column in header.role("label"):
            labels.extend(
                part.strip() for part in fields[column.index].split(ARRAY_DELIMITER) if part.strip()
            )
        properties = _properties(header, fields, where)
        if id_column.name and id_column.name != KEY_COLUMN:
            properties[id_column.name] = key
        rows.append(NodeRow(key, list(dict.fromkeys(labels)), properties, where))
    return header, rows


def read_relationships(path: str) -> tuple[Header, list[RelRow]]:
    """The rows of one relationship file; raises InputError naming the file, line and column."""
    header, lines = _read(path, "relationships")
    rows: list[RelRow] = []
    for where, fields in lines:
        start = fields[header.role("start")[0].index].strip()
        end = fields[header.role("end")[0].index].strip()
        rel_type = fields[header.role("type")[0].index].strip()
        if not start or not end:
            raise InputError(f"{where}: empty :START_ID or :END_ID")
        if not rel_type:
            raise InputError(f"{where}: empty :TYPE")
        if "`" in rel_type:
            raise InputError(f"{where}: relationship type {rel_type!r} contains a backtick")
        rows.append(RelRow(start, end, rel_type, _properties(header, fields, where), where))
    return header, rows


# ---------------------------------------------------------------- the graph in memory


@dataclass
class GraphData:
    """What the CSV files hold, checked: node properties and relationship tables typed."""

    nodes: list[NodeRow] = field(default_factory=list)
    node_columns: dict[str, Column] = field(default_factory=dict)
    relationships: dict[str, list[RelRow]] = field(default_factory=dict)
    rel_columns: dict[str, dict[str, Column]] = field(default_factory=dict)


def _merge_columns(into: dict[str, Column], columns: list[Column], path: str, what: str) -> None:
    for column in columns:
        known = into.get(column.name)
        if known is None:
            lower = {name.lower(): name for name in into}
            if column.name.lower() in lower:
                raise InputError(
                    f"{path}: line 1: {what} property {column.name!r} differs only in case from"
                    f" {lower[column.name.lower()]!r} (the database's names ignore case)"
                )
            into[column.name] = column
        elif (known.kind, known.array) != (column.kind, column.array):
            raise InputError(
                f"{path}: line 1: {what} property {column.name!r} is {column.engine_type} here"
                f" but {known.engine_type} in an earlier file"
            )


def load_graph(
    node_files: Sequence[str], rel_files: Sequence[str], reserved: Sequence[str] = ()
) -> GraphData:
    """Read and check every file: unique node keys, known relationship ends, consistent
    property types. ``reserved``: node property names the database keeps for itself."""
    data = GraphData()
    origin: dict[str, str] = {}
    taken = {KEY_COLUMN.lower(), LABELS_COLUMN.lower(), *(name.lower() for name in reserved)}
    for path in node_files:
        header, rows = read_nodes(path)
        columns = list(header.properties)
        id_column = header.role("id")[0]
        if id_column.name and id_column.name != KEY_COLUMN:
            columns.append(Column(id_column.index, id_column.name, "property"))
        for column in columns:
            if column.name.lower() in taken:
                raise InputError(
                    f"{path}: line 1: property name {column.name!r} is reserved"
                    f" ({', '.join(sorted(taken))} are kept for the key, the labels and the embedding)"
                )
        _merge_columns(data.node_columns, columns, path, "node")
        for row in rows:
            if row.key in origin:
                raise InputError(f"{row.where}: node ID {row.key!r} already defined at {origin[row.key]}")
            origin[row.key] = row.where
            data.nodes.append(row)
    for path in rel_files:
        header, rel_rows = read_relationships(path)
        for column in header.properties:
            if column.name.lower() in _REL_RESERVED:
                raise InputError(f"{path}: line 1: relationship property name {column.name!r} is reserved")
        for rel in rel_rows:
            for end in (rel.start, rel.end):
                if end not in origin:
                    raise InputError(
                        f"{rel.where}: relationship refers to node ID {end!r}, which no node file defines"
                    )
            if rel.type not in data.relationships:
                data.relationships[rel.type] = []
                data.rel_columns[rel.type] = {}
            data.relationships[rel.type].append(rel)
        for rel_type in {rel.type for rel in rel_rows}:
            _merge_columns(data.rel_columns[rel_type], header.properties, path, f"{rel_type!r} relationship")
    if not data.nodes:
        raise InputError(f"{', '.join(node_files)}: no node rows")
    return data


def table_names(types: Sequence[str]) -> dict[str, str]:
    """A relationship table per type: the type itself when it is a plain identifier not
    yet taken (names ignore case in the engine), else ``Rel<n>``."""
    taken = {NODE_TABLE.lower(), META_TABLE.lower()}
    tables: dict[str, str] = {}
    for number, rel_type in enumerate(sorted(types)):
        name = (
            rel_type if _PLAIN_NAME.fullmatch(rel_type) and rel_type.lower() not in taken else f"Rel{number}"
        )
        while name.lower() in taken:
            name = f"Rel{number}_{len(taken)}"
        taken.add(name.lower())
        tables[rel_type] = name
    return tables


# ---------------------------------------------------------------- embeddings


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def embed_nodes(
    nodes: Sequence[NodeRow],
    embedder: Embedder,
    prop: str,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[bytes | None], int]:
    """One float32 little-endian blob per node (None without ``prop``) and the dimension."""
    todo = [
        (i, _text(row.properties[prop]))
        for i, row in enumerate(nodes)
        if row.properties.get(prop) not in (None, "")
    ]
    if not todo:
        raise UsageError(f"no node has the property {prop!r} to embed (choose another with --embed-property)")
    blobs: list[bytes | None] = [None] * len(nodes)
    dimension = 0
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        vectors = np.asarray(embedder.embed([text for _, text in batch]), dtype="<f4")
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            raise InputError(
                f"embedding model {embedder.name}: expected {len(batch)} vectors, got shape {vectors.shape}"
            )
        if dimension and vectors.shape[1] != dimension:
            raise InputError(
                f"embedding model {embedder.name}: vectors changed size ({dimension} then {vectors.shape[1]})"
            )
        dimension = int(vectors.shape[1])
        if not np.all(np.isfinite(vectors)):
            raise InputError(f"embedding model {embedder.name}: returned NaN or infinite values")
        for (i, _), vector in zip(batch, vectors, strict=True):
            blobs[i] = vector.tobytes()
        if progress is not None:
            progress(min(start + EMBED_BATCH, len(todo)), len(todo))
    return blobs, dimension


# ---------------------------------------------------------------- writing


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


def write_database(
    path: str | Path,
    data: GraphData,
    blobs: Sequence[bytes | None],
    index: str,
    meta: dict[str, str],
    progress: Callable[[str, int, int], None] | None = None,
) -> None:
    """Write ``data`` into a new Ladybug database at ``path`` (which must not exist).
    Raises GraphWriteError when the engine refuses something."""
    try:
        import ladybug
    except ImportError:
        raise UsageError("the 'ladybug' package is not installed (pip install 'kag[graph]')") from None
    try:
        db = ladybug.Database(str(path))
        conn = ladybug.Connection(db)
    except RuntimeError as exc:
        raise GraphWriteError(f"{path}: cannot create the database: {_first_line(exc)}") from None
    try:
        columns = list(data.node_columns.values())
        definition = ", ".join(
            [f"{KEY_COLUMN} STRING", f"{quote(LABELS_COLUMN)} STRING[]"]
            + [f"{quote(c.name)} {c.engine_type}" for c in columns]
            + [f"{quote(index)} BLOB", f"PRIMARY KEY({KEY_COLUMN})"]
        )
        conn.execute(f"CREATE NODE TABLE {NODE_TABLE}({definition})")
        conn.execute(f"CREATE NODE TABLE {META_TABLE}(key STRING, value STRING, PRIMARY KEY(key))")
        # Every value is cast: the engine types a batch's field from its values, and a
        # batch where a property is always absent would otherwise be typed STRING.
        assignments = ", ".join(
            [
                f"{KEY_COLUMN}: r.k",
                f"{quote(LABELS_COLUMN)}: CAST(r.l AS STRING[])",
                f"{quote(index)}: CAST(r.e AS BLOB)",
            ]
            + [f"{quote(c.name)}: CAST(r.p{i} AS {c.engine_type})" for i, c in enumerate(columns)]
        )
        create = f"UNWIND $rows AS r CREATE (:{NODE_TABLE} {{{assignments}}})"
        total = len(data.nodes)
        for start in range(0, total, NODE_BATCH):
            batch = [
                {"k": row.key, "l": row.labels, "e": blobs[start + i]}
                | {f"p{j}": row.properties.get(c.name) for j, c in enumerate(columns)}
                for i, row in enumerate(data.nodes[start : start + NODE_BATCH])
            ]
            conn.execute(create, {"rows": batch})
            if progress is not None:
                progress("nodes", min(start + NODE_BATCH, total), total)
        tables = table_names(list(data.relationships))
        done, total = 0, sum(len(rows) for rows in data.relationships.values())
        for rel_type, rows in data.relationships.items():
            table = tables[rel_type]
            rel_columns = list(data.rel_columns[rel_type].values())
            definition = ", ".join(
                [f"FROM {NODE_TABLE} TO {NODE_TABLE}"]
                + [f"{quote(c.name)} {c.engine_type}" for c in rel_columns]
            )
            conn.execute(f"CREATE REL TABLE {quote(table)}({definition})")
            if _copy_safe(Path(path), rel_columns):
                _copy_relationships(conn, Path(path), table, rel_columns, rows)
            else:
                _insert_relationships(conn, table, rel_columns, rows)
            done += len(rows)
            if progress is not None:
                progress("relationships", done, total)
        meta = meta | {
            "relationship_types": json.dumps({table: t for t, table in tables.items()}, sort_keys=True)
        }
        conn.execute(
            f"UNWIND $rows AS r CREATE (:{META_TABLE} {{key: r.k, value: r.v}})",
            {"rows": [{"k": k, "v": v} for k, v in sorted(meta.items())]},
        )
    except RuntimeError as exc:  # the engine's one exception type
        raise GraphWriteError(f"{path}: the database engine failed: {_first_line(exc)}") from None
    finally:
        conn.close()
        db.close()


def _copy_safe(path: Path, columns: list[Column]) -> bool:
    """COPY FROM CSV is used when every property is a scalar (list literals in CSV would
    need the engine's own escaping) and the path can be written in a string literal."""
    return not any(c.array for c in columns) and not any(ch in str(path.parent) for ch in "\"'\\")


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _copy_relationships(conn: Any, path: Path, table: str, columns: list[Column], rows: list[RelRow]) -> None:
    """COPY FROM a temporary CSV file (one pass, about ten times faster than batched
    CREATE: 190,000 against 20,000 relationships/s measured on 0.22.0). PARALLEL=false
    lets quoted fields hold line breaks."""
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".csv", dir=path.parent)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out, lineterminator="\n")
            for row in rows:
                writer.writerow(
                    [row.start, row.end, *(_csv_value(row.properties.get(c.name)) for c in columns)]
                )
        conn.execute(f'COPY {quote(table)} FROM "{name}" (HEADER=false, PARALLEL=false)')
    finally:
        Path(name).unlink(missing_ok=True)


def _insert_relationships(conn: Any, table: str, columns: list[Column], rows: list[RelRow]) -> None:
    """Batched CREATE, for tables with list properties."""
    props = ", ".join(f"{quote(c.name)}: CAST(r.p{i} AS {c.engine_type})" for i, c in enumerate(columns))
    # Two MATCH clauses, each on the key: the engine looks both ends up by index.
    # `MATCH (a), (b) WHERE a.id = ... AND b.id = ...` is planned as a cross product
    # (measured on 0.22.0: 90 relationships/s against 7,000).
    create = (
        f"UNWIND $rows AS r MATCH (a:{NODE_TABLE}) WHERE a.{KEY_COLUMN} = r.s"
        f" MATCH (b:{NODE_TABLE}) WHERE b.{KEY_COLUMN} = r.t"
        f" CREATE (a)-[:{quote(table)}{' {' + props + '}' if props else ''}]->(b)"
    )
    for start in range(0, len(rows), REL_BATCH):
        batch = [
            {"s": row.start, "t": row.end}
            | {f"p{j}": row.properties.get(c.name) for j, c in enumerate(columns)}
            for row in rows[start : start + REL_BATCH]
        ]
        conn.execute(create, {"rows": batch})


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


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
    write_seconds = time.perf_counter() - began
    return ImportReport(
        path=str(target),
        nodes=len(data.nodes),
        relationships=sum(len(rows) for rows in data.relationships.values()),
        relationship_types=len(data.relationships),
        embedded=embedded,
        dimension=dimension,
        model=embedder.name,
        read_seconds=read_seconds,
        embed_seconds=embed_seconds,
        write_seconds=write_seconds,
    )


# ---------------------------------------------------------------- embedding through a provider


class EmbeddingFailed(KagError):
    """The embedding provider failed (after its retries) during an import."""


class ProviderEmbedder:
    """An Ollama or OpenAI-compatible provider of the configuration as an `Embedder`:
    each batch is one request through the runner's provider client, with its retries."""

    def __init__(self, provider: Any, model: str, timeout: float = 300.0) -> None:
        self.provider = provider
        self.model = model
        self.timeout = timeout
        self.name = f"{provider.type}:{model}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray(asyncio.run(self._embed(list(texts))), dtype=np.float32)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        from kag.generation.providers import open_provider
        from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries

        client = open_provider(self.provider, self.timeout, 1)
        try:
            vectors, _ = await call_with_retries(lambda: client.embed(self.model, texts), RetryPolicy())
        except ProviderError as exc:
            raise EmbeddingFailed(
                f"embedding provider {self.provider.name!r} (model {self.model!r}): {exc}"
            ) from None
        finally:
            await client.aclose()
        return vectors


def choose_embedder(config: Any, provider: str | None, model: str | None) -> Embedder:
    """The embedding model for an import: without ``provider``, FastEmbed with ``model``
    (default: the bundled MiniLM); with one, that provider of the configuration
    (FastEmbed: its ``model`` unless ``model`` is given; Ollama/OpenAI: ``model`` required)."""
    from kag.embedding import load_embedder
    from kag.generation.config import FastEmbedProvider

    if provider is None:
        return load_embedder(model)
    if provider not in config.providers:
        known = ", ".join(sorted(config.providers)) or "none"
        raise UsageError(f"--provider {provider!r}: not defined in {config.path} (providers: {known})")
    chosen = config.providers[provider]
    if isinstance(chosen, FastEmbedProvider):
        return load_embedder(model or chosen.model)
    if not model:
        raise UsageError(
            f"--provider {provider!r} is an {chosen.type} provider: give the embedding model with --model"
        )
    return ProviderEmbedder(chosen, model)


def import_from_config(
    config_path: str | Path,
    database: str,
    node_files: Sequence[str],
    rel_files: Sequence[str],
    embed_property: str = "name",
    provider: str | None = None,
    model: str | None = None,
    index: str = DEFAULT_INDEX,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    """`import_graph` into the Ladybug database ``[databases.<database>]`` of the
    configuration file (its ``path``, relative to the working directory)."""
    from kag.generation.config import load_config
    from kag.retrieval.factory import database_settings
    from kag.retrieval.ladybug_backend import LadybugSettings

    config = load_config(config_path)
    settings = database_settings(str(config_path), database, config.databases)
    if not isinstance(settings, LadybugSettings):
        raise UsageError(
            f"{config_path}: databases.{database}: is a Neo4j database; `kag graph import` builds Ladybug"
            " databases (load Neo4j with neo4j-admin import)"
        )
    if not node_files:
        raise UsageError("give at least one --nodes file")
    embedder = choose_embedder(config, provider, model)
    return import_graph(
        settings.path, node_files, rel_files, embedder, embed_property, index, replace, progress
    )
