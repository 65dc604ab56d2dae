"""Reading the option key a reply names (``--extract letter``), after its reasoning blocks are gone.

The rule is stated in :mod:`kag.grading.extract`, which removes the reasoning blocks and
calls :func:`read_letter`. Each mention of a key is read from a window of a few words
around it, so the time is linear in the reply's length.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import regex

from kag.textsafe import ascii_fold

# How far around a key its context is read: a bounded look, so that the whole extraction
# is linear in the reply's length however the reply is made.
_WINDOW = 48
# Words (letters and digits, with an apostrophe part: "isn't") and single other characters.
# The standard library's engine: ~2x faster than regex's on these short windows.
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W\d_]+)*|\S")
_ALNUM = regex.compile(r"[\p{L}\p{N}]")
_LETTER = regex.compile(r"\p{L}")

# Markdown and punctuation a reader looks through around a key.
_OPEN_CHARS = " \t\r\n\x0b\x0c*_\"'`([{$#>"
_CLOSE_CHARS = " \t\r\n\x0b\x0c*_\"'`)]}$.:!,;"
_BEFORE_DECORATION = frozenset("*_\"'`([{:=-–—,$#>：")
_AFTER_DECORATION = frozenset("*_\"'`)]}$\\")
_SENTENCE_END = frozenset(".!?:;\n")
_LATEX_TEXT = frozenset({"text", "textbf", "mathbf", "mathrm"})

# Words between a marker and its key: "the answer would most likely be B".
_GAP = frozenset(
    {"is", "was", "would", "will", "should", "must", "be", "have", "to", "here", "then", "seems",
     "appears", "probably", "likely", "most", "clearly", "definitely", "certainly", "indeed"}
)  # fmt: skip
_CONCLUSION = frozenset({"therefore", "thus", "hence", "so", "consequently"})
_MARKER_ADJECTIVES = frozenset(
    {"correct", "best", "right", "final", "most", "appropriate", "likely", "accurate", "suitable"}
)
_CHOOSE = frozenset(
    {"choose", "chose", "choosing", "pick", "picked", "picking", "select", "selected", "selecting"}
)
_CHOOSE_WITH = {
    "with": frozenset({"go", "goes", "going", "went", "stick", "sticking"}),
    "for": frozenset({"opt", "opting", "go", "going", "vote", "voting"}),
    "on": frozenset({"settle", "settling"}),
    "toward": frozenset({"lean", "leaning", "leans"}),
    "towards": frozenset({"lean", "leaning", "leans"}),
}
_NEGATIONS = frozenset(
    {"not", "never", "cannot", "neither", "nor", "except", "excluding", "exclude", "excludes",
     "excluded", "eliminate", "eliminates", "eliminating", "eliminated", "discard", "discarded",
     "over", "unlike", "besides", "against"}
)  # fmt: skip
_NEGATIONS_AFTER = {"than": frozenset({"rather"}), "of": frozenset({"instead", "none", "neither"}),
                    "out": frozenset({"rule", "rules", "ruling", "ruled"})}  # fmt: skip
# A word just before a key that makes it part of a name: "vitamin C", "hepatitis B", "type A".
_NAME_BEFORE = frozenset(
    {"vitamin", "vitamins", "hepatitis", "hep", "type", "types", "group", "groups", "class",
     "grade", "stage", "phase", "factor", "protein", "complex", "kinase", "fiber", "fibers",
     "fibre", "fibres", "lead", "leads", "channel", "schedule", "serotype", "subtype", "strain",
     "plan", "part", "section", "chapter", "appendix", "figure", "table", "category", "level",
     "tier", "zone", "wave", "block", "influenza", "coxsackievirus", "streptococcus", "strep",
     "immunoglobulin", "ig", "apolipoprotein", "apo", "cluster", "mode", "model", "panel"}
)  # fmt: skip
# A word just after a key that makes it part of a name: "B cells", "T wave", "A antigen".
_NAME_AFTER = frozenset(
    {"cell", "cells", "lymphocyte", "lymphocytes", "wave", "waves", "antigen", "antigens",
     "blood", "virus", "vitamin", "vitamins", "chain", "chains", "fibers", "fibres", "band", "bands"}
)  # fmt: skip
# Words after "E." that do not make it a genus ("B. because …" names key B, "E. coli" does not).
_NOT_SPECIES = frozenset(
    {"because", "since", "as", "the", "this", "that", "these", "it", "its", "is", "was", "which",
     "and", "or", "but", "so", "for", "with", "due", "given", "however", "then", "also", "not",
     "a", "an", "in", "on", "of", "to", "all", "none", "both", "each", "explanation", "reason",
     "rationale", "answer", "option", "here", "there", "they", "we", "i"}
)  # fmt: skip
_AUXILIARIES = frozenset(
    {"is", "are", "was", "seems", "seem", "appears", "would", "could", "might", "may", "can",
     "should", "must", "be", "being", "also", "definitely", "clearly", "probably", "certainly",
     "obviously", "therefore", "thus", "then", "all", "both", ":", "-", "–", "—", ",", "(", "=", "|"}
)  # fmt: skip
_NEGATIVE = frozenset(
    {"incorrect", "wrong", "false", "unlikely", "implausible", "excluded", "eliminated",
     "inappropriate", "irrelevant", "inaccurate", "invalid", "incompatible", "inconsistent",
     "not", "cannot", "never", "❌", "✗", "✘", "×"}
)  # fmt: skip
_POSITIVE = frozenset({"correct", "right", "true", "best", "better", "✓", "✔", "✅"})
_POSITIVE_AFTER_THE = frozenset({"correct", "right", "best", "answer", "one", "most", "only", "likeliest"})
_LIKELY = frozenset({"likely", "appropriate", "accurate", "consistent", "plausible", "probable", "suitable"})
# Words that never follow the article "a": before them an "A" is a key ("A or B", "A is right").
_NOT_AFTER_ARTICLE = frozenset(
    {"or", "and", "nor", "but", "is", "was", "seems", "would", "could", "should", "must",
     "because", "since", "as", "so", "then", "vs", "versus", "if"}
)  # fmt: skip
_ALTERNATIVES = frozenset({",", "/", "&", "or", "and"})


def _ascii_insensitive(key: str) -> str:
    # (?i) would also fold non-ASCII letters ("É" ~ "é"), which the grading rule does not.
    return "".join(
        f"[{c.lower()}{c.upper()}]" if c.isascii() and c.isalpha() else regex.escape(c) for c in key
    )


@dataclass(frozen=True, slots=True)
class _KeyPatterns:
    spelled: dict[str, str]  # folded key -> key as in the dataset
    key: regex.Pattern[str]


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
    return _KeyPatterns(
        spelled, regex.compile(rf"(?<![\p{{L}}\p{{N}}])(?:{alternatives})(?![\p{{L}}\p{{N}}])")
    )


class _Kind(Enum):
    IGNORED = "ignored"  # not a key at all: part of a word, a name, an article
    NEGATED = "negated"  # "not B", "B is wrong"
    ANSWER = "answer"  # after an answer marker: "the answer is B", "I choose B", "\boxed{B}"
    STRONG = "strong"  # said to be right: "B is correct", "Therefore, B", "**B**" alone on its line
    PLAIN = "plain"  # mentioned


@dataclass(frozen=True, slots=True)
class _Mention:
    key: str  # folded
    kind: _Kind
    leading: bool  # the reply starts with it: "B) because …"
    offered: tuple[str, ...]  # the other keys listed right after it: "A or B", "B/C" (folded)


def _is_alnum(text: str, index: int) -> bool:
    return 0 <= index < len(text) and _ALNUM.match(text[index]) is not None


def _is_letter(text: str, index: int) -> bool:
    return 0 <= index < len(text) and _LETTER.match(text[index]) is not None


def _in_word(text: str, start: int, end: int) -> bool:
    """Whether the key at ``start:end`` is a piece of a contraction, abbreviation or compound."""
    before, after = text[start - 1 : start], text[end : end + 1]
    if before in ("'", "’", ".", "-") and _is_letter(text, start - 2):  # I'd, it's, i.e., anti-B
        return True
    if after in ("'", "’", ".") and _is_letter(text, end + 1):  # I'd, e.g., a.m.
        return True
    return after == "-" and _is_alnum(text, end + 1)  # B-cell, T-wave


def _tokens_before(text: str, start: int) -> list[str]:
    window = max(0, start - _WINDOW)
    tokens: list[str] = _TOKEN.findall(text, window, start)
    return tokens[1:] if window > 0 and tokens else tokens  # the first may be cut


def _tokens_after(text: str, end: int) -> list[str]:
    window = end + _WINDOW
    tokens: list[str] = _TOKEN.findall(text, end, window)
    return tokens[:-1] if window < len(text) and tokens else tokens


def _read_before(tokens: list[str]) -> _Kind:
    """STRONG after an answer marker, NEGATED after a negation, else PLAIN (see the docs)."""
    index = len(tokens)
    concluded = False
    while index:
        word = tokens[index - 1].lower()
        if word in _BEFORE_DECORATION or word in _GAP:
            index -= 1
        elif word in _CONCLUSION:
            concluded = True
            index -= 1
        elif word in _LATEX_TEXT and index >= 2 and tokens[index - 2] == "\\":
            index -= 2
        else:
            break
    if not index:
        return _Kind.STRONG if concluded else _Kind.PLAIN
    word = tokens[index - 1].lower()
    previous = [t.lower() for t in tokens[max(0, index - 3) : index - 1]]
    last = previous[-1] if previous else ""
    if _negates(word, last):
        return _Kind.NEGATED
    strong = False
    if word in ("answer", "answers"):
        strong = True
    elif word == "boxed" and last == "\\":
        return _Kind.ANSWER
    elif word in ("option", "choice"):
        # "option B" alone is a reference; "the correct option is B", "I choose option B" name it.
        strong = last in _MARKER_ADJECTIVES or last in _CHOOSE or _chooses(last, previous[:-1])
        if not strong and len(previous) == 2 and _negates(last, previous[0]):
            return _Kind.NEGATED
    else:
        strong = word in _CHOOSE or _chooses(word, previous)
    if strong:
        if any(_negates(w, "") for w in previous):  # "I would not choose B"
            return _Kind.NEGATED
        return _Kind.ANSWER
    return _Kind.STRONG if concluded else _Kind.PLAIN


def _negates(word: str, previous: str) -> bool:
    if word in _NEGATIONS or word.endswith(("n't", "n’t")):
        return True
    return previous in _NEGATIONS_AFTER.get(word, ())


def _chooses(word: str, previous: list[str]) -> bool:
    return bool(previous) and previous[-1] in _CHOOSE_WITH.get(word, ())


def _read_after(tokens: list[str], key: str, patterns: _KeyPatterns) -> tuple[_Kind, tuple[str, ...]]:
    """What follows a key: a verdict on it (or on the list it heads), and the other keys of that list."""
    index = 0
    while index < len(tokens) and tokens[index] in _AFTER_DECORATION:
        index += 1
    listed = [key]
    while index + 1 < len(tokens) and tokens[index].lower() in _ALTERNATIVES:
        following = index + 1
        while following < len(tokens) and (
            tokens[following] in _BEFORE_DECORATION or tokens[following].lower() in ("option", "choice")
        ):
            following += 1
        # A key listed again starts a new clause: "between B and C, C is …".
        if following >= len(tokens) or (other := ascii_fold(tokens[following])) not in patterns.spelled:
            break
        if other in listed:
            break
        listed.append(other)
        index = following + 1
        while index < len(tokens) and tokens[index] in _AFTER_DECORATION:
            index += 1
    return _verdict(tokens[index:]), tuple(listed[1:])


def _verdict(tokens: list[str]) -> _Kind:
    words = [t.lower() for t in tokens[:8]]
    index = 0
    while index < len(words) and words[index] in _AUXILIARIES:
        index += 1
    if words[:1] == ["."] and len(words) > 1 and (words[1] in _NEGATIVE or words[1] in _POSITIVE):
        index = 1  # a list of verdicts, one a line: "A. Incorrect"
    if index == len(words):
        return _Kind.PLAIN
    word, rest = words[index], words[index + 1 : index + 4]
    if word == "not" and (index == 0 or not words[index - 1].isalpha()):
        return _Kind.PLAIN  # "C, not B": the "not" is about what follows
    if word in _NEGATIVE or word.endswith(("n't", "n’t")):
        return _Kind.NEGATED
    if (word == "less" and rest[:1] == ["likely"]) or (word == "ruled" and rest[:1] == ["out"]):
        return _Kind.NEGATED
    if "distractor" in [word, *rest] or "distractors" in [word, *rest]:
        return _Kind.NEGATED
    if word in _POSITIVE:
        return _Kind.STRONG
    if word in ("the", "a") and rest[:1] and rest[0] in _POSITIVE_AFTER_THE | _POSITIVE:
        return _Kind.STRONG
    if word in ("most", "more") and rest[:1] and rest[0] in _LIKELY:
        return _Kind.STRONG
    return _Kind.PLAIN


def _starts_sentence(text: str, position: int) -> bool:
    limit = max(0, position - _WINDOW)
    while position > limit and text[position - 1] in _OPEN_CHARS and text[position - 1] != "\n":
        position -= 1
    return position == 0 or text[position - 1] in _SENTENCE_END


def _is_article(text: str, word: str, end: int, after: list[str], after_marker: bool) -> bool:
    """Whether "a"/"A" is the article or "I" the pronoun, not a key (see the docs)."""
    if word not in ("a", "A", "I"):
        return False
    gap = text[end : end + 1]
    if gap not in (" ", "\t") or not after:
        return False
    if after[0][0].isdigit() and after[1:2] == ["-"] and word != "I":
        return word == "a" or not after_marker  # "A 45-year-old woman"
    if _LETTER.match(after[0]) is None:
        return False
    follows = after[0].lower()
    if follows in _NOT_AFTER_ARTICLE:
        return False
    if word == "I":
        return not after_marker and after[0][0].islower()
    if word == "a":
        return True
    return not after_marker and _starts_sentence(text, end - 1)


def _is_leading(text: str, start: int, end: int) -> bool:
    """Whether the reply starts with this key followed by ``)`` ``.`` ``:`` ``,`` bold, a dash or a line end."""
    if start > _WINDOW or text[:start].strip(_OPEN_CHARS).lower() not in ("", "option", "choice"):
        return False
    follows = text[end : end + 2]
    if follows[:1] in (")", "]", "}", ".", ":", ",") or follows in ("**", "__"):
        return True
    rest = text[end : end + _WINDOW].lstrip(" \t")
    return rest == "" and end + _WINDOW >= len(text) or rest[:1] in ("-", "–", "—", "\n", "\r")


def _alone_on_line(text: str, start: int, end: int) -> bool:
    """Whether the key's line holds nothing else but markdown and punctuation ("**B**", "(C).")."""
    window = max(0, start - _WINDOW)
    head = text[window:start]
    newline = head.rfind("\n")
    if newline == -1 and window > 0:
        return False
    if head[newline + 1 :].strip(_OPEN_CHARS):
        return False
    tail = text[end : end + _WINDOW]
    newline = tail.find("\n")
    if newline == -1 and end + _WINDOW < len(text):
        return False
    return not (tail if newline == -1 else tail[:newline]).strip(_CLOSE_CHARS)


