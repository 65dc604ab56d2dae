"""Neo4j admin-import style CSV files -> a checked `GraphData` (the reading step of
``kag graph import``, see `kag.retrieval.importer`).

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
the database is written.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.errors import InputError
from kag.retrieval.ladybug_backend import KEY_COLUMN, LABELS_COLUMN
from kag.textfile import open_text_file

log = logging.getLogger(__name__)

ARRAY_DELIMITER = ";"
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
# Names the engine gives relationship internals.
_REL_RESERVED = {"_src", "_dst", "_label", "_id"}


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
    where = f"{path}:1"
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


def _open_csv(path: str, what: str) -> Iterator[tuple[int, list[str]]]:
    with open_text_file(path, what, bom=True, newline="") as handle:
        reader = csv.reader(handle, strict=True)
        try:
            for fields in reader:
                yield reader.line_num, fields
        except csv.Error as exc:
            raise InputError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None


def _read(path: str, kind: str) -> tuple[Header, Iterator[tuple[str, list[str]]]]:
    """The header of a file and an iterator over its data rows (with their location)."""
    lines = _open_csv(path, f"{kind} CSV file")
    first = next(lines, None)
    if first is None:
        raise InputError(f"{path}: empty file (expected a header line)")
    header = _header(path, first[1], kind)

    def rows() -> Iterator[tuple[str, list[str]]]:
        width = len(header.columns)
        for line, fields in lines:
            if not fields or fields == [""]:
                continue
            where = f"{path}:{line}"
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
                    f"{path}:1: {what} property {column.name!r} differs only in case from"
                    f" {lower[column.name.lower()]!r} (the database's names ignore case)"
                )
            into[column.name] = column
        elif (known.kind, known.array) != (column.kind, column.array):
            raise InputError(
                f"{path}:1: {what} property {column.name!r} is {column.engine_type} here"
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
                    f"{path}:1: property name {column.name!r} is reserved"
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
                raise InputError(f"{path}:1: relationship property name {column.name!r} is reserved")
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
