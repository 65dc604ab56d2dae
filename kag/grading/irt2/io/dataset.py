"""IRT2 dataset folders: config, id files, and the ground truth of a task/split/side/mode.

Only the files scoring needs are read: ``config.yaml``, ``closed.train-triples.txt``
(mode ``original``) and the two open-world sample files of the split. Lines follow the
reference loader: a line whose first byte is ``#`` is a comment; every other line is
decoded with ``unicode_escape``, split on the configured separator, and each field is
whitespace-stripped and parsed with ``int``. A blank line, a wrong field count or a
non-integer field is an error naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kag.errors import InputError
from kag.grading.irt2.io.numbers import json_numbers
from kag.grading.irt2.model import Mode, Side, Split, Task
from kag.textfile import read_bytes_file, read_text_file

CONFIG = "config.yaml"
TRIPLES = "closed.train-triples.txt"

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class DatasetConfig:
    path: Path
    name: str  # create.name, e.g. IRT2/CDE-L
    separator: str  # create.separator


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """The queries of one task/split/side/mode and their gold target sets.

    CSR layout: query ``i`` is ``(entity[i], relation[i])`` and its gold targets are
    ``targets[ptr[i]:ptr[i + 1]]`` (ascending, at least one). Queries are sorted by
    (entity, relation). For linking the entity is a mention and targets are vertices;
    for ranking the entity is a vertex and targets are mentions.
    """

    side: Side
    source: Path
    entity: np.ndarray
    relation: np.ndarray
    ptr: np.ndarray
    targets: np.ndarray

    @classmethod
    def from_pairs(
        cls,
        side: Side,
        entity: np.ndarray,
        relation: np.ndarray,
        target: np.ndarray,
        source: Path = Path("-"),
    ) -> GroundTruth:
        """Group ``(entity, relation, target)`` triples (repeats ignored) into queries with gold sets."""
        entity, relation, target = (np.asarray(a, dtype=np.int64) for a in (entity, relation, target))
        order = _row_order(entity, relation, target)
        entity, relation, target = entity[order], relation[order], target[order]
        if len(entity) > 1:
            distinct = np.ones(len(entity), dtype=bool)
            distinct[1:] = (
                (entity[1:] != entity[:-1]) | (relation[1:] != relation[:-1]) | (target[1:] != target[:-1])
            )
            entity, relation, target = entity[distinct], relation[distinct], target[distinct]
        new_query = np.ones(len(entity), dtype=bool)
        new_query[1:] = (entity[1:] != entity[:-1]) | (relation[1:] != relation[:-1])
        starts = np.flatnonzero(new_query)
        ptr = np.append(starts, len(entity)).astype(np.int64)
        arrays = (entity[starts], relation[starts], ptr, target)
        for array in arrays:
            array.flags.writeable = False
        return cls(side, source, *arrays)

    @property
    def queries(self) -> int:
        return len(self.entity)

    @property
    def pairs(self) -> int:
        return len(self.targets)

    def lookup(self, entity: np.ndarray, relation: np.ndarray) -> np.ndarray:
        """Query number of each ``(entity[i], relation[i])``, or -1 if it is not a query."""
        if not self.queries:
            return np.full(len(entity), -1, dtype=np.int64)
        rmin, rmax = int(self.relation.min()), int(self.relation.max())
        emin, emax = int(self.entity[0]), int(self.entity[-1])
        span = rmax - rmin + 1
        if (emax - emin + 1) * span >= 1 << 62:  # ids too spread out for one int64 key
            index = {key: i for i, key in enumerate(zip(self.entity.tolist(), self.relation.tolist()))}
            keys = zip(entity.tolist(), relation.tolist())
            return np.fromiter((index.get(key, -1) for key in keys), dtype=np.int64, count=len(entity))
        inside = (entity >= emin) & (entity <= emax) & (relation >= rmin) & (relation <= rmax)
        wanted = np.where(inside, (entity - emin) * span + (relation - rmin), -1)
        keys = (self.entity - emin) * span + (self.relation - rmin)  # ascending: queries are sorted
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        return np.where(inside & (keys[at] == wanted), at, -1)


@dataclass(frozen=True, eq=False)
class TaskTruth:
    config: DatasetConfig
    task: Task
    split: Split
    mode: Mode
    head: GroundTruth
    tail: GroundTruth
    samples_dropped: int  # open-world samples removed by mode=original, both files


# Which open-world file each side is built from, and which sample columns
# (mid, rid, vid) form the query entity and the target.
SOURCES: dict[tuple[Task, Side], tuple[str, int, int]] = {
    (Task.LINKING, Side.HEAD): ("tail", 0, 2),  # (mid, rid) -> head vids
    (Task.LINKING, Side.TAIL): ("head", 0, 2),  # (mid, rid) -> tail vids
    (Task.RANKING, Side.HEAD): ("head", 2, 0),  # (vid, rid) -> head mids
    (Task.RANKING, Side.TAIL): ("tail", 2, 0),  # (vid, rid) -> tail mids
}


def samples_file(split: Split, kind: str) -> str:
    """``open.{split}-{head|tail}.txt``."""
    return f"open.{split.value}-{kind}.txt"


def read_config(folder: Path) -> DatasetConfig:
    """Read ``create.name`` and ``create.separator`` from ``folder/config.yaml``."""
    import yaml

    if not folder.is_dir():
        raise InputError(f"{folder}: not a directory (expected an IRT2 dataset folder)")
    path = folder / CONFIG
    if not path.exists() and not path.is_symlink():  # the usual mistake: the wrong folder
        raise InputError(
            f"{path}: IRT2 dataset configuration not found (is {folder} an IRT2 dataset folder?)"
        )
    text = read_text_file(path, "IRT2 dataset configuration", universal_newlines=True)
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:  # PyYAML builds nested collections recursively
        raise InputError(f"{path}: invalid YAML: nested too deeply") from None
    create = data.get("create") if isinstance(data, dict) else None
    if not isinstance(create, dict):
        raise InputError(f"{path}: missing mapping 'create'")
    values = {}
    for key in ("name", "separator"):
        value = create.get(key)
        if not isinstance(value, str) or not value:
            raise InputError(f"{path}: 'create.{key}' must be a non-empty string")
        values[key] = value
    return DatasetConfig(path=folder, name=values["name"], separator=values["separator"])


def read_id_rows(path: Path, separator: str, width: int) -> np.ndarray:
    """Read an id file as an ``(n, width)`` int64 array, one row per non-comment line."""
    data = read_bytes_file(path, "IRT2 dataset file")
    fast = _id_rows_fast(data, separator, width)
    return fast if fast is not None else _id_rows_slow(data, path, separator, width)


def _id_rows_fast(data: bytes, separator: str, width: int) -> np.ndarray | None:
    """Plain decimal ids only, parsed as one JSON array; None if anything else."""
    sep = separator.encode("utf-8")
    if len(sep) != 1 or sep in b'0123456789-+.eE \t\r\n\\#[]{}"':
        return None
    if data[:1] == b"#" or b"\n#" in data:
        data = b"\n".join(line for line in data.split(b"\n") if line[:1] != b"#")
    body = data[:-1] if data.endswith(b"\n") else data
    if not body:
        return np.empty((0, width), dtype=np.int64)
    if body.translate(None, b"0123456789- \t\r\n" + sep):
        return None
    values = _int_values(body, sep)
    if values is None:
        return None
    buf = np.frombuffer(body, dtype=np.uint8)
    seps = np.flatnonzero(buf == sep[0])
    per_line = np.diff(np.concatenate(([0], np.searchsorted(seps, np.flatnonzero(buf == 0x0A)), [len(seps)])))
    if (per_line != width - 1).any() or len(values) != len(per_line) * width:
        return None
    return values.reshape(-1, width)


def _int_values(body: bytes, sep: bytes, piece_bytes: int = 1 << 19) -> np.ndarray | None:
    """The integers of ``body`` (lines of ids joined by ``sep``), read in pieces of whole
    lines so that the parser's buffers stay small; None if any piece is not plain ids."""
    pieces = []
    start = 0
    while start < len(body):
        end = body.find(b"\n", start + piece_bytes)
        end = len(body) if end < 0 else end
        text = body[start:end].replace(sep, b",").replace(b"\n", b",")
        values = json_numbers(b"[" + text + b"]", "int64")
        if values is None:
            return None
        pieces.append(values)
        start = end + 1
    return np.concatenate(pieces)