def _is_name(text: str, word: str, end: int, before: list[str], after: list[str]) -> bool:
    """Whether the key is part of a name: "vitamin C", "B cells", "E. coli"."""
    if before and before[-1].lower() in _NAME_BEFORE and text[end - len(word) - 1 : end - len(word)] == " ":
        return True
    if text[end : end + 1] == " " and after and after[0].lower() in _NAME_AFTER:
        return True
    return (
        len(word) == 1
        and word.isupper()
        and text[end : end + 2] == ". "
        and len(after) > 1
        and after[1].islower()
        and after[1] not in _NOT_SPECIES
    )


def _read_mention(text: str, start: int, end: int, patterns: _KeyPatterns) -> _Mention | None:
    """How the key at ``start:end`` is mentioned; None when it is not a key there."""
    word = text[start:end]
    if _in_word(text, start, end):
        return None
    before = _tokens_before(text, start)
    after = _tokens_after(text, end)
    if _is_name(text, word, end, before, after):
        return None
    kind = _read_before(before)
    verdict, offered = _read_after(after, ascii_fold(word), patterns)
    if _is_article(text, word, end, after, kind in (_Kind.ANSWER, _Kind.STRONG)):
        return None
    if verdict is _Kind.NEGATED or kind is _Kind.NEGATED:
        kind = _Kind.NEGATED
    elif kind is not _Kind.ANSWER and (verdict is _Kind.STRONG or _alone_on_line(text, start, end)):
        kind = _Kind.STRONG
    return _Mention(ascii_fold(word), kind, _is_leading(text, start, end), offered)


