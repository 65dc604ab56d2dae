"""Matching one result file: read it (:func:`kag.results.io.read_result_bytes`), take its
response (:func:`kag.results.codec.parse_response`), and match the pattern against the
response trimmed by the grading rule's own ``rust_trim`` (Rust's ``str::trim``), so that
`find` and `stats` see the same text.
"""

from __future__ import annotations

__all__ = ["alternatives_of", "exact_of", "literal_of"]

import string
from dataclasses import dataclass

import regex

from kag.errors import InputError
from kag.grading.rule import rust_trim
from kag.grading.search.options import FileStatus
from kag.results.codec import parse_response, simd_response
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


# Escaped, these stand for themselves (an escaped letter or digit is a class, a
# reference or a code point: not a literal).
_ESCAPED_LITERALS = frozenset(string.punctuation)
_ANCHORS = frozenset("^$")


def alternatives_of(pattern: str, ignore_case: bool = False) -> tuple[str, ...] | None:
    """The texts of a pattern made of plain literals between ``|`` (each may be anchored
    by ``^`` and ``$`` and hold escaped punctuation such as ``\\.``), else None: every
    match of such a pattern contains one of them (``^C$`` gives ``("C",)``, ``B|C``
    gives ``("B", "C")``), so a response holding none is ruled out with ``in``, without
    the regex engine's set-up with a timeout (one CPU clock syscall per call).

    Anchors match no character, so what a branch matches is exactly its literal text.
    Anything else (a group, a class, a quantifier, an inline flag, an escaped letter,
    an empty branch, ``ignore_case``) gives None: the engine alone decides."""
    if ignore_case or not pattern:
        return None
    tokens = _tokens(pattern)
    if tokens is None:
        return None
    texts: list[str] = []
    chars: list[str] = []
    for char, escaped in tokens:
        if escaped:
            chars.append(char)
        elif char == "|":
            if not chars:
                return None
            texts.append("".join(chars))
            chars = []
        elif char in _ANCHORS:
            continue
        elif char in _METACHARACTERS:
            return None
        else:
            chars.append(char)
    if not chars:
        return None
    return (*texts, "".join(chars))


def _tokens(pattern: str) -> list[tuple[str, bool]] | None:
    """The characters of ``pattern``, each with whether a backslash escaped it; None when
    a backslash escapes anything but punctuation (a class, a reference, a code point) or
    ends the pattern."""
    tokens: list[tuple[str, bool]] = []
    escaped = False
    for char in pattern:
        if escaped:
            if char not in _ESCAPED_LITERALS:
                return None
            tokens.append((char, True))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            tokens.append((char, False))
    return None if escaped else tokens


def exact_of(pattern: str, ignore_case: bool = False) -> str | None:
    """The text of a pattern that is one plain literal between ``^`` and ``$`` (``^C$``
    gives ``"C"``; escaped punctuation stands for itself), else None. Such a pattern
    matches a text exactly when the text is that literal, or that literal and one final
    ``\n`` (where ``$`` also matches), so it is decided with ``==``, without the regex
    engine's set-up with a timeout. None with ``ignore_case``, for an empty literal, and for
    any other anchor or metacharacter (``^a|b$``, ``^a^b$``)."""
    if ignore_case or len(pattern) < 3 or pattern[0] != "^" or pattern[-1] != "$":
        return None
    # A final $ escaped (``^a\\$``) is a literal dollar, not an anchor: the body ends in a
    # lone backslash, and _tokens gives None.
    tokens = _tokens(pattern[1:-1])
    if tokens is None or any(not escaped and char in _METACHARACTERS for char, escaped in tokens):
        return None
    return "".join(char for char, _ in tokens)


@dataclass(frozen=True)
class Matcher:
    """How one response is matched. ``literal``: a text every match contains;
    ``alternatives``: texts one of which every match contains (:func:`alternatives_of`).
    Either rules a response out before the regex engine runs. ``exact``: the literal the
    whole pattern stands for between its anchors (:func:`exact_of`), which decides every
    response without the engine."""

    pattern: regex.Pattern[str]
    invert: bool
    context: int
    hits_per_file: int | None
    timeout: float
    literal: str | None = None
    alternatives: tuple[str, ...] | None = None
    exact: str | None = None

    def rules_out(self, text: str) -> bool:
        """Whether ``text`` certainly holds no match, told without the regex engine."""
        if self.exact is not None:
            return text != self.exact and text != self.exact + "\n"
        if self.literal is not None and self.literal not in text:
            return True
        if self.alternatives is None:
            return False
        for alternative in self.alternatives:  # a loop: no generator set up per response
            if alternative in text:
                return False
        return True


def match_text(text: str, m: Matcher) -> tuple[list[RawHit], bool]:
    """Hits in ``text`` and whether the budget ran out. One ``search``, then, when it
    found something, one ``finditer`` per file: each one's ``timeout`` bounds the CPU time
    of its whole scan, not of each match."""
    hits: list[RawHit] = []
    if m.rules_out(text):
        if m.invert:
            hits.append((0, None, "", text[: 2 * m.context], len(text)))
        return hits, False
    if m.exact is not None:  # the whole text, or all of it but a final newline
        if not m.invert:
            end = len(m.exact)
            hits.append((0, m.exact, "", text[end : end + m.context], len(text)))
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


def search_path(path: str, m: Matcher, dir_fd: int | None = None) -> Raw:
    """What searching the file at ``path`` (relative to the open folder ``dir_fd`` when
    given) gives; None for the common "searched, no hit"."""
    try:
        data = read_result_bytes(path, dir_fd)
    except OSError as exc:
        return (FileStatus.UNREADABLE.value, (), False, exc.strerror or str(exc))
    except InputError as exc:  # too large, or not a regular file
        return (FileStatus.UNREADABLE.value, (), False, str(exc))
    # The common shapes in one call; parse_response (which asks simd_response first) for the rest.
    response = simd_response(data)
    if response is None:
        try:
            response = parse_response(data)
        except UnreadableResult as exc:
            return (FileStatus.UNREADABLE.value, (), False, str(exc))
    if type(response) is not str:
        return (FileStatus.ERROR_RESULT.value, (), False, None)
    text = rust_trim(response)
    if not m.invert and m.rules_out(text):  # most responses: no hit, nothing to build
        return None
    hits, timed_out = match_text(text, m)
    if hits:
        return (FileStatus.MATCHED.value, tuple(hits), timed_out, None)
    if timed_out:
        return (FileStatus.TIMED_OUT.value, (), True, None)
    return None
