"""Matching one result file: read it (:func:`kag.results.io.read_result_bytes`), take its
response (:func:`kag.results.codec.parse_response`), and match the pattern against the
response trimmed by the grading rule's own ``rust_trim`` (Rust's ``str::trim``), so that
`find` and `stats` see the same text.
"""

from __future__ import annotations

__all__ = ["literal_of"]

from dataclasses import dataclass

import regex

from kag.errors import InputError
from kag.grading.rule import rust_trim
from kag.grading.search.options import FileStatus
from kag.results.codec import parse_response
from kag.results.io import read_result_bytes
from kag.results.model import UnreadableResult

# What crosses the process boundary per file: None for the common "searched, no hit".
RawHit = tuple[int, str | None, str, str, int]
Raw = tuple[str, tuple[RawHit, ...], bool, str | None] | None


_METACHARACTERS = frozenset("\\.^$*+?{}[]|()")


def literal_of(pattern: str, ignore_case: bool = False) -> str | None:
    """The text a pattern matches when it is a plain literal (no metacharacter at all, so
    it matches exactly itself), else None. Such a pattern can be ruled out on a response
    with ``in``, which costs less than the regex engine's set-up with a timeout (one CPU
    clock syscall per call). Not with ``ignore_case`` (Unicode case folding), not empty."""
    if ignore_case or not pattern or not _METACHARACTERS.isdisjoint(pattern):
        return None
    return pattern


@dataclass(frozen=True)
class Matcher:
    pattern: regex.Pattern[str]
    invert: bool
    context: int
    hits_per_file: int | None
    timeout: float
    literal: str | None = None


def match_text(text: str, m: Matcher) -> tuple[list[RawHit], bool]:
    """Hits in ``text`` and whether the budget ran out. One ``search``, then, when it
    found something, one ``finditer`` per file: each one's ``timeout`` bounds the CPU time
    of its whole scan, not of each match."""
    hits: list[RawHit] = []
    if m.literal is not None and m.literal not in text:
        if m.invert:
            hits.append((0, None, "", text[: 2 * m.context], len(text)))
        return hits, False
    try:
        if m.invert:
            if m.pattern.search(text, timeout=m.timeout) is None:
                hits.append((0, None, "", text[: 2 * m.context], len(text)))
            return hits, False
        # Most responses hold no match: one ``search`` (no scanner object) rules them out
        # at a fraction of the cost of ``finditer``, which then runs only on the others.
        if m.pattern.search(text, timeout=m.timeout) is None:
            return hits, False
        c = m.context
        for found in m.pattern.finditer(text, timeout=m.timeout):
            start, end = found.span()
            hits.append(
                (start, text[start:end], text[max(0, start - c) : start], text[end : end + c], len(text))
            )
            if m.hits_per_file is not None and len(hits) >= m.hits_per_file:
                break
    except TimeoutError:
        return hits, True
    return hits, False


def search_path(path: str, m: Matcher) -> Raw:
    """What searching the file at ``path`` gives; None for the common "searched, no hit"."""
    try:
        data = read_result_bytes(path)
    except OSError as exc:
        return (FileStatus.UNREADABLE.value, (), False, exc.strerror or str(exc))
    except InputError as exc:  # too large, or not a regular file
        return (FileStatus.UNREADABLE.value, (), False, str(exc))
    try:
        response = parse_response(data)
    except UnreadableResult as exc:
        return (FileStatus.UNREADABLE.value, (), False, str(exc))
    if type(response) is not str:
        return (FileStatus.ERROR_RESULT.value, (), False, None)
    hits, timed_out = match_text(rust_trim(response), m)
    if hits:
        return (FileStatus.MATCHED.value, tuple(hits), timed_out, None)
    if timed_out:
        return (FileStatus.TIMED_OUT.value, (), True, None)
    return None
