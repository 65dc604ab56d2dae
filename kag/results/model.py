"""The result tree and the one result model, with its read and write functions side by side.

Layout: ``<results>/<dataset>/<question>/<prefix><setup>.json``. A result file holds exactly
``{"error": str}`` or ``{"ok": {"result": str, "stats": {...}}}`` (the Rust tool's format,
field for field, plus the additive fields ``generation_time``, ``usage``, ``attempts``,
``fingerprint`` and ``kag_version`` inside ``ok.stats``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

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


class NoSpace(InputError):
    """The file system refused more bytes (ENOSPC, EDQUOT, or EFBIG past a file size limit).

    The temporary file was removed: nothing partial is left behind."""

    def __init__(self, path: str | Path, strerror: str) -> None:
        super().__init__(f"{path}: {strerror}")
        self.strerror = strerror


class LinkInTree(InputError):
    """A symbolic link (or a non-folder) sits where a folder of the result tree belongs."""


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# What a temporary name adds to the final name: ".<pid>.<8 hex>.tmp" (pids fit 7 digits).
TMP_OVERHEAD = len(".4194304.0123abcd" + TMP_SUFFIX)


def temporary_name(name: str) -> str:
    """``<name>.<pid>.<random>.tmp``: unique per process and per write, and still a ``.tmp``
    (which every reader of the tree passes over)."""
    return f"{name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"


def temporary_owner(name: str, final: str | None = None) -> int | None:
    """The pid in a temporary name written by :func:`temporary_name` (for ``final`` when
    given); None for another name. A bare ``<name>.tmp`` (older kag) has pid 0: no writer."""
    if not name.endswith(TMP_SUFFIX):
        return None
    stem = name[: -len(TMP_SUFFIX)]
    if final is not None and stem == final:
        return 0
    parts = stem.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit() or (final is not None and parts[0] != final):
        return None
    return int(parts[1])


def writer_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a pid of 0, or one that is gone, is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _write_all(fd: int, chunks: Iterable[bytes]) -> None:
    """Every byte of every chunk: a short write (a file system nearly full, a size limit)
    is followed by another write of the rest, which then fails with the reason."""
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            written = os.write(fd, view)
            view = view[written:]


def _open_folder(parent_fd: int, name: str, create: bool, shown: str) -> int:
    """Open (creating it when asked) the folder ``name`` inside ``parent_fd`` without
    following a link; LinkInTree when a link or a file is there."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent_fd)
    try:
        return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LinkInTree(f"{shown}: a symbolic link or a file where a folder belongs") from None
        raise


def write_atomic(
    path: str | Path,
    chunks: Iterable[bytes],
    *,
    root: str | Path | None = None,
    mode: int = 0o666,
) -> None:
    """Write a file atomically: an exclusive temporary (``O_CREAT|O_EXCL|O_NOFOLLOW``, a
    name unique to this process) in the same folder, every byte, fsync, rename.

    A reader (or a crash) sees the old file or the new one, never a part. No symbolic link
    is followed at the temporary or the final name (a link there is replaced, not written
    through). With ``root``, ``path`` lies below it and every folder between them is
    created and opened without following links (LinkInTree names a link found there);
    without it, the parent folder is the caller's choice and is opened as given. On a full
    disk the temporary is removed and NoSpace raised; other OSErrors propagate, also with
    the temporary removed.
    """
    path = Path(path)
    if root is None:
        dir_fd = os.open(path.parent, _DIR_FLAGS)
    else:
        relative = path.relative_to(root)
        os.makedirs(root, exist_ok=True)  # the root is the caller's choice, links and all
        dir_fd = os.open(root, _DIR_FLAGS)
        shown = Path(root)
        try:
            for part in relative.parts[:-1]:
                shown = shown / part
                inner = _open_folder(dir_fd, part, True, str(shown))
                os.close(dir_fd)
                dir_fd = inner
        except BaseException:
            os.close(dir_fd)
            raise
    try:
        tmp = temporary_name(path.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, mode, dir_fd=dir_fd)
        try:
            try:
                _write_all(fd, chunks)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
                raise NoSpace(path, exc.strerror or "no space left") from None
            raise
    finally:
        os.close(dir_fd)


def write_result(path: str | Path, result: Result, root: str | Path | None = None) -> None:
    """Write a result file atomically through :func:`write_atomic` (mode 0644).

    With ``root`` (the root of the result tree), no link below it is followed. Raises
    NoSpace on a full disk (nothing is left behind), LinkInTree, or OSError.
    """
    path = Path(path)
    if root is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (dump_result(result),), root=root, mode=0o644)


def read_result_nofollow(path: str | Path) -> Result:
    """:func:`read_result` that refuses a symbolic link at the file itself (UnreadableResult)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        reason = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise UnreadableResult(f"{path}: {reason}") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    try:
        return parse_result(data)
    except UnreadableResult as exc:
        raise UnreadableResult(f"{path}: {exc}") from None


# ---------------------------------------------------------------- one writer per tree

# Ends in ".tmp" so that readers of the tree pass over it like any write in progress.
LOCK_NAME = ".kag-benchmark-lock"


class TreeBusy(InputError):
    """Another process holds the tree's lock."""


@dataclass
class TreeLock:
    """An advisory ``flock`` on ``<root>/.kag-benchmark-lock[-<part>].tmp``, held until
    :meth:`release` removes the file (or until the process ends: the kernel drops the lock,
    so a crash leaves a file but no lock). ``part`` names a share of the tree (a shard) for
    writers that split one tree between them."""

    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            # Unlink while still holding the lock: a waiting process then finds the inode
            # gone from the folder and opens the path again (see lock_tree).
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_tree(root: str | Path, part: str | None = None) -> TreeLock:
    """Take the writer's lock of the tree at ``root`` without waiting; TreeBusy naming the
    holder's pid when another process has it."""
    name = f"{LOCK_NAME}-{part}{TMP_SUFFIX}" if part else f"{LOCK_NAME}{TMP_SUFFIX}"
    path = Path(root) / name
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise InputError(f"{path}: cannot open the lock file: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise TreeBusy(
                    f"{root}: another kag benchmark (pid {holder}) is writing this result tree;"
                    f" wait for it to end (lock file {path})"
                ) from None
            raise InputError(f"{path}: cannot lock: {exc.strerror}") from None
        try:
            current = os.lstat(path)
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)  # the holder removed this file as we locked it: take the new one
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return TreeLock(path, fd)


def find_dead_temporaries(folder: str | Path, names: Iterable[str]) -> list[Path]:
    """The temporaries in ``folder`` of the final file ``names`` whose writer process is
    gone (a crash or a kill interrupted their write): safe to remove. A temporary of a live
    writer is never listed. No link is followed."""
    wanted = set(names)
    found: list[Path] = []
    for entry in scandir_entries(str(folder)):
        if not entry.name.endswith(TMP_SUFFIX):
            continue
        stem = entry.name[: -len(TMP_SUFFIX)]
        final = stem if stem in wanted else stem.rsplit(".", 2)[0]
        if final not in wanted:
            continue
        owner = temporary_owner(entry.name, final)
        if owner is not None and not writer_alive(owner):
            found.append(Path(entry.path))
    return sorted(found)


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
