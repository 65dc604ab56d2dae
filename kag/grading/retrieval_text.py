"""A result file's retrieval text, prepared once for both evidence measures: whether a gold
name occurs in it as whole words (the ``evidence`` block) and whether it names a node of its
``FormalTriplet`` lines (``retrieval_quality`` in ``exact`` mode).

The answers are those of the plain formulas, which normalize the whole text
(:func:`normalized_body`) and read every name line
(:func:`kag.results.graph_text.formal_names`); :class:`RetrievalText` finds them with one
search per name where the text allows it, and only as far as a question needs.
"""

from __future__ import annotations

import functools
import re
from types import ModuleType

from kag.grading.retrieval_scan import (
    ABSENT,
    BOUNDED,
    NAMES,
    SEPARATORS,
    SPACED_TABLE,
    STRIPPED,
    Scan,
    may_be_value_at,
    name_facts,
    naming_line,
    scanned_any,
    scanned_nodes,
)
from kag.grading.triplets.normalize import contains_words, normalize_prompt, normalize_title
from kag.results.graph_text import Find, formal_names, formal_property_at, names_its_node

# The first letters of the legal suffixes a name may end with (kag.grading.triplets.normalize).
_SUFFIX_STARTS = frozenset("cilgpCILGP")
# The same two sets as classes of a regular expression over a lowered text.
_STRIPPED_CLASS = "[" + "".join(re.escape(c) for c in sorted(STRIPPED)) + "]"
_LINE_END_CLASS = "[\\n" + "".join(sorted({c.lower() for c in _SUFFIX_STARTS})) + "]"
# What may lie before and after a name line's value, as :func:`_name_line_at` checks it, for
# a first look at an occurrence of a name in a lowered text (one expression for every name,
# compiled once): ``]->`` and up to ``_RUN`` stripped characters (``("`` is two) or more than
# ``_RUN`` of them (the rest checked there) before it; stripped characters up to a newline,
# a legal suffix's first letter or the text's end after it.
_RUN = 3
_BEFORE_VALUE = re.compile(rf"(?:\]->{_STRIPPED_CLASS}{{0,{_RUN}}}|{_STRIPPED_CLASS}{{{_RUN + 1}}})\Z")
_AFTER_VALUE = re.compile(rf"{_STRIPPED_CLASS}*+(?:{_LINE_END_CLASS}|\Z)")
# The longest name searched by one regular expression: a search may try a match from every
# offset of the text, each as long as the name; a longer one is left to the plain formula.
_LONGEST = 100
# Occurrences of a name tried, when its first word is not alphanumeric (it may overlap itself
# at every character), before the plain formula takes over; and naming lines checked one by
# one (each by a search from the text's start) before every name line is read instead.
_TRIES = 64


# StringZilla (the ``fast`` extra), when installed: its SIMD byte translation lowers an ASCII
# text and its SIMD substring search finds a name's first word, several times faster than
# `str.lower` and a regular expression's own scan. The answers are the same either way.
_NOT_LOADED = ModuleType("not loaded")
_stringzilla: ModuleType | None = _NOT_LOADED
# ASCII upper case to lower case, every other byte as it is.
_LOWER_TABLE = bytes(c + 32 if 0x41 <= c <= 0x5A else c for c in range(256))
# Occurrences of a first word at which StringZilla's search tries the expression, before the
# expression's own scan goes on (a word met that often is faster found so).
_CANDIDATES = 8


def accelerator() -> ModuleType | None:
    """StringZilla, imported on first use; None when it is not installed (the standard
    library then answers alone)."""
    global _stringzilla
    if _stringzilla is _NOT_LOADED:
        try:
            import stringzilla
        except ImportError:
            _stringzilla = None
        else:
            _stringzilla = stringzilla
    return _stringzilla


def _lowered(text: str, sz: ModuleType | None) -> str:
    """``text.lower()`` of an ASCII ``text``."""
    return text.lower() if sz is None else str(sz.translate(text, _LOWER_TABLE))


def _search(
    pattern: re.Pattern[str], first: str, lowered: str, at: int, sz: ModuleType | None
) -> re.Match[str] | None:
    """``pattern.search(lowered, at)`` for a ``pattern`` whose every match starts with the
    literal ``first``: with StringZilla, the pattern is tried at the next occurrences of
    ``first`` only (found by its search), and past ``_CANDIDATES`` of them searches on itself."""
    if sz is None:
        return pattern.search(lowered, at)
    find, match = sz.find, pattern.match
    for _ in range(_CANDIDATES):
        at = find(lowered, first, at)
        if at == -1:
            return None
        found = match(lowered, at)
        if found is not None:
            return found
        at += 1
    return pattern.search(lowered, at)