def _id_rows_slow(data: bytes, path: Path, separator: str, width: int) -> np.ndarray:
    """Line by line as the reference loader does, reporting the first bad line."""
    sep = separator.encode("utf-8")
    rows: list[tuple[int, ...]] = []
    numbers: list[int] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if line[:1] == b"#":
            continue
        fields: list[str] | list[bytes]
        if line.isascii() and b"\\" not in line:
            fields = line.split(sep)
        else:
            try:
                fields = line.decode("unicode_escape").split(separator)
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}:{number}: cannot decode line: {exc.reason}") from None
        if len(fields) != width:
            if len(fields) == 1 and not fields[0].strip():
                raise InputError(f"{path}:{number}: blank line")
            raise InputError(
                f"{path}:{number}: expected {width} fields separated by {separator!r}, found {len(fields)}"
            )
        try:
            rows.append(tuple(map(int, fields)))
            numbers.append(number)
        except ValueError:
            bad = next(f for f in fields if not _is_int(f))
            shown = bad.decode("latin-1") if isinstance(bad, bytes) else bad
            raise InputError(f"{path}:{number}: not an integer id: {shown.strip()!r}") from None
    if not rows:
        return np.empty((0, width), dtype=np.int64)
    try:
        return np.array(rows, dtype=np.int64)
    except OverflowError:
        index, value = next(
            (i, v) for i, row in enumerate(rows) for v in row if not INT64_MIN <= v <= INT64_MAX
        )
        raise InputError(f"{path}:{numbers[index]}: id {value} is out of the 64-bit range") from None


