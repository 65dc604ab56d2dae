"""The search of a name in a retrieval text's *spaced* form (lowered, and every separator a
space, every character at its place), one literal search per occurrence: whether it occurs
bounded by non-alphanumerics, and where it may be the value of a node's name line.

When no two separators follow each other anywhere in a text, a normalized name occurs in the
normalized text exactly where it occurs as it is in the spaced form bounded by
non-alphanumerics (a normalized name holds single spaces; every run of separators is one
character, which the spaced form makes a space); a one-word name so in any text.
:class:`~kag.grading.retrieval_text.RetrievalText` decides when these searches answer.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Literal

from kag.grading.triplets.normalize import normalize_title
from kag.results.graph_text import Find, names_its_node, property_line_at, value_text

# What `normalize_prompt` collapses into one space: the ASCII whitespace of `str.split`, and `_`.
SEPARATORS = "[ \t\n\r\x0b\x0c\x1c-\x1f_]"
_SEPARATOR_BYTES = frozenset(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f_")
# ASCII upper case to lower case and every separator to a space, every other byte as it is.
SPACED_TABLE = bytes(
    0x20 if c in _SEPARATOR_BYTES else c + 32 if 0x41 <= c <= 0x5A else c for c in range(256)
)
# What normalizing a name may strip before its first word (punctuation, whitespace but the
# newline that ends a line).
STRIPPED = frozenset(
    c for c in map(chr, range(128)) if (unicodedata.category(c)[0] == "P" or c.isspace()) and c != "\n"
)
# The first letters of each legal suffix a name may end with (kag.grading.triplets.normalize),
# lowered: "co" for "co., ltd" and "corp".
_SUFFIX_HEADS = ("co", "inc", "ltd", "llc", "gmbh", "plc")
# Occurrences of a name read before the general search takes over.
_TRIES = 64

# How far a scan reads: to the first bounded occurrence, to one more possible value, to the end.
BOUNDED, VALUE, ALL = 0, 1, 2
# What :func:`name_facts` found: no bounded occurrence; one, no node so named; a node so named.
ABSENT, OCCURS, NAMES = 0, 1, 2
# The characters `str.isalnum` takes in a spaced text (ASCII, lowered).
_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")


class Scan:
    """The occurrences of one name in a spaced text, read in order and only as far as asked:
    whether one is bounded by non-alphanumerics (the name is in the normalized text), and the
    starts of the bounded ones that may be a name line's value (:func:`may_be_value_at`).
    Past ``_TRIES`` occurrences it gives up, and the general search answers."""

    __slots__ = ("at", "bounded", "left", "values")

    def __init__(self) -> None:
        self.at = 0  # where the search goes on; -1 past the last occurrence
        self.bounded = False
        self.values: list[int] = []
        self.left = _TRIES  # occurrences that may still be read; -1 once given up

    def read(self, name: str, spaced: str, text: str, find: Find, until: int) -> bool:
        """Read on until ``until`` (``BOUNDED``: a bounded occurrence was found; ``VALUE``:
        one more possible value; ``ALL``: the last occurrence); False when it gave up."""
        at, left, values, size, length = self.at, self.left, self.values, len(name), len(text)
        wanted = len(values) + 1
        while at != -1:
            start = find(spaced, name, at)
            if start == -1:
                at = -1
                break
            if not left:
                self.left = -1
                return False
            left -= 1
            at = start + 1
            end = start + size
            if (start and spaced[start - 1].isalnum()) or (end < length and spaced[end].isalnum()):
                continue
            self.bounded = True
            # A word before or after it, past one space (and no legal suffix after): not a
            # value, as `may_be_value_at` would find it after more steps.
            if not (
                (start > 1 and text[start - 1] == " " and spaced[start - 2].isalnum())
                or (
                    end + 1 < length
                    and text[end] == " "
                    and spaced[end + 1].isalnum()
                    and not spaced.startswith(_SUFFIX_HEADS, end + 1)
                )
            ) and may_be_value_at(text, spaced, start, end):
                values.append(start)
            if until == BOUNDED or (until == VALUE and len(values) == wanted):
                break
        self.at, self.left = at, left
        return True


def name_facts(name: str, spaced: str, text: str, name_keys: tuple[str, ...], find: Find) -> int:
    """Whether ``name`` occurs bounded by non-alphanumerics in a spaced text, and whether it
    names a node (:func:`scanned_any`), in one reading of its occurrences from the start that
    stops at the first line naming its node: ``NAMES`` (it names one; it then occurs bounded),
    ``OCCURS`` or ``ABSENT``; -1 past ``_TRIES`` occurrences (the general search answers)."""
    start = find(spaced, name, 0)
    if start == -1:
        return ABSENT
    size, length, found, alnum = len(name), len(text), ABSENT, _ALNUM
    for _ in range(_TRIES):
        end = start + size
        if not ((start and spaced[start - 1] in alnum) or (end < length and spaced[end] in alnum)):
            found = OCCURS
            # The first look of `Scan.read`: a word before it, or after it and not a legal
            # suffix, past one space, and it is not a value.
            if not (
                (start > 1 and text[start - 1] == " " and spaced[start - 2] in alnum)
                or (
                    end + 1 < length
                    and text[end] == " "
                    and spaced[end + 1] in alnum
                    and not spaced.startswith(_SUFFIX_HEADS, end + 1)
                )
            ) and _value_names_its_node(text, spaced, start, end, name, name_keys, find):
                return NAMES
        start = find(spaced, name, start + 1)
        if start == -1:
            return found
    return -1


def _value_names_its_node(
    text: str, spaced: str, start: int, end: int, name: str, name_keys: tuple[str, ...], find: Find
) -> bool:
    """Whether the bounded occurrence of ``name`` from ``start`` to ``end`` is the value of
    a name line that names its node (:func:`may_be_value_at`, :func:`naming_line`,
    :func:`~kag.results.graph_text.names_its_node`)."""
    quoted: tuple[int, str, str] | None | Literal[False] = False
    if (
        start >= 5
        and text.startswith('")', end)
        and text.startswith(']->("', start - 5)
        and _bracketless(name_keys)
    ):
        quoted = quoted_naming_line(text, start, end, name, name_keys)
    if quoted is False:
        if not may_be_value_at(text, spaced, start, end):
            return False
        line = naming_line(text, start, name, name_keys)
    else:
        line = quoted
    return line is not None and names_its_node(text, *line, name_keys, find)


@functools.cache
def _bracketless(name_keys: tuple[str, ...]) -> bool:
    """Whether no key holds a ``]``: then a name line's key is the text between its node's
    ``)-[`` and its ``]->(``, whichever key the line's expression tries first."""
    return not any("]" in key for key in name_keys)


def quoted_naming_line(
    text: str, start: int, end: int, name: str, name_keys: tuple[str, ...]
) -> tuple[int, str, str] | None | Literal[False]:
    """:func:`naming_line` of an occurrence from ``start`` to ``end`` of a line that reads
    ``(node)-[key]->("`` before it and ``")`` after it, up to a newline or the text's end, as
    name lines mostly are, without the line's expression; False when the line has another
    shape (:func:`naming_line` answers). No name line holds a backslash, and no key a ``]``."""
    line_end = end + 2
    if (line_end < len(text) and text[line_end] != "\n") or text.find("\n", start, end) != -1:
        return False
    line_start = text.rfind("\n", 0, start) + 1
    close = text.find(")", line_start)
    if text[line_start] != "(" or close + 3 > start - 5 or not text.startswith(")-[", close):
        return False
    key = text[close + 3 : start - 5]
    if key not in name_keys:
        return False
    # The line's expression reads node, key and the raw value '"…"', whose text is text[start:end].
    return (
        (line_start, text[line_start + 1 : close], key) if normalize_title(text[start:end]) == name else None
    )


def scanned_any(
    scan: Scan, name: str, spaced: str, text: str, name_keys: tuple[str, ...], find: Find
) -> bool | None:
    """Whether some node's name normalizes to ``name``, from its scan, up to the first line
    that names its node; None when the scan gave up."""
    values, checked = scan.values, 0
    while True:
        while checked < len(values):
            line = naming_line(text, values[checked], name, name_keys)
            checked += 1
            if line is not None and names_its_node(text, *line, name_keys, find):
                return True
        if scan.at == -1:
            return False
        if not scan.read(name, spaced, text, find, VALUE):
            return None


def scanned_nodes(
    scan: Scan, name: str, spaced: str, text: str, name_keys: tuple[str, ...], find: Find
) -> frozenset[str] | None:
    """The ids of the nodes whose name normalizes to ``name``, from its scan; None when it
    gave up."""
    if not scan.read(name, spaced, text, find, ALL):
        return None
    lines = (naming_line(text, at, name, name_keys) for at in scan.values)
    return frozenset(
        line[1] for line in lines if line is not None and names_its_node(text, *line, name_keys, find)
    )


def may_be_value_at(text: str, lowered: str, at: int, end: int) -> bool:
    """Whether only what normalizing strips lies between a line's ``]->`` and ``at``, and
    from ``end`` up to the line's end, the start of a legal suffix or the text's end
    (``lowered``: the text lowered, or spaced, every character at its place)."""
    before = at - 1
    while before >= 0 and text[before] in STRIPPED:
        before -= 1
    if before < 2 or not text.startswith("]->", before - 2):
        return False
    after, length = end, len(text)
    while after < length and text[after] in STRIPPED:
        after += 1
    return after == length or text[after] == "\n" or lowered.startswith(_SUFFIX_HEADS, after)


def naming_line(text: str, at: int, name: str, name_keys: tuple[str, ...]) -> tuple[int, str, str] | None:
    """(line start, node, key) of the line through ``at`` when it is a name line whose value
    normalizes to ``name``, else None."""
    start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line = property_line_at(text, start, len(text) if line_end == -1 else line_end, name_keys)
    if line is None:
        return None
    node, key, raw = line.groups()
    return (start, node, key) if normalize_title(value_text(raw)) == name else None
