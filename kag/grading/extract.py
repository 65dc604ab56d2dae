r"""Answer extraction for ``kag stats --extract letter|regex:PATTERN``.

The strict grade (the Rust tool's rule, :func:`kag.grading.mcq.is_correct`) takes a reply
as the answer only when it *is* the option key. Models that explain themselves
("The answer is B.") fail it even when right. Extraction reads the key a reader would
read; the caller then grades the extracted key with the same rule.

``letter`` (:func:`extract_letter`) works in tiers; the first tier that finds a key
decides, and a tier that finds two different keys gives "not extracted" (None) rather than
falling through to a weaker tier:

0. ``<think>…</think>`` blocks are removed first (reasoning is not the answer), as is a
   ``<think>`` block left open (a truncated reasoning: everything from it to the end) and
   everything up to a ``</think>`` whose opening tag was in the prompt.
1. **The whole reply is a key**, give or take markdown and punctuation around it:
   ``B``, ``(b)``, ``**B**``, ``b.``, ``"B"``, ``[B]``.
2. **Answer markers**: a key right after ``answer``, ``option`` or ``choice`` (singular,
   optionally "final/correct/best/right" before it) and a gap of spaces, ``: = - *``,
   brackets, quotes and the verbs "is/was/would be/…": ``The answer is B.``,
   ``Answer: (b)``, ``**Final answer:** C``, ``correct option is **B**``; a LaTeX
   ``\boxed{B}``; or a key right before "is correct/right/the answer". Every marker in
   the reply is read: they must all name the same key.
3. **A leading key**: the reply starts with a key followed by ``)`` ``]`` ``.`` ``:``
   ``,``, closing bold, a dash or a line end: ``B) because …``, ``(C) Vitamin C``,
   ``Yes, the study shows …``.
4. **The only standalone key**: every key in the reply standing as a word of its own;
   extracted when they are all the same key (``I'd go with B here``), not extracted when
   there are two different ones (``A or B``) or none.

In tiers 2 and 3 a key followed by another key through "or", "and", ",", "/" or "&"
(``answer is A or B``, ``B/C``) is ambiguous: not extracted.

The English article: when ``A`` is an option key, ``a``/``A`` followed by a space and a
word is read as the article, not a key, when it is lower-case (``a patient``) or
upper-case at the start of a sentence (``A patient with …``), unless that word never
follows the article ("or", "and", "is", "because", …: ``A or B``, ``A is right``).
After a marker (tier 2) upper-case ``A`` is always a key (``The answer is A because …``)
and lower-case ``a`` before a word is the article (``the answer is a matter of …``);
mid-sentence upper-case ``A`` is a key in tier 4 (``I choose A since …``). So a reply
that starts with the article is still read by its clearer marker, and an article never
makes a reply ambiguous.

Keys compare under the grading rule (ASCII case-insensitive only, so ``É`` is not ``é``)
and may be words (``yes``/``no``/``maybe``); a key is found only as a whole word (not
followed or preceded by a letter or digit: ``B12`` holds no key ``B``). The key returned
is spelled as in the dataset.

Sources: lm-evaluation-harness' ``MultiChoiceRegexFilter``
(``lm_eval/filters/extraction.py``) falls back from a task pattern to the option keys
after a colon (``:\s*([A-D])``), the origin of the "Answer: (b)" marker here; inspect_ai's
``ANSWER_PATTERN_LETTER`` (``inspect_ai/_util/pattern.py``,
``(?i)ANSWER\s*:\s*([A-Za-z])(?:[^\w]|\n|$)``) requires the key to end at a non-word
character, the whole-word rule here. The tiering, the think-block removal, the
ambiguity rule and the article rule are kag's.

``regex:PATTERN`` (:func:`extract_regex`): the first capture group of the first match, or
the whole match when the pattern has no group; Python ``regex`` syntax; each search is
limited to :data:`REGEX_TIMEOUT_S` seconds. :meth:`ExtractSpec.extract` removes the
reasoning blocks (tier 0) before either kind.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import regex

from kag.errors import UsageError
from kag.textsafe import ascii_fold

#: Seconds one regex search may take on one response before extraction stops with an error.
REGEX_TIMEOUT_S = 1.0

_THINK_BLOCK = regex.compile(r"(?is)<think\b[^>]*>.*?</think\s*>")
_THINK_CLOSE = regex.compile(r"(?is)\A.*</think\s*>")  # its opening tag was in the prompt
_THINK_OPEN = regex.compile(r"(?is)<think\b[^>]*>.*\Z")  # a reasoning cut off before its end

# Markdown and punctuation a reader looks through around a key.
_OPEN = r"[\s*_\"'`(\[{]"
_CLOSE = r"[\s*_\"'`)\]}.:!,;]"
_END = r"(?![\p{L}\p{N}])"
_START = r"(?<![\p{L}\p{N}])"
_VERBS = r"(?:is|was|would|will|should|must|be|therefore|thus|probably|likely|clearly|definitely)"
_MARKER = (
    r"(?:\b(?:(?:final|correct|best|right)[^\S\n]+)?(?:answer|option|choice)(?![\p{L}\p{N}])"
    rf"(?:[\s:=\-–—*_\"'`(\[{{]|\b{_VERBS}\b)*"
    r"|\\boxed\{(?:\\text(?:bf)?\{)?)"
)
_AFTER_KEY_MARKER = (
    r"[^\S\n]*[)\]}.:*_]*[^\S\n]+(?:is|was)[^\S\n]+(?:the[^\S\n]+)?(?:correct|right|best|answer)\b"
)
_ALTERNATIVE = r"[^\S\n]*(?:,|/|&|\bor\b|\band\b)[^\S\n]*[*_\"'`(\[{]*(?:option[^\S\n]+)?"
_ARTICLE_FOLLOWS = regex.compile(r"[^\S\n]+(\p{L}+)")
# Words that never follow the article "a": before them an "A" is a key ("A or B", "A is right").
_NOT_AFTER_ARTICLE = frozenset(
    {
        "or",
        "and",
        "nor",
        "but",
        "is",
        "was",
        "seems",
        "would",
        "could",
        "should",
        "must",
        "because",
        "since",
        "as",
        "so",
        "then",
        "vs",
        "versus",
        "if",
    }
)
_DECORATION = frozenset(" \t\r\x0b\x0c*_\"'`([{")
_SENTENCE_END = frozenset(".!?:;\n")


def _ascii_insensitive(key: str) -> str:
    # (?i) would also fold non-ASCII letters ("É" ~ "é"), which the grading rule does not.
    return "".join(
        f"[{c.lower()}{c.upper()}]" if c.isascii() and c.isalpha() else regex.escape(c) for c in key
    )


@dataclass(frozen=True, slots=True)
class _KeyPatterns:
    spelled: dict[str, str]  # folded key -> key as in the dataset
    key: regex.Pattern[str]
    whole: regex.Pattern[str]
    marker: regex.Pattern[str]
    leading: regex.Pattern[str]
    alternative: regex.Pattern[str]


@lru_cache(maxsize=256)
def _patterns(keys: tuple[str, ...]) -> _KeyPatterns | None:
    spelled: dict[str, str] = {}
    for key in keys:
        if key.strip():
            spelled.setdefault(ascii_fold(key), key)
    if not spelled:
        return None
    # Longest first, so that a key is never read as a shorter key it starts with.
    alternatives = "|".join(_ascii_insensitive(k) for k in sorted(spelled, key=len, reverse=True))
    key = rf"{_START}(?P<key>{alternatives}){_END}"
    return _KeyPatterns(
        spelled=spelled,
        key=regex.compile(key),
        whole=regex.compile(rf"{_OPEN}*(?P<key>{alternatives}){_CLOSE}*"),
        marker=regex.compile(
            rf"(?i:{_MARKER})(?:(?i:option|choice)[^\S\n]+)?{key}|{key}(?={_AFTER_KEY_MARKER})"
        ),
        leading=regex.compile(
            rf"{_OPEN}*(?:(?i:option|choice)[^\S\n]+)?{key}(?:[)\]}}.:,]|\*\*|__|[^\S\n]*[-–—\n]|\Z)"
        ),
        alternative=regex.compile(rf"{_ALTERNATIVE}{key}"),
    )


def strip_think(response: str) -> str:
    """``response`` without its reasoning blocks (see tier 0 in the module docstring)."""
    if "think" not in response.casefold():
        return response
    text = _THINK_BLOCK.sub(" ", response)
    text = _THINK_CLOSE.sub(" ", text)
    return _THINK_OPEN.sub(" ", text)


def _is_article(text: str, match: regex.Match[str], in_marker: bool) -> bool:
    word = match.group("key")
    if word not in ("a", "A"):
        return False
    follows = _ARTICLE_FOLLOWS.match(text, match.end("key"))
    if follows is None or follows.group(1).casefold() in _NOT_AFTER_ARTICLE:
        return False
    if word == "a":
        return True
    return not in_marker and _starts_sentence(text, match.start("key"))


def _starts_sentence(text: str, position: int) -> bool:
    # Walks back over spaces and markdown only: a bounded look, however long the reply.
    while position > 0 and text[position - 1] in _DECORATION:
        position -= 1
    return position == 0 or text[position - 1] in _SENTENCE_END


def _ambiguous(text: str, match: regex.Match[str], patterns: _KeyPatterns) -> bool:
    """Whether the key of ``match`` is offered together with a different one ("A or B")."""
    other = patterns.alternative.match(text, match.end("key"))
    if other is None or _is_article(text, other, in_marker=False):
        return False
    return ascii_fold(other.group("key")) != ascii_fold(match.group("key"))


def _single(keys: set[str], patterns: _KeyPatterns) -> str | None:
    return patterns.spelled[keys.pop()] if len(keys) == 1 else None


def extract_letter(response: str, option_keys: Collection[str]) -> str | None:
    """The option key a reader takes from ``response``, as spelled in ``option_keys``; None if none.

    See the module docstring for the tiers and their precedence, the ambiguity rule and
    the article rule. Empty keys are ignored; no keys means nothing is extracted.
    """
    patterns = _patterns(tuple(option_keys))
    if patterns is None:
        return None
    text = strip_think(response)

    whole = patterns.whole.fullmatch(text)
    if whole is not None:
        return patterns.spelled[ascii_fold(whole.group("key"))]

    found: set[str] = set()
    for match in patterns.marker.finditer(text):
        if _is_article(text, match, in_marker=True):
            continue
        if _ambiguous(text, match, patterns):
            return None
        found.add(ascii_fold(match.group("key")))
    if found:
        return _single(found, patterns)

    leading = patterns.leading.match(text)
    if leading is not None and not _is_article(text, leading, in_marker=False):
        return (
            None
            if _ambiguous(text, leading, patterns)
            else patterns.spelled[ascii_fold(leading.group("key"))]
        )

    found = {
        ascii_fold(match.group("key"))
        for match in patterns.key.finditer(text)
        if not _is_article(text, match, in_marker=False)
    }
    return _single(found, patterns)


@lru_cache(maxsize=64)
def compile_pattern(source: str) -> regex.Pattern[str]:
    """Compile a ``regex:`` pattern; UsageError naming ``--extract`` when it is empty or invalid."""
    if not source:
        raise UsageError("--extract regex:PATTERN: the pattern is empty")
    try:
        return regex.compile(source)
    except regex.error as exc:
        raise UsageError(f"--extract regex:{source}: invalid pattern: {exc}") from None


def extract_regex(
    response: str, pattern: str | regex.Pattern[str], *, timeout: float = REGEX_TIMEOUT_S
) -> str | None:
    """The first capture group of the first match of ``pattern`` in ``response`` (group 0 without groups).

    ``pattern`` is a compiled pattern or its source (compiled once, see `compile_pattern`).
    None when nothing matches, or when the first group did not take part in the first
    match (``(a)|b`` on ``"b"``). The text is returned as matched, untrimmed: the grading
    rule trims it. Raises :class:`RegexTimeout` when the search takes longer than
    ``timeout`` seconds.
    """
    if isinstance(pattern, str):
        pattern = compile_pattern(pattern)
    try:
        match = pattern.search(response, timeout=timeout)
    except TimeoutError:
        raise RegexTimeout(
            f"--extract regex:{pattern.pattern}: the search took more than {timeout:g} s on one "
            "response; simplify the pattern"
        ) from None
    if match is None:
        return None
    return match.group(1) if pattern.groups else match.group(0)


class RegexTimeout(UsageError):
    """A ``--extract regex:`` pattern took too long on a response (catastrophic backtracking)."""


class ExtractKind(StrEnum):
    """How answers are extracted."""

    LETTER = "letter"
    REGEX = "regex"


@dataclass(frozen=True, slots=True)
class ExtractSpec:
    """A parsed ``--extract`` value: the kind, and the compiled pattern for ``regex``."""

    kind: ExtractKind
    pattern: regex.Pattern[str] | None = None

    @property
    def text(self) -> str:
        """The option value this spec was parsed from (``letter`` or ``regex:PATTERN``)."""
        return "letter" if self.pattern is None else f"regex:{self.pattern.pattern}"

    def extract(self, response: str, option_keys: Collection[str]) -> str | None:
        """The extracted answer of ``response`` (reasoning blocks removed first), or None.

        For ``letter`` an option key as spelled in ``option_keys``; for ``regex`` the
        captured text (``option_keys`` unused), to be graded by the caller.
        """
        if self.pattern is None:
            return extract_letter(response, option_keys)
        return extract_regex(strip_think(response), self.pattern)


def parse_extract_spec(text: str) -> ExtractSpec:
    """Parse an ``--extract`` value: ``letter`` or ``regex:PATTERN``.

    Raises UsageError naming the option for any other value, an empty pattern, or a
    pattern that does not compile (with the ``regex`` module's reason and position).
    """
    if text == ExtractKind.LETTER:
        return ExtractSpec(ExtractKind.LETTER)
    kind, colon, source = text.partition(":")
    if kind != ExtractKind.REGEX or not colon:
        raise UsageError(f"--extract: expected 'letter' or 'regex:PATTERN' (got {text!r})")
    return ExtractSpec(ExtractKind.REGEX, compile_pattern(source))
