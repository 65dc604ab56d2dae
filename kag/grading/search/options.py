"""What `kag stats find` searches for (:class:`SearchOptions`) and what it gives (one
:class:`FileOutcome` per file with something to report, a :class:`SearchResult` in all)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_TIMEOUT",
    "MAX_EXPANDED",
    "FileOutcome",
    "FileStatus",
    "Hit",
    "SearchOptions",
    "SearchResult",
    "SetupCount",
    "compile_pattern",
    "expanded_size",
]

import math
import re
from dataclasses import dataclass, field
from enum import Enum

import regex

from kag.errors import UsageError
from kag.results.tree import ResultFile

DEFAULT_CONTEXT = 40
DEFAULT_TIMEOUT = 1.0


@dataclass(frozen=True)
class SearchOptions:
    """What to search for and which files to search.

    - ``pattern``: ``regex`` module syntax; compiled once (:func:`compile_pattern`).
    - ``invert``: select the files whose trimmed response does NOT match.
    - ``context``: characters kept on each side of a match (0 = the match alone).
    - ``max_count``: at most this many hits per file (None = all); ``files_only`` stops at
      the first hit of each file (``-l``), which is ``max_count=1``.
    - ``timeout``: CPU seconds of matching allowed per file (> 0).
    - ``setups`` / ``datasets``: shell globs (``fnmatch``, case-sensitive); a file is
      searched when its setup matches any of ``setups`` and its dataset any of
      ``datasets`` (an empty tuple accepts everything).
    - ``hidden``: also walk the folders below the root whose name starts with ``.`` (the
      judge's ``.kag-judge`` cache, editor or VCS folders): skipped by default, as ripgrep does.
    """

    pattern: str
    prefix: str = ""
    ignore_case: bool = False
    invert: bool = False
    context: int = DEFAULT_CONTEXT
    max_count: int | None = None
    files_only: bool = False
    timeout: float = DEFAULT_TIMEOUT
    setups: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    hidden: bool = False

    def __post_init__(self) -> None:
        if self.context < 0:
            raise UsageError(f"--context must be 0 or more (got {self.context})")
        if self.max_count is not None and self.max_count < 1:
            raise UsageError(f"--max-count must be 1 or more (got {self.max_count})")
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise UsageError(f"--timeout must be more than 0 seconds (got {self.timeout})")

    @property
    def hits_per_file(self) -> int | None:
        return 1 if self.files_only else self.max_count


def compile_pattern(pattern: str, ignore_case: bool = False) -> regex.Pattern[str]:
    """Compile with the ``regex`` module; an invalid pattern raises UsageError (exit 2)
    carrying the compiler's message, e.g. ``missing ) at position 1``, and so does one whose
    ``{n}`` counts spell out more than :data:`MAX_EXPANDED` characters (:func:`expanded_size`),
    before it is compiled: the module would take gigabytes for it."""
    size = expanded_size(pattern)
    if "#" in pattern or "V1" in pattern:
        # A comment, or sets nested in sets, can hide a count from expanded_size's reading.
        size = max(size, _bound(pattern))
    if size > MAX_EXPANDED:
        raise UsageError(
            f"pattern {pattern!r} repeats too much: its {{n}} counts spell out {size:,} characters, "
            f"more than {MAX_EXPANDED:,} (use * or + or a smaller count)"
        )
    flags = regex.IGNORECASE if ignore_case else 0
    try:
        return regex.compile(pattern, flags)
    except regex.error as exc:
        raise UsageError(f"invalid pattern {pattern!r}: {exc}") from None
    except (OverflowError, ValueError, RecursionError, MemoryError) as exc:
        raise UsageError(f"invalid pattern {pattern!r}: {exc}") from None


#: The most characters a pattern may stand for once its ``{n}`` counts are spelled out
#: (the ``regex`` module compiles ``a{1000000000}`` into that many steps: gigabytes).
MAX_EXPANDED = 100_000

_COUNT = re.compile(r"\{([0-9]*)(?:,([0-9]*))?\}")
_NAMED_ESCAPE = re.compile(r"\\[pPNxuUg]\{[^}]*\}")


def expanded_size(pattern: str) -> int:
    """How many characters ``pattern`` stands for when each repetition ``{n}``, ``{n,m}``
    or ``{n,}`` is spelled out (``n``, or ``m`` when larger, copies of what it repeats,
    nested counts multiplied); ``*``, ``+``, ``?`` add nothing. An estimate from above:
    every other character counts as one, a character class as one."""
    # Per open group: [characters so far, size of its last item].
    stack = [[0, 0]]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        top = stack[-1]
        if c == "\\":
            named = _NAMED_ESCAPE.match(pattern, i)
            i = named.end() if named is not None else i + 2
            top[0] += 1
            top[1] = 1
            continue
        if c == "[":
            i = _class_end(pattern, i)
            top[0] += 1
            top[1] = 1
            continue
        if c == "(":
            stack.append([0, 0])
        elif c == ")" and len(stack) > 1:
            size = stack.pop()[0]
            stack[-1][0] += size
            stack[-1][1] = size
        elif c == "{" and (count := _COUNT.match(pattern, i)) is not None and count.group(0) != "{}":
            times = max(int(count.group(1) or 0), int(count.group(2) or 0))
            if times > MAX_EXPANDED:
                return times
            top[0] += top[1] * (times - 1) if times else -top[1]
            top[1] *= times
            if top[0] > MAX_EXPANDED:
                return top[0]
            i = count.end()
            continue
        elif c not in "*+?|":
            top[0] += 1
            top[1] = 1
        i += 1
    return sum(group[0] for group in stack)


def _class_end(pattern: str, i: int) -> int:
    """The index past the character class opening at ``i``: its first ``]`` not escaped
    and not first in it (a ``[`` inside is a character, as the ``regex`` module reads it
    by default); the pattern's end when it is not closed."""
    n = len(pattern)
    i += 1
    if i < n and pattern[i] == "^":
        i += 1
    if i < n and pattern[i] == "]":
        i += 1
    while i < n:
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return n


def _bound(pattern: str) -> int:
    """A bound that reads no structure: the pattern's length times every count in it."""
    size = len(pattern)
    for count in _COUNT.finditer(pattern):
        size *= max(int(count.group(1) or 0), int(count.group(2) or 0), 1)
        if size > MAX_EXPANDED:
            break
    return size


class FileStatus(Enum):
    """What searching one result file gave."""

    MATCHED = "matched"  # selected: a match (or, inverted, no match)
    ERROR_RESULT = "error_result"  # an `error` file: no response to search
    UNREADABLE = "unreadable"  # not a result file (bad JSON, wrong shape, I/O error)
    TIMED_OUT = "timed_out"  # the budget ran out before any hit
    # its path is not valid UTF-8: neither searched nor counted (no JSON string can hold it)
    BAD_NAME = "bad_name"


@dataclass(frozen=True)
class Hit:
    """One match in one file. ``offset`` is the 0-based character index of the match in
    the trimmed response (``length`` characters long); ``before``/``after`` are up to
    ``context`` characters around it. An inverted search has one hit per selected file:
    offset 0, ``match`` None, and the first ``2 x context`` characters as ``after``."""

    file: ResultFile
    offset: int
    match: str | None
    before: str
    after: str
    length: int

    @property
    def context(self) -> str:
        return self.before + (self.match or "") + self.after

    @property
    def cut_before(self) -> bool:
        return self.offset > len(self.before)

    @property
    def cut_after(self) -> bool:
        return self.offset + len(self.match or "") + len(self.after) < self.length


@dataclass(frozen=True)
class FileOutcome:
    """The search of one file. ``timed_out`` may be true on a MATCHED file: the budget ran
    out after the hits shown were found (later matches in that file are missing)."""

    file: ResultFile
    status: FileStatus
    hits: tuple[Hit, ...] = ()
    timed_out: bool = False
    message: str | None = None  # why a file is unreadable


@dataclass(frozen=True)
class SetupCount:
    total: int = 0
    matched: int = 0


@dataclass(frozen=True)
class SearchResult:
    """Counts and hits of a whole search, everything sorted by path.

    ``total`` counts every searched file (unreadable, error and timed-out ones included);
    ``paths`` are the selected files (the Rust tool's ``paths``); ``per_setup`` maps each
    setup seen to its searched and selected file counts.
    """

    total: int
    paths: tuple[str, ...]
    hits: tuple[Hit, ...]
    unreadable: tuple[str, ...]
    error_files: int
    timed_out: tuple[str, ...]
    per_setup: dict[str, SetupCount] = field(default_factory=dict)

    @property
    def matches(self) -> int:
        return len(self.paths)
