"""A result file's retrieval text, prepared once for both evidence measures: whether a gold
name occurs in it as whole words (the ``evidence`` block) and whether it names a node of its
``FormalTriplet`` lines (``retrieval_quality`` in ``exact`` mode).

The answers are those of the plain formulas, which normalize the whole text
(:func:`normalized_body`) and read every name line
(:func:`kag.results.graph_text.formal_names`); :class:`RetrievalText` finds them with a few
substring searches where the text allows it.
"""

from __future__ import annotations

import re
import unicodedata

from kag.grading.triplets.normalize import contains_words, normalize_prompt, normalize_title
from kag.results.graph_text import formal_names, formal_property_at, names_its_node

# What `normalize_prompt` collapses into one space: the ASCII whitespace of `str.split`, and `_`.
_SEPARATOR_RUN = re.compile(r"[ \t\n\r\x0b\x0c\x1c-\x1f_]+")
# What normalizing a name may strip before its first word (punctuation, whitespace but the
# newline that ends a line).
_STRIPPED = frozenset(
    c for c in map(chr, range(128)) if (unicodedata.category(c)[0] == "P" or c.isspace()) and c != "\n"
)
# The first letters of the legal suffixes a name may end with (kag.grading.triplets.normalize).
_SUFFIX_STARTS = frozenset("cilgp")
# Occurrences of a name's first word tried, when the word is not alphanumeric (it may overlap
# itself at every character), before the plain formula takes over: the search stays linear.
_TRIES = 64


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