def _mentions(text: str, patterns: _KeyPatterns) -> list[_Mention]:
    found: list[_Mention] = []
    # A mention is read from the window around it alone, so a reply that repeats itself
    # ("B B B …") reads each distinct window once.
    seen: dict[tuple[str, bool, bool], _Mention | None] = {}
    for match in patterns.key.finditer(text):
        start, end = match.span()
        window = (
            text[start - _WINDOW - 2 : end + _WINDOW + 2],
            start <= _WINDOW + 2,
            end + _WINDOW + 2 >= len(text),
        )
        if window[1] or window[2]:
            mention = _read_mention(text, start, end, patterns)
        elif window in seen:
            mention = seen[window]
        else:
            mention = seen[window] = _read_mention(text, start, end, patterns)
        if mention is not None:
            found.append(mention)
    return found


def _whole(text: str, patterns: _KeyPatterns) -> str | None:
    for candidate in (text.strip(), text.lstrip(_OPEN_CHARS).rstrip(_CLOSE_CHARS)):
        key = patterns.spelled.get(ascii_fold(candidate))
        if key is not None:
            return key
    return None


def read_letter(text: str, option_keys: Collection[str]) -> str | None:
    """The option key a reader takes from ``text`` (its reasoning blocks already removed),
    as spelled in ``option_keys``; None if none.

    The rule is :func:`kag.grading.extract.extract_letter`'s (steps 1 to 5 of that module's
    docstring). Empty keys are ignored; no keys means nothing is extracted. Given a mapping
    (option key -> option text), a reply that names no key is read for the text of an
    option (:func:`read_option_text`), unless it rejected that option's key ("not B").
    Time is linear in the length of ``text``: each mention of a key is read with a window
    of a few words around it.
    """
    patterns = _patterns(tuple(option_keys))
    if patterns is None:
        return None
    key, mentions = _read_keys(text, patterns)
    if key is not None or not isinstance(option_keys, Mapping):
        return key
    # Keys offered side by side ("A or B") are not settled by a text; a rejected key's
    # text does not make it the answer.
    if any(m.kind is not _Kind.NEGATED for m in mentions):
        return None
    named = read_option_text(text, option_keys)
    rejected = {k for m in mentions for k in (m.key, *m.offered)}
    return None if named is None or ascii_fold(named) in rejected else named


