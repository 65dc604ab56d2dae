"""Reading and writing result files: one reader of the bytes (with the size cap), the
canonical file reader, one atomic writer for every file kag writes, and the tree's lock.
"""

from __future__ import annotations

__all__ = [
    "LOCK_NAME",
    "MAX_RESULT_BYTES",
    "NO_SPACE_ERRNOS",
    "TMP_OVERHEAD",
    "LinkInTree",
    "NoSpace",
    "TreeBusy",
    "TreeLock",
    "find_dead_temporaries",
    "lock_tree",
    "read_result",
    "read_result_bytes",
    "read_result_nofollow",
    "read_result_stamped",
    "temporary_name",
    "temporary_owner",
    "too_large_message",
    "write_atomic",
    "write_output",
    "write_result",
    "writer_alive",
]

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from kag.errors import InputError
from kag.results.codec import dump_result, parse_result
from kag.results.model import TMP_SUFFIX, Result, UnreadableResult
from kag.results.tree import scandir_entries

#: Largest result file read (bytes). A bigger one is unreadable, told from its size alone:
#: reading and parsing a 1 GB file costs 2-4 GB of memory, and no answer is that long.
MAX_RESULT_BYTES = 64 * 1024 * 1024


def too_large_message(size: int) -> str:
    """Why a file of ``size`` bytes is not read (the same words in ``stats`` and ``find``)."""
    return f"{size:,} bytes, over the {MAX_RESULT_BYTES // (1024 * 1024)} MiB size cap for a result file"


# O_NONBLOCK: a FIFO swapped in under a result name must not block open(); no effect on files.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_READ_SIZE = 1 << 16  # below malloc's mmap threshold: no mmap/munmap per file


