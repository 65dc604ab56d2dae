"""Run records: ``<results>/.kag/runs/<UTC time>-<id>.json``, one per ``kag benchmark``.

Each record says how a run was made (kag's version, the command line, the configuration
and benchmark texts, the datasets file, the selection, times, task counts). They are
written by :mod:`kag.generation.run_record`; this module names their place and reads them
back. The ``.kag`` folder is kag's own: no walk of the result tree takes it for results.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "KAG_FOLDER",
    "MAX_RECORD_BYTES",
    "RUNS_FOLDER",
    "RunRecord",
    "read_run_records",
    "recorded_prefix",
    "runs_folder",
    "written_without_prefix",
]

KAG_FOLDER = ".kag"
RUNS_FOLDER = "runs"
# A record holds two rendered files; anything larger is not one of ours.
MAX_RECORD_BYTES = 16 * 1024 * 1024
# A record nests four levels; JSON nested past this is not one of ours either (and orjson,
# which reads 1,024 levels, writes no more than 254: `kag stats runs --format json` could not
# show it).
MAX_RECORD_DEPTH = 64


def runs_folder(root: str | Path) -> Path:
    """The folder of the run records of the result tree at ``root``."""
    return Path(root) / KAG_FOLDER / RUNS_FOLDER


@dataclass(frozen=True)
class RunRecord:
    """One run record: its file name and its JSON object."""

    name: str
    data: dict[str, Any]

    @property
    def started(self) -> str:
        value = self.data.get("started")
        return value if isinstance(value, str) else ""

    @property
    def finished(self) -> str | None:
        value = self.data.get("finished")
        return value if isinstance(value, str) else None


def _read(name: str, folder_fd: int) -> dict[str, Any] | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None  # a FIFO or device planted under a record's name
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and _depth_within(data, MAX_RECORD_DEPTH) else None


def _depth_within(value: object, limit: int) -> bool:
    """Whether ``value`` nests no more than ``limit`` arrays and objects deep."""
    level: list[object] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return True
    return not any(isinstance(item, (dict, list)) for item in level)


def _open_runs_folder(root: str | Path) -> int | None:
    """A descriptor of ``<root>/.kag/runs``, each of the two folders opened without following
    a link (a planted link would list records of a folder outside the tree); None when one is
    missing, a link or not a folder. The root itself is the caller's choice, links and all."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in (KAG_FOLDER, RUNS_FOLDER):
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError:
        os.close(fd)
        return None
    return fd


def read_run_records(root: str | Path) -> list[RunRecord]:
    """The readable run records of the tree at ``root``, oldest first (by file name, which
    starts with the UTC start time). Links, unreadable, oversized and non-object files are
    passed over; no records folder (or a link where ``.kag`` or ``.kag/runs`` belongs) means
    no records."""
    try:
        folder_fd = _open_runs_folder(root)
    except OSError:
        return []
    if folder_fd is None:
        return []
    try:
        try:
            with os.scandir(folder_fd) as it:
                names = sorted(
                    e.name for e in it if e.name.endswith(".json") and e.is_file(follow_symlinks=False)
                )
        except OSError:
            return []
        records = []
        for name in names:
            data = _read(name, folder_fd)
            if data is not None:
                records.append(RunRecord(name, data))
        return records
    finally:
        os.close(folder_fd)


def recorded_prefix(record: RunRecord) -> str | None:
    """The ``--prefix`` the run of ``record`` was given ("" for none), read from its command
    line; None when the record holds no command line."""
    argv = record.data.get("argv")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    prefix = ""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--prefix" and i + 1 < len(argv):
            prefix = argv[i + 1]
        elif arg.startswith("--prefix="):
            prefix = arg.partition("=")[2]
    return prefix


def written_without_prefix(roots: Iterable[str | Path]) -> bool:
    """Whether every tree at ``roots`` holds run records and each says its run was given no
    ``--prefix``: the result file names are then the setups' own, whatever they share."""
    found = False
    for root in roots:
        records = read_run_records(root)
        if not records or any(recorded_prefix(r) != "" for r in records):
            return False
        found = True
    return found