def _read_keys(text: str, patterns: _KeyPatterns) -> tuple[str | None, list[_Mention]]:
    """(the key a reader takes from ``text`` or None, the mentions of keys read)."""
    whole = _whole(text, patterns)
    if whole is not None:
        return whole, []
    mentions = _mentions(text, patterns)
    return _settle(mentions, patterns), mentions


def _settle(mentions: list[_Mention], patterns: _KeyPatterns) -> str | None:
    """The key the mentions give (steps 3 to 5), or None."""
    rejected: set[str] = set()
    for mention in mentions:
        if mention.kind is _Kind.NEGATED:  # with the keys listed with it: "rule out A and B"
            rejected.update((mention.key, *mention.offered))
    # An answer marker outranks a verdict: "Answer: B. A is correct only in children."
    for kind in (_Kind.ANSWER, _Kind.STRONG):
        named = [m for m in mentions if m.kind is kind]
        if named:
            if any(m.offered for m in named):
                return None
            return _single({m.key for m in named} - rejected, patterns)
    leading = next((m for m in mentions if m.leading and m.kind is not _Kind.NEGATED), None)
    if leading is not None:
        return None if leading.offered else patterns.spelled[leading.key]
    return _single({m.key for m in mentions if m.kind is _Kind.PLAIN} - rejected, patterns)