def normalized_body(text: str) -> str:
    """`normalize_prompt` of ``text`` except that punctuation at its two ends may stay.

    Stripping the ends scans the whole of a long text for a trailing punctuation run
    (~1.4 ms on a 16 kB KAG context, 13 times the rest). It cannot change what
    `contains_words` finds: a normalized name starts and ends with a character that is
    neither punctuation nor space, so it never lies in a stripped end, and the stripped
    characters are not alphanumeric, so they bound a word as the string's end does.
    The ``x`` sentinels make both ends alphanumeric, which lets `normalize_prompt` skip
    the strip; they are cut off again afterwards.
    """
    return normalize_prompt(f"x {text} x")[2:-2]


@functools.lru_cache(maxsize=4096)
def _name_search(name: str) -> tuple[re.Pattern[str], int]:
    """The search of ``name`` (normalized, ASCII, non-empty) in a lowered ASCII text: its
    words in order, each next one after a run of separators, bounded on both sides (a lowered
    text has no upper-case letter); and how far past a start the next start can be (past the
    first word when it is alphanumeric: a start inside it or right after it follows one of
    its letters). The left bound is a look-behind *after* the first word, so that the search
    still skips ahead to each occurrence of the first word as a literal."""
    first, *rest = name.split(" ")
    head = re.escape(first)
    tail = "".join(f"{SEPARATORS}++{re.escape(word)}" for word in rest)
    pattern = re.compile(f"{head}(?<![0-9a-z]{head}){tail}(?![0-9a-z])")
    return pattern, len(first) + 1 if first.isalnum() else 1


_SEPARATOR_RUN = re.compile(f"{SEPARATORS}+")


def _occurrence_end(lowered: str, start: int, first: str, rest: list[str]) -> int:
    """Where the match of :func:`_name_search` (words ``first`` and ``rest``) at ``start`` of
    a lowered ASCII text ends, ``first`` being there; -1 when it does not match there. The
    same reading without compiling an expression for the name."""
    if start and lowered[start - 1].isalnum():
        return -1
    at = start + len(first)
    for word in rest:
        run = _SEPARATOR_RUN.match(lowered, at)
        if run is None:
            return -1
        at = run.end()
        if not lowered.startswith(word, at):
            return -1
        at += len(word)
    return -1 if at < len(lowered) and lowered[at].isalnum() else at


class _Starts:
    """The starts of the occurrences of one name in a lowered ASCII text (see
    :class:`RetrievalText`), found in order and only as far as asked: at each occurrence of
    its first word, read there (:func:`_occurrence_end`), until ``_CANDIDATES`` of them are
    not the name; then by the name's own expression (:func:`_name_search`, compiled once
    per name: most names never need it)."""

    __slots__ = ("_at", "_first", "_misses", "_name", "_pattern", "_rest", "_skip", "_tries", "ends", "found")

    def __init__(self, name: str) -> None:
        self.found: list[int] = []
        self.ends: list[int] = []  # where each occurrence ends (past runs of separators)
        if not name or not name.isascii():
            self._at = -1  # occurs nowhere in an ASCII text
            return
        self._at = 0
        if len(name) > _LONGEST:
            self._tries = 0  # the plain formula answers
            return
        self._name = name
        self._first, *self._rest = name.split(" ")
        self._pattern: re.Pattern[str] | None = None
        self._misses = 0
        self._skip = len(self._first) + 1 if self._first.isalnum() else 1
        self._tries = -1 if self._skip > 1 else _TRIES

    def _next(self, lowered: str, at: int, sz: ModuleType | None) -> tuple[int, int] | None:
        """The next occurrence (start, end) at or after ``at``, None when there is none."""
        if self._pattern is None:
            find, first = str.find if sz is None else sz.find, self._first
            while self._misses < _CANDIDATES:
                start = find(lowered, first, at)
                if start == -1:
                    return None
                end = _occurrence_end(lowered, start, first, self._rest)
                if end != -1:
                    return start, end
                self._misses += 1
                at = start + 1
            self._pattern = _name_search(self._name)[0]
        match = _search(self._pattern, self._first, lowered, at, sz)
        return None if match is None else match.span()

    def upto(self, lowered: str, count: int, sz: ModuleType | None) -> bool | None:
        """Search until ``count`` starts are found or none is left: whether ``count`` were;
        None when the name is too long to search so, or its first word is not alphanumeric
        and occurs too often to try each."""
        found, at = self.found, self._at
        while len(found) < count and at != -1:
            if self._tries == 0:
                return None
            self._tries -= 1
            occurrence = self._next(lowered, at, sz)
            if occurrence is None:
                at = -1
                break
            start, end = occurrence
            found.append(start)
            self.ends.append(end)
            at = start + self._skip
        self._at = at
        return len(found) >= count


