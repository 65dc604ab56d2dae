"""The result tree and the one result model, with its read and write functions side by side.

Layout: ``<results>/<dataset>/<question>/<prefix><setup>.json``. A result file holds exactly
``{"error": str}`` or ``{"ok": {"result": str, "stats": {...}}}`` (the Rust tool's format,
field for field, plus the additive fields ``generation_time``, ``usage``, ``attempts``,
``fingerprint`` and ``kag_version`` inside ``ok.stats``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kag.errors import InputError

RESULT_SUFFIX = ".json"
TMP_SUFFIX = ".tmp"


class UnreadableResult(InputError):
    """A result file that is not one of the two result shapes."""


@dataclass(frozen=True)
class Timing:
    """A Rust ``std::time::Duration`` as serde writes it."""

    secs: int
    nanos: int

    @property
    def seconds(self) -> float:
        return self.secs + self.nanos / 1e9

    @classmethod
    def from_seconds(cls, seconds: float) -> Timing:
        total = max(0, round(seconds * 1e9))
        return cls(total // 1_000_000_000, total % 1_000_000_000)

    def to_json(self) -> dict[str, int]:
        return {"secs": self.secs, "nanos": self.nanos}


@dataclass(frozen=True)
class DatabaseStats:
    backend: str  # "neo4j" (the Rust tool's only one) or "ladybug"
    vertices: int | None = None
    relationships: int | None = None
    properties: int | None = None
    time: Timing | None = None


@dataclass(frozen=True)
class Retrieval:
    """``ok.stats.retrieval``: the rendered subgraph text and how it was obtained."""

    result: str
    retriever: str = "embedder"
    document: str | None = None
    vector: list[float] | None = None
    database: DatabaseStats | None = None
    time: Timing | None = None


@dataclass(frozen=True)
class AugmentedGeneration:
    retriever: str
    database: str


@dataclass(frozen=True)
class ModelConfig:
    provider: str
    model: str
    temperature: float
    tokens: int | None = None
    augmented_generation: AugmentedGeneration | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class OkStats:
    prompt: str | None = None
    retrieval: Retrieval | None = None
    config: ModelConfig | None = None
    time: Timing | None = None
    # Additive fields written by kag benchmark (absent from Rust-tool files).
    generation_time: Timing | None = None
    usage: Usage | None = None
    attempts: int | None = None
    fingerprint: str | None = None
    kag_version: str | None = None


@dataclass(frozen=True)
class OkResult:
    result: str
    stats: OkStats = field(default_factory=OkStats)


@dataclass(frozen=True)
class ErrorResult:
    error: str


Result = OkResult | ErrorResult


# ---------------------------------------------------------------- parsing (lenient on optionals)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _timing(value: Any) -> Timing | None:
    if not isinstance(value, dict):
        return None
    secs, nanos = _int(value.get("secs")), _int(value.get("nanos"))
    if secs is None or nanos is None:
        return None
    return Timing(secs, nanos)


def _retrieval(value: Any) -> Retrieval | None:
    if not isinstance(value, dict):
        return None
    text = _str(value.get("result")) or ""
    stats = value.get("stats")
    if not isinstance(stats, dict) or not stats:
        return Retrieval(result=text)
    retriever, inner = next(iter(stats.items()))
    if not isinstance(inner, dict):
        return Retrieval(result=text, retriever=retriever)
    embedding = inner.get("embedding")
    document = vector = None
    if isinstance(embedding, dict):
        document = _str(embedding.get("document"))
        vec = embedding.get("vec")
        vector = vec if isinstance(vec, list) else None
    database = None
    db = inner.get("database")
    if isinstance(db, dict) and db:
        backend, counts = next(iter(db.items()))
        if isinstance(counts, dict):
            database = DatabaseStats(
                backend=backend,
                vertices=_int(counts.get("vertices")),
                relationships=_int(counts.get("relationships")),
                properties=_int(counts.get("properties")),
                time=_timing(counts.get("time")),
            )
    return Retrieval(
        result=text,
        retriever=retriever,
        document=document,
        vector=vector,
        database=database,
        time=_timing(inner.get("time")),
    )


def _config(value: Any) -> ModelConfig | None:
    if not isinstance(value, dict):
        return None
    aug = value.get("augmented_generation")
    augmented = None
    if (
        isinstance(aug, dict)
        and isinstance(aug.get("retriever"), str)
        and isinstance(aug.get("database"), str)
    ):
        augmented = AugmentedGeneration(aug["retriever"], aug["database"])
    return ModelConfig(
        provider=_str(value.get("provider")) or "",
        model=_str(value.get("model")) or "",
        temperature=_number(value.get("temperature")) or 0.0,
        tokens=_int(value.get("tokens")),
        augmented_generation=augmented,
    )


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    return Usage(_int(value.get("prompt_tokens")), _int(value.get("completion_tokens")))


def result_from_json(raw: Any) -> Result:
    """Build the model from parsed JSON; raises UnreadableResult for any other shape."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise UnreadableResult("expected an object with exactly one key, 'ok' or 'error'")
    if "error" in raw:
        if not isinstance(raw["error"], str):
            raise UnreadableResult("'error' must be a string")
        return ErrorResult(raw["error"])
    ok = raw.get("ok")
    if not isinstance(ok, dict):
        raise UnreadableResult("expected an object with exactly one key, 'ok' or 'error'")
    if not isinstance(ok.get("result"), str):
        raise UnreadableResult("'ok.result' must be a string")
    stats = ok.get("stats")
    if not isinstance(stats, dict):
        return OkResult(ok["result"])
    return OkResult(
        ok["result"],
        OkStats(
            prompt=_str(stats.get("prompt")),
            retrieval=_retrieval(stats.get("retrieval")),
            config=_config(stats.get("config")),
            time=_timing(stats.get("time")),
            generation_time=_timing(stats.get("generation_time")),
            usage=_usage(stats.get("usage")),
            attempts=_int(stats.get("attempts")),
            fingerprint=_str(stats.get("fingerprint")),
            kag_version=_str(stats.get("kag_version")),
        ),
    )


