"""The search of the grid's responses (``q=REGEX``) and the reading of a result file for a
page, both bounded: a pattern whose repetitions would spell out more than
:data:`kag.grading.search.options.MAX_EXPANDED` characters is refused before it is compiled, a search stops at
:data:`SEARCH_SECONDS` or when its client has left, and a file is read below its tree with
no link followed at any folder of its path (one planted after the scan included).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kag.errors import InputError
from kag.grading.rule import rust_trim
from kag.grading.search.match import Matcher, literal_of, match_text
from kag.grading.search.options import DEFAULT_TIMEOUT, compile_pattern
from kag.results.codec import parse_result
from kag.results.io import MAX_RESULT_BYTES, too_large_message
from kag.results.model import ErrorResult

#: The longest a search of the grid runs (wall time); what it found by then is shown.
SEARCH_SECONDS = 10.0


def compile_search(pattern: str) -> Matcher:
    """The matcher of a ``q=`` pattern (`kag stats find`'s rules); UsageError, naming why,
    for an invalid pattern or one that would take too much memory to compile
    (:func:`kag.grading.search.options.compile_pattern`)."""
    return Matcher(compile_pattern(pattern), False, 0, 1, DEFAULT_TIMEOUT, literal_of(pattern))


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_below(root: str, rel: str) -> bytes:
    """The bytes of the regular file ``rel`` (``/``-separated) below the tree ``root``:
    each folder of ``rel`` opened from the one before without following a link, then the
    file the same way, so that a link swapped in anywhere below ``root`` is never read
    through. OSError (ELOOP, ENOTDIR, ENOENT) or InputError (not a regular file, past
    the size cap) otherwise."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise OSError(errno.ENOENT, "not a path of the tree")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                inner = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    shown = "/".join(parts[: i + 1])
                    raise InputError(f"{shown}: a symbolic link or a file where a folder belongs") from None
                raise
            os.close(fd)
            fd = inner
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError("a symbolic link where the result file was") from None
            raise
    finally:
        os.close(fd)
    try:
        st = os.fstat(file_fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file")
        if st.st_size > MAX_RESULT_BYTES:
            raise InputError(too_large_message(st.st_size))
        chunks = []
        size = 0
        while chunk := os.read(file_fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RESULT_BYTES:  # grew while read
                raise InputError(too_large_message(size))
        return b"".join(chunks)
    finally:
        os.close(file_fd)


@dataclass(frozen=True)
class Found:
    """The questions a search found, and why it stopped before its last file (None: it
    searched every one)."""

    keys: frozenset[tuple[str, str]]
    cut: str | None = None


GONE = "the client left"
GONE_EVERY = 16  # files searched between two looks at the client's socket (a system call each)


def search_files(
    files: Iterable[tuple[tuple[str, str], str, str]],
    total: int,
    m: Matcher,
    *,
    seconds: float = SEARCH_SECONDS,
    gone: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Found:
    """The questions among ``files`` ((dataset, question), tree, relative path) whose
    trimmed response ``m`` matches; a question found is not searched further. Stops,
    saying why, when ``seconds`` have passed (each file's own budget then ends with them)
    or when ``gone`` says the client left."""
    deadline = clock() + seconds
    found: set[tuple[str, str]] = set()
    done = 0
    for key, tree, rel in files:
        if key in found:
            continue
        if gone is not None and done % GONE_EVERY == 0 and gone():
            return Found(frozenset(found), GONE)
        left = deadline - clock()
        if left <= 0:
            return Found(
                frozenset(found),
                f"the search stopped after {seconds:g} s with {done:,} of {total:,} files searched: "
                "the rows are those it found by then (narrow the filters or the pattern)",
            )
        done += 1
        try:
            result = parse_result(read_below(tree, rel))
        except Exception:  # noqa: BLE001, S112 - a file that changed since the scan
            continue
        if isinstance(result, ErrorResult):
            continue
        hits, _ = match_text(rust_trim(result.result), m if left >= m.timeout else replace(m, timeout=left))
        if hits:
            found.add(key)
    return Found(frozenset(found))