def _single(keys: set[str], patterns: _KeyPatterns) -> str | None:
    return patterns.spelled[keys.pop()] if len(keys) == 1 else None


# ---------------------------------------------------------------- options named by their text

_WORDS = regex.compile(r"[\p{L}\p{N}]+")
_LEADING_ARTICLES = frozenset({"the", "a", "an"})


@dataclass(frozen=True, slots=True)
class _TextPatterns:
    words: dict[tuple[str, ...], str]  # an option's text as words -> its key as in the dataset
    texts: tuple[tuple[str, regex.Pattern[str]], ...]  # (key, where its text is named)


def _words(text: str) -> tuple[str, ...]:
    """The words of ``text``, case-folded, without a leading article: how texts compare."""
    words = tuple(w.casefold() for w in _WORDS.findall(text))
    return words[1:] if len(words) > 1 and words[0] in _LEADING_ARTICLES else words


@lru_cache(maxsize=256)
def _text_patterns(options: tuple[tuple[str, str], ...]) -> _TextPatterns | None:
    folded_keys = {ascii_fold(key) for key, _ in options}
    by_words: dict[tuple[str, ...], list[str]] = {}
    for key, text in options:
        words = _words(text)
        # A text that is a key, one character or nothing would be read in every reply.
        if key.strip() and words and len("".join(words)) > 1 and " ".join(words) not in folded_keys:
            by_words.setdefault(words, []).append(key)
    # Two options with the same text cannot be told apart by it.
    unique = {words: keys[0] for words, keys in by_words.items() if len(keys) == 1}
    if not unique:
        return None
    texts = tuple((key, _text_pattern(words)) for words, key in unique.items())
    return _TextPatterns(unique, texts)