def parse_result(data: bytes) -> Result:
    """Parse the bytes of a result file; raises UnreadableResult."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnreadableResult(f"not valid JSON ({exc})") from None
    return result_from_json(raw)


def read_result(path: str | Path) -> Result:
    """Read one result file; raises UnreadableResult naming the file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise UnreadableResult(f"{path}: {exc.strerror}") from None
    try:
        return parse_result(data)
    except UnreadableResult as exc:
        raise UnreadableResult(f"{path}: {exc}") from None


# ---------------------------------------------------------------- writing (the Rust layout)


def _retrieval_json(retrieval: Retrieval) -> dict[str, Any]:
    inner: dict[str, Any] = {
        "embedding": {"document": retrieval.document, "vec": retrieval.vector},
    }
    if retrieval.database is not None:
        db = retrieval.database
        inner["database"] = {
            db.backend: {
                "vertices": db.vertices,
                "relationships": db.relationships,
                "properties": db.properties,
                "time": db.time.to_json() if db.time else None,
            }
        }
    else:
        inner["database"] = None
    inner["time"] = retrieval.time.to_json() if retrieval.time else None
    return {"result": retrieval.result, "stats": {retrieval.retriever: inner}}


def result_to_json(result: Result) -> dict[str, Any]:
    """The JSON object of a result file (Rust field order; additive fields only when set)."""
    if isinstance(result, ErrorResult):
        return {"error": result.error}
    s = result.stats
    config = None
    if s.config is not None:
        c = s.config
        aug = c.augmented_generation
        config = {
            "augmented_generation": {"retriever": aug.retriever, "database": aug.database} if aug else None,
            "provider": c.provider,
            "model": c.model,
            "temperature": c.temperature,
            "tokens": c.tokens,
        }
    stats: dict[str, Any] = {
        "prompt": s.prompt,
        "retrieval": _retrieval_json(s.retrieval) if s.retrieval else None,
        "config": config,
        "time": s.time.to_json() if s.time else None,
    }
    if s.generation_time is not None:
        stats["generation_time"] = s.generation_time.to_json()
    if s.usage is not None:
        stats["usage"] = {
            "prompt_tokens": s.usage.prompt_tokens,
            "completion_tokens": s.usage.completion_tokens,
        }
    if s.attempts is not None:
        stats["attempts"] = s.attempts
    if s.fingerprint is not None:
        stats["fingerprint"] = s.fingerprint
    if s.kag_version is not None:
        stats["kag_version"] = s.kag_version
    return {"ok": {"result": result.result, "stats": stats}}