def _is_int(text: str | bytes) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def closed_vertices(config: DatasetConfig) -> np.ndarray:
    """Sorted vertex ids occurring in a closed-world triple (``head|tail|relation``)."""
    triples = read_id_rows(config.path / TRIPLES, config.separator, 3)
    return np.unique(triples[:, :2])


def _row_order(*columns: np.ndarray) -> np.ndarray:
    """Indices that sort rows lexicographically by ``columns[0]``, then ``columns[1]``, ...

    One int64 key and one sort when the id ranges allow it (they do for any real
    dataset), else ``np.lexsort``.
    """
    if not len(columns[0]):
        return np.empty(0, dtype=np.int64)
    key = np.zeros(len(columns[0]), dtype=np.int64)
    capacity = 1
    for column in columns:
        low, high = int(column.min()), int(column.max())
        capacity *= high - low + 1
        if capacity >= 1 << 62:
            return np.lexsort(columns[::-1])
        key = key * (high - low + 1) + (column - low)
    return np.argsort(key, kind="stable")


def _distinct_rows(rows: np.ndarray) -> np.ndarray:
    """Rows without repeats (samples are a set in the reference), sorted."""
    rows = rows[_row_order(*rows.T)]
    if len(rows) > 1:
        rows = rows[np.concatenate(([True], (rows[1:] != rows[:-1]).any(axis=1)))]
    return rows


def load_truth(folder: Path, task: Task, split: Split, mode: Mode) -> TaskTruth:
    """Build the head and tail ground truth of ``task`` on ``split`` under ``mode``.

    Samples ``mid|rid|vid`` are deduplicated. Mode ``original`` keeps a sample only when
    its vid occurs in a closed-world triple. See ``SOURCES`` for which file feeds which side.
    """
    config = read_config(folder)
    keep = closed_vertices(config) if mode is Mode.ORIGINAL else None
    loaded: dict[str, tuple[Path, np.ndarray]] = {}
    dropped = 0
    for kind in ("head", "tail"):
        path = folder / samples_file(split, kind)
        samples = _distinct_rows(read_id_rows(path, config.separator, 3))
        if keep is not None:
            mask = np.isin(samples[:, 2], keep)
            dropped += int(len(samples) - mask.sum())
            samples = samples[mask]
        loaded[kind] = (path, samples)
    sides = []
    for side in (Side.HEAD, Side.TAIL):
        kind, entity_col, target_col = SOURCES[(task, side)]
        path, samples = loaded[kind]
        columns = samples[:, entity_col], samples[:, 1], samples[:, target_col]
        sides.append(GroundTruth.from_pairs(side, *columns, source=path))
    return TaskTruth(config, task, split, mode, sides[0], sides[1], dropped)