class RetrievalText:
    """A retrieval text and what its searches have found so far.

    An ASCII text is searched in its *lowered* form (``text.lower()``, every character at its
    place), the normalized text never built: a normalized name occurs in the normalized text,
    bounded by non-alphanumerics, exactly where its first word occurs in the lowered form
    bounded on the left, each next word follows a run of separators (whitespace or ``_``,
    which the normalized form collapses into one space), and the last ends bounded on the
    right: one regular expression per name (:func:`_name_search`). Any other text is
    searched in its normalized form.

    With StringZilla, an ASCII text is first searched in its *spaced* form (lowered, and
    every separator a space, every character at its place): when no two separators follow
    each other anywhere in it (a *plain* text), a normalized name occurs in the normalized
    text exactly where it occurs as it is in the spaced form bounded by non-alphanumerics,
    and so does a one-word name in any text: one search per occurrence, no expression
    (:class:`~kag.grading.retrieval_scan.Scan`). The lowered form is made only for the other texts and names.

    Names of nodes (``exact`` mode): when a node's name normalizes to a gold name, the gold
    name occurs so in the node's name line, with only what normalizing strips between the
    line's ``]->(`` and it, and between it and the line's end or a legal suffix; provided the
    text is ASCII and the value of no name line holds a backslash (a JSON escape decodes to
    anything). So only the lines where the gold name occurs so are read
    (:meth:`nodes_named`; a first look, :func:`_may_be_a_value`, passes over most other
    occurrences), and whether some node is so named stops at the first
    (:meth:`names_a_node`); other texts read every name line.
    """

    __slots__ = (
        "_any",
        "_ascii",
        "_bounded",
        "_keys",
        "_lowered",
        "_node_names",
        "_normalized",
        "_plain",
        "_scans",
        "_searchable",
        "_spaced",
        "_starts",
        "_sz",
        "find",
        "text",
    )

    def __init__(self, text: str) -> None:
        self.text = text
        self._ascii = ascii = text.isascii()
        self._sz = sz = _stringzilla if _stringzilla is not _NOT_LOADED else accelerator()
        #: The substring search of this text, as ``str.find`` answers it: StringZilla's when
        #: installed and the text is ASCII (it counts a str's offsets in UTF-8 bytes, which
        #: are its characters only then), else ``str.find``.
        self.find: Find
        if ascii and sz is not None:
            self.find = find = sz.find
            self._spaced = spaced = str(sz.translate(text, SPACED_TABLE))
            self._plain = bool(spaced) and find(spaced, "  ") == -1
        else:
            self.find, self._spaced, self._plain = str.find, "", False
        self._lowered: str | None = None if ascii else ""
        self._normalized: str | None = None
        self._starts: dict[str, _Starts] = {}
        self._scans: dict[str, Scan] = {}
        self._node_names: _NodeNames | None = None
        # The name keys of the first lookup of a node's name, whether those lookups read
        # the scans, and what they found.
        self._keys: tuple[str, ...] | None = None
        self._searchable = False
        self._any: dict[str, bool] = {}
        # Whether a name occurs bounded, as the reading of `names_a_node` found it.
        self._bounded: dict[str, bool] = {}

    def _normalized_form(self) -> str:
        if self._normalized is None:
            self._normalized = normalized_body(self.text)
        return self._normalized

    def contains(self, name: str) -> bool:
        """Whether ``name`` (normalized) occurs in the normalized text bounded by
        non-alphanumerics or the ends: ``contains_words(normalized_body(text), name)``."""
        found = self._bounded.get(name)
        if found is not None:
            return found
        if self._ascii:
            scan = self._scan_of(name)
            if scan is not None and (
                scan.bounded or scan.read(name, self._spaced, self.text, self.find, BOUNDED)
            ):
                return scan.bounded
            if self._lowered is None:
                self._lowered = _lowered(self.text, self._sz)
            found = _starts_of(self._starts, name).upto(self._lowered, 1, self._sz)
            if found is not None:
                return found
        return contains_words(self._normalized_form(), name)

    def nodes_named(self, name: str, name_keys: tuple[str, ...]) -> frozenset[str]:
        """The ids of the nodes of the text's ``FormalTriplet`` lines whose name normalizes to
        ``name`` (normalized; :func:`~kag.results.graph_text.formal_names` with
        ``name_keys``). A text is asked with one ``name_keys``: later calls reuse the first's."""
        scan = self._scan(name, name_keys)
        found = None
        if scan is not None:
            found = scanned_nodes(scan, name, self._spaced, self.text, name_keys, self.find)
        if found is None:
            found = self._names(name_keys).nodes(name)
        self._any[name] = bool(found)
        return found

    def names_a_node(self, name: str, name_keys: tuple[str, ...]) -> bool:
        """Whether ``name`` (normalized) is the normalized name of a node (``""`` is when
        some node's name normalizes to it): :meth:`nodes_named` is not empty, found without
        looking past the first such node where the text allows it."""
        found = self._any.get(name)
        if found is not None:
            return found
        if self._keys is None:
            self._first_keys(name_keys)
        if self._searchable and name not in self._scans and self._literal(name):
            # Sought as it is (`_scan_of`), not read yet: one reading answers both this and `contains`.
            facts = name_facts(name, self._spaced, self.text, name_keys, self.find)
            if facts < 0:
                found = self._names(name_keys).any(name)
            else:
                self._bounded[name] = facts != ABSENT
                found = facts == NAMES
        else:
            found = self._named_by_scan(name, name_keys)
        self._any[name] = found
        return found

    def _named_by_scan(self, name: str, name_keys: tuple[str, ...]) -> bool:
        """:meth:`names_a_node` from the scan of ``name`` begun by :meth:`contains`, else by
        the general search."""
        scan = self._scan(name, name_keys)
        if scan is not None:
            found = scanned_any(scan, name, self._spaced, self.text, name_keys, self.find)
            if found is not None:
                return found
        return self._names(name_keys).any(name)

    def _first_keys(self, name_keys: tuple[str, ...]) -> None:
        """Take the name keys of the first lookup of a node's name, and whether those lookups
        read the scans."""
        self._keys = name_keys
        self._searchable = (
            bool(self._spaced)
            and "\n" not in "".join(name_keys)
            and not _escaped_name_line(self.text, name_keys)
        )

    def _scan(self, name: str, name_keys: tuple[str, ...]) -> Scan | None:
        """The scan of ``name`` when the names of nodes are read from the scans (the first
        lookup's ``name_keys`` decide, and only they are ever given)."""
        if self._keys is None:
            self._first_keys(name_keys)
        if not self._searchable:
            return None
        scan = self._scans.get(name)
        if scan is None:
            return self._scan_of(name)
        return scan if scan.left >= 0 else None

    def _literal(self, name: str) -> bool:
        """Whether ``name`` is sought as it is in the spaced text (there is one): a short
        ASCII name of one word, or of several in a plain text."""
        return bool(name) and len(name) <= _LONGEST and name.isascii() and (self._plain or " " not in name)

    def _scan_of(self, name: str) -> Scan | None:
        """The scan of ``name``, begun if need be; None when the general search answers (no
        spaced text, a name of several words and a text that is not plain, an empty,
        non-ASCII or very long name, a scan given up)."""
        scan = self._scans.get(name)
        if scan is None:
            if not (self._spaced and self._literal(name)):
                return None
            scan = self._scans[name] = Scan()
        return None if scan.left < 0 else scan

    def _names(self, name_keys: tuple[str, ...]) -> _NodeNames:
        """The general lookups of the names of nodes."""
        if self._node_names is None:
            self._node_names = _NodeNames(self, name_keys)
        return self._node_names