def dump_result(result: Result) -> bytes:
    return orjson.dumps(result_to_json(result), option=orjson.OPT_INDENT_2)


def write_result(path: str | Path, result: Result) -> None:
    """Write a result file atomically: ``<name>.tmp`` in the same folder, fsync, rename.

    A reader (or a crash) never sees a partial file: either the old file or the new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    data = dump_result(result)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


# ---------------------------------------------------------------- the tree


def result_path(root: str | Path, dataset: str, question: str, prefix: str, setup: str) -> Path:
    return Path(root) / dataset / question / f"{prefix}{setup}{RESULT_SUFFIX}"


def setup_from_name(name: str, prefix: str) -> str | None:
    """The setup a file name belongs to, or None when the name is not ``<prefix>…json``."""
    if not name.startswith(prefix) or not name.endswith(RESULT_SUFFIX):
        return None
    setup = name[len(prefix) : -len(RESULT_SUFFIX)]
    return setup or None


@dataclass(frozen=True)
class ResultFile:
    path: str
    dataset: str
    question: str
    setup: str


@dataclass
class TreeListing:
    """What a walk of the tree found: the result files and the entries it passed over."""

    files: list[ResultFile] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def check_results_root(root: str) -> None:
    """InputError unless ``root`` is a directory (the root of a result tree)."""
    if not os.path.exists(root):
        raise InputError(f"{root}: results directory not found")
    if not os.path.isdir(root):
        raise InputError(f"{root}: not a directory (--results takes the root of the result tree)")


def scandir_entries(path: str) -> list[os.DirEntry[str]]:
    """The entries of a folder, or none when it is gone, not a folder or not readable."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except (NotADirectoryError, FileNotFoundError, PermissionError):
        return []


def list_results(root: str | Path, prefix: str = "") -> TreeListing:
    """List ``<root>/<dataset>/<question>/<prefix><setup>.json`` files, sorted by path.

    Symbolic links are never followed. ``.tmp`` files, other names, and entries at other
    depths are returned in ``ignored``.
    """
    root = str(root)
    check_results_root(root)
    listing = TreeListing()
    for d in sorted(scandir_entries(root), key=lambda e: e.name):
        if not d.is_dir(follow_symlinks=False):
            listing.ignored.append(d.path)
            continue
        for q in sorted(scandir_entries(d.path), key=lambda e: e.name):
            if not q.is_dir(follow_symlinks=False):
                listing.ignored.append(q.path)
                continue
            for f in sorted(scandir_entries(q.path), key=lambda e: e.name):
                setup = setup_from_name(f.name, prefix)
                if setup is None or not f.is_file(follow_symlinks=False):
                    listing.ignored.append(f.path)
                    continue
                listing.files.append(ResultFile(f.path, d.name, q.name, setup))
    return listing


def iter_result_files_deep(root: str | Path, prefix: str = "") -> Iterator[str]:
    """Every ``<prefix>…json`` regular file below ``root`` at any depth, sorted by path.

    Symbolic links are never followed (the ``find`` walk, like the Rust tool's). Raises
    InputError when ``root`` is not a folder.
    """
    root = str(root)
    check_results_root(root)
    yield from list_result_files_deep(root, prefix)


def list_result_files_deep(folder: str, prefix: str = "") -> list[str]:
    """:func:`iter_result_files_deep` without the check of ``folder``: a folder that is
    gone (or unreadable) has no files."""
    stack = [folder]
    found: list[str] = []
    while stack:
        current = stack.pop()
        for entry in scandir_entries(current):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and setup_from_name(entry.name, prefix) is not None:
                found.append(entry.path)
    found.sort()
    return found