def _text_pattern(words: tuple[str, ...]) -> regex.Pattern[str]:
    """Where ``words`` are named: as whole words, in any case, any non-word characters between."""
    body = r"[^\p{L}\p{N}]+".join(regex.escape(w) for w in words)
    return regex.compile(rf"(?fi)(?<![\p{{L}}\p{{N}}]){body}(?![\p{{L}}\p{{N}}])")


def read_option_text(text: str, options: Mapping[str, str]) -> str | None:
    """The key of the one option whose text ``text`` names, as spelled in ``options``; None if none.

    Texts compare as their words, case-folded, a leading article dropped (``"The liver"``
    is named by ``liver``). The reply names an option when the whole reply is its text
    (``"Staphylococcus aureus."``), or when its text appears in the reply as whole words,
    not negated (``not``, ``rather than``, ``X is wrong``: the rule of the keys), and no
    other option's text appears at all (``"Hyperkalemia or hypokalemia"`` names none, nor
    does a reply naming ``"Aspirin and clopidogrel"`` when ``"Aspirin"`` is another option).
    Texts that are a key, one character long or shared by two options are never read.
    Time is linear in the length of ``text`` times the number of options.
    """
    patterns = _text_patterns(tuple(options.items()))
    if patterns is None:
        return None
    whole = patterns.words.get(_words(text))
    if whole is not None:
        return whole
    named: list[str] = []
    negated = False
    for key, pattern in patterns.texts:
        found = False
        for match in pattern.finditer(text):
            found = True
            start, end = match.span()
            before = _read_before(_tokens_before(text, start))
            if before is _Kind.NEGATED or _verdict(_tokens_after(text, end)) is _Kind.NEGATED:
                negated = True
        if found:
            named.append(key)
            if len(named) > 1:
                return None
    return named[0] if len(named) == 1 and not negated else None