def _starts_of(starts: dict[str, _Starts], name: str) -> _Starts:
    """The search of ``name`` in ``starts``, the searches of one text, begun if need be."""
    found = starts.get(name)
    if found is None:
        found = starts[name] = _Starts(name)
    return found


class _NodeNames:
    """The node-name lookups of one text: in the lines where the name occurs, when the text
    can be searched so, else among every node's normalized name (read on first need).
    It keeps the text's parts, not the text itself: no cycle of references, so that both
    are freed as soon as the file is graded, not by the garbage collector."""

    __slots__ = (
        "_any",
        "_every",
        "_find",
        "_found",
        "_keys",
        "_lines",
        "_lowered",
        "_searchable",
        "_starts",
        "_sz",
        "_text",
    )

    def __init__(self, text: RetrievalText, name_keys: tuple[str, ...]) -> None:
        self._text = text.text
        self._lowered = text._lowered  # made here too when the general search needs it
        self._starts = text._starts
        self._sz = text._sz
        self._find = text.find
        self._keys = name_keys
        self._searchable = (
            text._ascii
            and not any("\n" in key for key in name_keys)
            and not _escaped_name_line(text.text, name_keys)
        )
        self._every: dict[str, set[str]] | None = None
        self._found: dict[str, frozenset[str]] = {}
        self._any: dict[str, bool] = {}
        # Per name: the naming lines (line start, node, key) of the starts checked so far.
        self._lines: dict[str, tuple[int, list[tuple[int, str, str]]]] = {}

    def _every_name(self, name: str) -> frozenset[str]:
        if self._every is None:
            self._every = {}
            for node, value in formal_names(self._text, self._keys).items():
                if value:
                    self._every.setdefault(normalize_title(value), set()).add(node)
        return frozenset(self._every.get(name, ()))

    def _naming_lines(self, name: str, count: int) -> list[tuple[int, str, str]] | None:
        """The lines where ``name`` occurs as a name line's value, checked in order until
        ``count`` are found or none is left; None when the text cannot be searched so, or
        more than ``_TRIES`` such lines are asked for (each would be checked to be its
        node's first by a search from the text's start: reading every line is the linear way)."""
        if not (name and self._searchable):
            return None
        starts = _starts_of(self._starts, name)
        if self._lowered is None:
            self._lowered = _lowered(self._text, self._sz)
        lowered = self._lowered
        checked, lines = self._lines.get(name, (0, []))
        while len(lines) < count:
            if starts.upto(lowered, checked + 1, self._sz) is None:
                return None
            if len(starts.found) <= checked:
                break
            start, end = starts.found[checked], starts.ends[checked]
            checked += 1
            if not _may_be_a_value(lowered, start, end):
                continue
            line = _name_line_at(self._text, lowered, start, end, name, self._keys)
            if line is not None:
                if len(lines) == _TRIES:
                    return None
                lines.append(line)
        self._lines[name] = (checked, lines)
        return lines

    def nodes(self, name: str) -> frozenset[str]:
        """The ids of the nodes whose name normalizes to ``name``."""
        found = self._found.get(name)
        if found is None:
            lines = self._naming_lines(name, _TRIES + 1)
            if lines is None:
                found = self._every_name(name)
            else:
                text, keys = self._text, self._keys
                found = frozenset(
                    node
                    for start, node, key in lines
                    if names_its_node(text, start, node, key, keys, self._find)
                )
            self._found[name] = found
            self._any[name] = bool(found)
        return found

    def any(self, name: str) -> bool:
        """Whether some node's name normalizes to ``name``: the naming lines are checked one
        by one, up to the first that names its node."""
        found = self._any.get(name)
        if found is None:
            text, keys = self._text, self._keys
            found = False
            for count in range(1, _TRIES + 1):
                lines = self._naming_lines(name, count)
                if lines is None:
                    found = bool(self.nodes(name))
                    break
                if len(lines) < count:
                    break
                start, node, key = lines[-1]
                if names_its_node(text, start, node, key, keys, self._find):
                    found = True
                    break
            else:
                found = bool(self.nodes(name))
            self._any[name] = found
        return found