class RetrievalText:
    """A retrieval text and what its searches have found so far.

    An ASCII text is searched in its *lowered* form (``text.lower()``, every character at its
    place), the normalized text never built: a normalized name occurs in the normalized text,
    bounded by non-alphanumerics, exactly where its first word occurs in the lowered form
    bounded on the left, each next word follows a run of separators (whitespace or ``_``,
    which the normalized form collapses into one space), and the last ends bounded on the
    right (:func:`_occurrences`). Any other text is searched in its normalized form.

    Names of nodes (``exact`` mode): when a node's name normalizes to a gold name, the gold
    name occurs so in the node's name line, with only what normalizing strips between the
    line's ``]->(`` and it, and between it and the line's end or a legal suffix; provided the
    text is ASCII and the value of no name line holds a backslash (a JSON escape decodes to
    anything). So only the lines where the gold name occurs so are read
    (:meth:`nodes_named`), instead of every name line; other texts read them all.
    """

    __slots__ = ("_found", "_lowered", "_node_names", "_normalized", "_starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lowered = text.lower() if text.isascii() else None
        self._normalized: str | None = None
        self._starts: dict[str, list[int] | None] = {}
        self._found: dict[str, bool] = {}
        self._node_names: _NodeNames | None = None

    def _normalized_form(self) -> str:
        if self._normalized is None:
            self._normalized = normalized_body(self.text)
        return self._normalized

    def _starts_of(self, name: str) -> list[int] | None:
        """Where ``name`` (normalized) occurs in the normalized text, as positions of the
        lowered form (see the class docstring); None when the text is not ASCII or the first
        word occurs too often to try each occurrence."""
        if self._lowered is None:
            return None
        if name not in self._starts:
            self._starts[name] = _occurrences(self._lowered, name)
        return self._starts[name]

    def contains(self, name: str) -> bool:
        """Whether ``name`` (normalized) occurs in the normalized text bounded by
        non-alphanumerics or the ends: ``contains_words(normalized_body(text), name)``."""
        found = self._found.get(name)
        if found is None:
            lowered = self._lowered
            if lowered is not None and " " not in name and name not in self._starts:
                # One word: its bounds are the same in both forms, and the first one will do.
                found = contains_words(lowered, name)
            else:
                starts = self._starts_of(name)
                found = bool(starts) if starts is not None else contains_words(self._normalized_form(), name)
            self._found[name] = found
        return found

    def nodes_named(self, name: str, name_keys: tuple[str, ...]) -> frozenset[str]:
        """The ids of the nodes of the text's ``FormalTriplet`` lines whose name normalizes to
        ``name`` (normalized; :func:`~kag.results.graph_text.formal_names` with
        ``name_keys``). A text is asked with one ``name_keys``: later calls reuse the first's."""
        if self._node_names is None:
            self._node_names = _NodeNames(self, name_keys)
        return self._node_names.nodes(name)

    def names_a_node(self, name: str, name_keys: tuple[str, ...]) -> bool:
        """Whether ``name`` (normalized) is the normalized name of a node (``""`` is when
        some node's name normalizes to it): :meth:`nodes_named` is not empty."""
        return bool(self.nodes_named(name, name_keys))


class _NodeNames:
    """The node-name lookups of one text: in the lines where the name occurs, when the text
    can be searched so, else among every node's normalized name (read on first need)."""

    __slots__ = ("_every", "_found", "_keys", "_searchable", "_text")

    def __init__(self, text: RetrievalText, name_keys: tuple[str, ...]) -> None:
        self._text = text
        self._keys = name_keys
        self._searchable = (
            text._lowered is not None
            and not any("\n" in key for key in name_keys)
            and not _escaped_name_line(text.text, name_keys)
        )
        self._every: dict[str, set[str]] | None = None
        self._found: dict[str, frozenset[str]] = {}

    def nodes(self, name: str) -> frozenset[str]:
        """The ids of the nodes whose name normalizes to ``name``."""
        found = self._found.get(name)
        if found is None:
            text, lowered = self._text, self._text._lowered
            starts = text._starts_of(name) if name and self._searchable else None
            lines = None
            if starts is not None and lowered is not None:
                lines = [
                    line for at in starts if (line := _name_line_at(text.text, lowered, at, name, self._keys))
                ]
            # Whether each line is its node's naming line is a search from the text's start:
            # past _TRIES such lines, reading every line is the linear way.
            if lines is not None and len(lines) <= _TRIES:
                found = frozenset(
                    node
                    for start, node, key in lines
                    if names_its_node(text.text, start, node, key, self._keys)
                )
            else:
                if self._every is None:
                    self._every = {}
                    for node, value in formal_names(text.text, self._keys).items():
                        if value:
                            self._every.setdefault(normalize_title(value), set()).add(node)
                found = frozenset(self._every.get(name, ()))
            self._found[name] = found
        return found


def _occurrences(lowered: str, name: str) -> list[int] | None:
    """The starts of the occurrences of ``name`` (normalized, non-empty) in the normalized
    form of a text whose lowered form is ``lowered`` (see :class:`RetrievalText`); None after
    ``_TRIES`` occurrences of a first word that can overlap itself there."""
    if not name:
        return []
    first, *rest = name.split(" ")
    size, length = len(first), len(lowered)
    # An occurrence of an alphanumeric word that starts inside the previous one (or right
    # after it) is not bounded on the left: the next search starts past it. Other words may
    # overlap themselves at every character: they are tried a bounded number of times.
    step, tries = (size + 1, length + 1) if first.isalnum() else (1, _TRIES)
    starts: list[int] = []
    at = lowered.find(first)
    for _ in range(tries):
        if at == -1:
            return starts
        if at == 0 or not lowered[at - 1].isalnum():
            end = at + size
            for word in rest:
                run = _SEPARATOR_RUN.match(lowered, end)
                if run is None or not lowered.startswith(word, run.end()):
                    break
                end = run.end() + len(word)
            else:
                if end == length or not lowered[end].isalnum():
                    starts.append(at)
        at = lowered.find(first, at + step)
    return starts if at == -1 else None


def _occurrence_end(lowered: str, at: int, name: str) -> int:
    """Where the occurrence of ``name`` (normalized) starting at ``at`` ends in ``lowered``:
    its words with the run of separators before each next one, which may be longer than
    the one space of ``name``."""
    first, *rest = name.split(" ")
    end = at + len(first)
    for word in rest:
        run = _SEPARATOR_RUN.match(lowered, end)
        end = (end if run is None else run.end()) + len(word)
    return end


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


def _name_line_at(
    text: str, lowered: str, at: int, name: str, name_keys: tuple[str, ...]
) -> tuple[int, str, str] | None:
    """(line start, node, key) of the name line whose value normalizes to ``name`` occurring
    at ``at``, if it is one: only what normalizing strips lies between the line's ``]->(``
    and ``at``, and after the name up to the line's end or a legal suffix, and the line read
    has that value. None otherwise."""
    before = at - 1
    while before >= 0 and lowered[before] in _STRIPPED:
        before -= 1
    if before < 2 or not lowered.startswith("]->", before - 2):
        return None
    after, length = _occurrence_end(lowered, at, name), len(lowered)
    while after < length and lowered[after] in _STRIPPED:
        after += 1
    if after < length and lowered[after] != "\n" and lowered[after] not in _SUFFIX_STARTS:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = formal_property_at(text, start, len(text) if end == -1 else end, name_keys)
    if line is not None and normalize_title(line[2]) == name:
        return start, line[0], line[1]
    return None