def read_result_bytes(path: str, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file, without following a symbolic link; ``path`` is
    relative to the open folder ``dir_fd`` when given (as for ``os.open``: a walk that
    holds its folder open saves the kernel the lookup of every folder above the file).

    Raises OSError (ELOOP for a symlink) or InputError when the entry is not a regular
    file or is larger than :data:`MAX_RESULT_BYTES`. One ``os.read`` of 64 KiB reads a
    typical result file whole (half the cost of ``open().read()``: no buffered object);
    only a file that fills it, or gives nothing, is looked at (``fstat``): one past the cap
    is refused before the rest of it is read, and one growing past it while it is read is
    cut off there and refused the same way.
    """
    fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    try:
        try:
            data = os.read(fd, _READ_SIZE)
        except IsADirectoryError:
            raise InputError("not a regular file") from None
        if len(data) == _READ_SIZE or not data:
            data = _read_rest(fd, data, os.fstat(fd))
        return data
    finally:
        os.close(fd)


def read_result_stamped(path: str, dir_fd: int | None = None) -> tuple[bytes, os.stat_result]:
    """:func:`read_result_bytes` and the ``fstat`` of the file read, taken before reading
    it: the size and mtime of the very file whose bytes these are, for the cost of one call
    on the open descriptor (an index compares them with a later ``lstat`` of the path)."""
    fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        data = b""
        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_RESULT_BYTES:
            data = os.read(fd, _READ_SIZE)
        if len(data) == _READ_SIZE or not data:
            data = _read_rest(fd, data, st)
        return data, st
    finally:
        os.close(fd)


def _read_rest(fd: int, data: bytes, st: os.stat_result) -> bytes:
    """The whole file open at ``fd``, ``data`` being its first read (a full buffer or
    nothing) and ``st`` its ``fstat``; InputError for a file that is not a regular one or
    is past the size cap."""
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file")
    if st.st_size > MAX_RESULT_BYTES:
        raise InputError(too_large_message(st.st_size))
    if not data:
        return data
    parts = [data]
    size = len(data)
    while part := os.read(fd, _READ_SIZE):
        parts.append(part)
        size += len(part)
        if size > MAX_RESULT_BYTES:  # grew while read
            raise InputError(too_large_message(os.fstat(fd).st_size))
    return b"".join(parts)


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


# The longest chain of links followed to see where an output path leads.
_MAX_LINKS = 40


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names through ``/proc/self/fd/N`` (what
    ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N`` are links to), else None."""
    own = re.compile(rf"/proc/(?:self|{os.getpid()})/fd/([0-9]+)")
    for _ in range(_MAX_LINKS):
        match = own.fullmatch(os.path.join(os.path.realpath(path.parent), path.name))
        if match:
            return int(match.group(1))
        try:
            target = os.readlink(path)
        except OSError:  # not a link: the chain ends
            return None
        path = path.parent / target
    return None


def _in_place(path: Path) -> bool:
    """Whether an output path is written in place rather than replaced: an existing file
    that is not a regular file nor a folder once links are followed (a character device such
    as ``/dev/full`` or ``/dev/null``, a named pipe, a terminal), or a file reached through
    ``/proc`` (``/dev/stdout`` onto a file: its link must stay)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # absent, a dangling link, a bad name: written anew
        return False
    if stat.S_ISDIR(mode):
        return False
    if not stat.S_ISREG(mode):
        return True
    return _own_descriptor(path) is not None or os.path.realpath(path.parent).startswith("/proc/")


def write_output(path: str | Path, chunks: Iterable[bytes]) -> None:
    """Write a file the user named (``-o``, ``--details``, ``--per-query``).

    A regular file (or a new one) is written by :func:`write_atomic`: a link at ``path`` to a
    regular file is replaced, not written through. An existing node that is not a regular
    file (a named pipe, a character device, ``/dev/stdout``, or a link to one of them) is
    opened and written in place, never replaced: the pipe's reader gets the bytes and the
    node stays what it was; a block device (a disk) is refused (InputError). One of this
    process's own descriptors (``/dev/stdout``) is written through that descriptor, after
    what Python buffered for it, so the bytes keep their place among what the command
    prints. On a full disk (``/dev/full``) NoSpace is raised; other OSErrors propagate.
    """
    path = Path(path)
    if not _in_place(path):
        write_atomic(path, chunks)
        return
    with contextlib.suppress(OSError):
        if stat.S_ISBLK(os.stat(path).st_mode):  # a disk: never written over by a report
            raise InputError(f"{path}: a block device; reports go to files, pipes and character devices")
    try:
        own = _own_descriptor(path)
        if own is None:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        else:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(AttributeError, ValueError, OSError):
                    if stream.fileno() == own:
                        stream.flush()
            fd = os.dup(own)
        try:
            _write_all(fd, chunks)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in NO_SPACE_ERRNOS:
            raise NoSpace(path, exc.strerror or "no space left") from None
        raise


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
    """:func:`read_result` through :func:`read_result_bytes`: a symbolic link, a FIFO, a
    directory or a file over :data:`MAX_RESULT_BYTES` at the file itself is an
    UnreadableResult naming the path (never followed, never waited on, never read whole)."""
    try:
        data = read_result_bytes(str(path))
    except OSError as exc:
        reason = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or type(exc).__name__
        raise UnreadableResult(f"{path}: {reason}") from None
    except InputError as exc:
        raise UnreadableResult(f"{path}: {exc}") from None
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


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _open_lock_file(path: Path) -> int:
    """The lock file at ``path`` open for writing, created when absent; InputError naming
    the path when something else is there: a link (symbolic or hard: a hard link would be
    written through to a file outside the tree), a FIFO (opened without waiting for a
    writer), a directory, a device or a socket. Nothing is truncated before these checks."""
    try:
        fd = os.open(path, _LOCK_FLAGS, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            try:
                kind = _kind(os.lstat(path).st_mode)
            except OSError:
                kind = exc.strerror or "not a regular file"
            raise InputError(f"{path}: {kind} where the lock file belongs; remove it") from None
        raise InputError(f"{path}: cannot open the lock file: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
    except OSError as exc:  # pragma: no cover - fstat of an open descriptor
        os.close(fd)
        raise InputError(f"{path}: cannot open the lock file: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InputError(f"{path}: {_kind(info.st_mode)} where the lock file belongs; remove it")
    if info.st_nlink != 1:
        os.close(fd)
        raise InputError(
            f"{path}: the lock file has {info.st_nlink} hard links (it may be another file of"
            " the system); remove it"
        )
    return fd


def lock_tree(root: str | Path, part: str | None = None) -> TreeLock:
    """Take the writer's lock of the tree at ``root`` without waiting; TreeBusy naming the
    holder's pid when another process has it."""
    name = f"{LOCK_NAME}-{part}{TMP_SUFFIX}" if part else f"{LOCK_NAME}{TMP_SUFFIX}"
    path = Path(root) / name
    while True:
        fd = _open_lock_file(path)
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