def _escaped_name_line(text: str, name_keys: tuple[str, ...]) -> bool:
    """Whether a name line of ``text`` holds a backslash (read: its value may be escaped)."""
    at = text.find("\\")
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        if formal_property_at(text, start, end, name_keys) is not None:
            return True
        at = text.find("\\", end)
    return False


def _may_be_a_value(lowered: str, start: int, end: int) -> bool:
    """Whether the occurrence of a name from ``start`` to ``end`` in a lowered text passes
    the first look at a name line's value (:data:`_BEFORE_VALUE`, :data:`_AFTER_VALUE`):
    every occurrence :func:`_name_line_at` takes does."""
    return (
        _AFTER_VALUE.match(lowered, end) is not None
        and _BEFORE_VALUE.search(lowered, max(0, start - _RUN - 4), start) is not None
    )


def _name_line_at(
    text: str, lowered: str, at: int, end: int, name: str, name_keys: tuple[str, ...]
) -> tuple[int, str, str] | None:
    """(line start, node, key) of the name line whose value normalizes to ``name`` occurring
    from ``at`` to ``end``, if it is one (:func:`~kag.grading.retrieval_scan.may_be_value_at`,
    :func:`~kag.grading.retrieval_scan.naming_line`); None otherwise."""
    return naming_line(text, at, name, name_keys) if may_be_value_at(text, lowered, at, end) else None
