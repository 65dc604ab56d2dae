"""Canonical forms of titles, relations and prompts, compared by every similarity mode.

`normalize_text(s)`: Unicode NFKC, casefold (then NFKC again, since casefolding can leave
a string that NFKC would still change), ``_`` → space, whitespace runs → one space,
punctuation (Unicode category ``P*``) and whitespace stripped from both ends.

`normalize_title(s)`: `normalize_text`, then one trailing legal suffix removed (``ltd``,
``inc``, ``corp``, ``gmbh``, ``llc``, ``plc``, ``co., ltd``, each after a comma or a
space, optionally followed by a dot), then the ends stripped again:
``"Acme Co., Ltd."`` → ``"acme"``. A title that *is* a suffix (``"Inc."``) keeps it:
there is nothing before it to keep. Only one suffix goes, so ``"X Inc Ltd"`` → ``"x inc"``.

`normalize_relation(s)` is `normalize_text`: ``"based_on"`` → ``"based on"``.

Normalizing twice equals normalizing once for `normalize_text` and `normalize_relation`,
and for `normalize_title` unless what is left still ends with a suffix.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import regex

_ENDS = regex.compile(r"^[\p{P}\s]+|[\p{P}\s]+$")
_LEGAL_SUFFIX = regex.compile(r"(?:\s*,\s*|\s+)(?:co\.?,?\s*ltd|ltd|inc|corp|gmbh|llc|plc)\.?$")

# normalize_text strips trailing punctuation, so a suffix's optional dot is already gone.
_SUFFIX_ENDINGS = ("ltd", "inc", "corp", "gmbh", "llc", "plc")

_text_cache: dict[str, str] = {}
_title_cache: dict[str, str] = {}
_CACHE_LIMIT = 200_000


def normalize_text(text: str) -> str:
    """The shared canonical form (see the module docstring); ``""`` stays ``""``.

    Results are cached: titles and relations repeat across entries and files.
    """
    cached = _text_cache.get(text)
    if cached is not None:
        return cached
    value = normalize_prompt(text)
    if len(_text_cache) >= _CACHE_LIMIT:
        _text_cache.clear()
    _text_cache[text] = value
    return value


def normalize_prompt(text: str) -> str:
    """`normalize_text` without the cache, for long one-off strings such as prompts."""
    if text.isascii():
        value = text.lower()  # NFKC leaves ASCII alone; casefold of ASCII is lower()
    else:
        value = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    value = " ".join(value.replace("_", " ").split())
    if value and not (value[0].isalnum() and value[-1].isalnum()):
        value = _ENDS.sub("", value)
    return value


def normalize_relation(relation: str) -> str:
    """A relation's canonical form: `normalize_text`."""
    return normalize_text(relation)


def normalize_title(title: str) -> str:
    """An entity title's canonical form: `normalize_text` minus one trailing legal suffix."""
    cached = _title_cache.get(title)
    if cached is not None:
        return cached
    value = normalize_text(title)
    if value.endswith(_SUFFIX_ENDINGS):
        match = _LEGAL_SUFFIX.search(value)
        if match is not None and match.start() > 0:
            value = _ENDS.sub("", value[: match.start()])
    if len(_title_cache) >= _CACHE_LIMIT:
        _title_cache.clear()
    _title_cache[title] = value
    return value


def ends_with_legal_suffix(title: str) -> bool:
    """Whether a normalized title still ends with a legal suffix that one more pass would strip."""
    match = _LEGAL_SUFFIX.search(title)
    return match is not None and match.start() > 0


def relation_key(normalized_relation: str) -> str:
    """The key under which a relation is counted in reports: spaces back to ``_``."""
    return normalized_relation.replace(" ", "_")


def contains_words(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` bounded by non-alphanumerics or the ends.

    Both are expected normalized. An empty needle never occurs. Time is linear in the two
    lengths: after a few occurrences that are not bounded (``"aa"`` in ``"aaaa"``), the rest
    are found by one Knuth-Morris-Pratt pass instead of a search from each.
    """
    if not needle:
        return False
    size = len(needle)

    def bounded(start: int) -> bool:
        end = start + size
        return (start == 0 or not haystack[start - 1].isalnum()) and (
            end == len(haystack) or not haystack[end].isalnum()
        )

    start = haystack.find(needle)
    for _ in range(_FIND_TRIES):
        if start == -1:
            return False
        if bounded(start):
            return True
        start = haystack.find(needle, start + 1)
    return start != -1 and any(bounded(found) for found in _iter_occurrences(haystack, needle, start))


# Searches from each unbounded occurrence before the linear pass takes over: each costs up to
# one pass over the haystack, and a real text rarely holds a name glued to a word this often.
_FIND_TRIES = 16


def _iter_occurrences(haystack: str, needle: str, start: int) -> Iterator[int]:
    """The start of every occurrence of ``needle`` in ``haystack`` at or after ``start`` (KMP)."""
    size = len(needle)
    failure = [0] * size
    matched = 0
    for index in range(1, size):
        while matched and needle[index] != needle[matched]:
            matched = failure[matched - 1]
        if needle[index] == needle[matched]:
            matched += 1
        failure[index] = matched
    matched = 0
    for index in range(start, len(haystack)):
        char = haystack[index]
        while matched and char != needle[matched]:
            matched = failure[matched - 1]
        if char == needle[matched]:
            matched += 1
            if matched == size:
                yield index - size + 1
                matched = failure[matched - 1]
