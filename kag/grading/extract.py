r"""Answer extraction for ``kag stats --extract letter|regex:PATTERN``.

The strict grade (:func:`kag.grading.rule.is_correct`) takes a reply
as the answer only when it *is* the option key. Models that explain themselves
("The answer is B.") fail it even when right. Extraction reads the key a reader would
read; the caller then grades the extracted key with the same rule.

``letter`` (:func:`extract_letter`) reads every mention of an option key, each in a
window of a few words around it (so the time is linear in the reply's length):

0. Reasoning blocks are removed first (:func:`strip_think`): ``<think>``, ``<thinking>``
   and ``<reasoning>``, as the triplets parser removes them.
1. **The whole reply is a key**, give or take markdown and punctuation around it:
   ``B``, ``(b)``, ``**B**``, ``b.``, ``"B"``, ``[B]``.
2. Otherwise each mention of a key as a whole word is read:

   - **not a key** when it is part of a contraction, abbreviation or compound (``I'd``,
     ``it's``, ``i.e.``, ``e.g.``, ``8 a.m.``, ``B-cell``), of a name (after ``vitamin``,
     ``hepatitis``, ``type``, ``group``, ``class``, ``stage``, … ; before ``cells``,
     ``wave``, ``antigen``, …; an upper-case letter, a dot and a lower-case word that
     is not a common English word: ``E. coli``, ``C. difficile``), or the article ``a`` /
     the pronoun ``I`` (see below);
   - **rejected** when a negation comes right before it (``not``, ``isn't``, ``never``,
     ``except``, ``rather than``, ``instead of``, ``rule out``, ``eliminate``,
     ``none of``, ``over``, …) or a negative verdict right after it (``is incorrect``,
     ``is wrong``, ``is not``, ``is unlikely``, ``can be ruled out``,
     ``a (common) distractor``, ``: incorrect``, ``❌``); a rejection covers the keys
     listed with it (``rule out A and B``, ``A, B and C are wrong``);
   - **given as the answer** after an answer marker (``answer``, ``the correct/best
     option|choice``, ``choose``/``pick``/``select``/``go with``/``opt for``/``lean
     toward``, ``\boxed{``, with the verbs and markdown of ``the final answer would most
     likely be: **B**`` between);
   - **said to be right** before a positive verdict (``is correct``, ``is the answer``,
     ``is most likely``, ``: correct``, ``✅``), after a conclusion
     (``therefore``/``thus``/``hence``/``so``), or alone on its line (``**B**``);
   - **mentioned** otherwise (``option B`` alone is a mention).

3. The key given as the answer, when every such mention gives the same one and it is not
   rejected; none when they give different keys, or one is offered with another
   (``the answer is A or B``, ``B/C``). With no key given as the answer, the keys said to
   be right, read the same way.
4. Else the key the reply starts with, followed by ``)`` ``]`` ``.`` ``:`` ``,``, bold, a
   dash or a line end (``B) because …``, ``Option C - …``); none when another key is
   listed with it (``B, C and D are false``).
5. Else the only key mentioned and not rejected (``I'd go with B here``, ``A is wrong;
   so C.``); none when there are two (``A or B``) or none.
6. Else, when the options' texts are given (a mapping key -> text) and no key is
   mentioned but to be rejected, the option the reply names by its text
   (:func:`~kag.grading.letter.read_option_text`): the whole reply is its text
   (``Staphylococcus aureus``), or its text is the only option text in the reply and is
   not negated (``The answer is Hyperkalemia.``, ``The deficiency here is of vitamin
   C.``); none when two options' texts appear (``hyperkalemia or hypokalemia``, or
   ``Aspirin`` inside ``Aspirin and clopidogrel``) or the reply rejected that option's key.

The article and the pronoun: when ``A`` is a key, ``a``/``A`` followed by a space and a
word (or ``A 45-year-old``) is the article when lower-case, or upper-case at the start of
a sentence (``A patient with …``), unless that word never follows the article ("or",
"and", "is", "because", …: ``A or B``, ``A is right``); after an answer marker an
upper-case ``A`` is a key (``The answer is A because …``). When ``I`` is a key, ``I``
before a lower-case word is the pronoun (``I think``), except after a marker.

Keys compare under the grading rule (ASCII case-insensitive only, so ``É`` is not ``é``)
and may be words (``yes``/``no``/``maybe``); a key is found only as a whole word (not
followed or preceded by a letter or digit: ``B12`` holds no key ``B``). Option texts are
read only at step 6: ``Vitamin C`` names the option whose text it is, never the key
``C``. The key returned is spelled as in the dataset.

Sources: lm-evaluation-harness' ``MultiChoiceRegexFilter``
(``lm_eval/filters/extraction.py``) falls back from a task pattern to the options' texts
(step 6; it takes the first text found, kag none when two are), then to the option keys
after a colon (``:\s*([A-D])``), the origin of the "Answer: (b)" marker here; inspect_ai's
``ANSWER_PATTERN_LETTER`` (``inspect_ai/_util/pattern.py``) and ``parse_answers``
(``solver/_multiple_choice.py``) require the key to end at a non-word character, the
whole-word rule here (inspect_ai takes the last ``ANSWER:`` line; kag gives none when two
answers disagree). The windowed reading, negations, names and the ambiguity rule are kag's.

``regex:PATTERN`` (:func:`extract_regex`): the first capture group that took part in the
first match and is not empty (``(A)|(B)`` on ``B`` gives ``B``, as lm-evaluation-harness'
``RegexFilter`` does), or the whole match when the pattern has no group, with the white
space around it stripped (``answer is (.*)`` on ``answer is  B `` gives ``B``); Python ``regex`` syntax; each search is
limited to :data:`REGEX_TIMEOUT_S` seconds. A pattern that recurses (``(?R)``, ``(?1)``,
``(?&name)``) or asks for more than :data:`MAX_REPEAT` counted repetitions in all
(``(?:a{1000000}){1000000}``) is refused before it is compiled: the engine would exhaust
memory. :meth:`ExtractSpec.extract` removes the reasoning blocks (step 0) before either kind.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import regex

from kag.errors import UsageError
from kag.grading.letter import read_letter

#: Seconds one regex search may take on one response before extraction stops with an error.
REGEX_TIMEOUT_S = 1.0

# ---------------------------------------------------------------- reasoning blocks

_REASONING_OPEN = regex.compile(r"(?i)<(think|thinking|reasoning)\b[^<>]*>")
_REASONING_CLOSE = {name: regex.compile(rf"(?i)</{name}\s*>") for name in ("think", "thinking", "reasoning")}
_ANY_REASONING_CLOSE = regex.compile(r"(?i)</(?:think|thinking|reasoning)\s*>")


def strip_think(response: str) -> str:
    """``response`` without its reasoning blocks, each replaced by a space.

    The blocks are ``<think>…</think>``, ``<thinking>…</thinking>`` and
    ``<reasoning>…</reasoning>`` (tag names in any case, attributes allowed in the opening
    tag), as in the triplets parser. An opening tag pairs with the nearest closing tag of
    its name after it; what remains is then cut after the last closing tag (its opening tag
    was in the prompt) and before the first opening tag (a reasoning cut off before its
    end). Time is linear in the length: an opening tag that finds no closing tag marks its
    name as unclosed, and later opening tags of that name are not searched from again.
    """
    if _REASONING_OPEN.search(response) is None and _ANY_REASONING_CLOSE.search(response) is None:
        return response
    pieces: list[str] = []
    kept = position = 0
    unclosed: set[str] = set()
    while (opened := _REASONING_OPEN.search(response, position)) is not None:
        name = opened.group(1).lower()
        closed = None if name in unclosed else _REASONING_CLOSE[name].search(response, opened.end())
        if closed is None:
            unclosed.add(name)
            position = opened.start() + 1
            continue
        pieces += (response[kept : opened.start()], " ")
        kept = position = closed.end()
    pieces.append(response[kept:])
    text = "".join(pieces)
    last_close = None
    for last_close in _ANY_REASONING_CLOSE.finditer(text):
        pass
    if last_close is not None:
        text = " " + text[last_close.end() :]
    opened = _REASONING_OPEN.search(text)
    if opened is not None:
        text = text[: opened.start()] + " "
    return text


def extract_letter(response: str, option_keys: Collection[str]) -> str | None:
    """The option key a reader takes from ``response``, as spelled in ``option_keys``; None if none.

    See the module docstring for the rule: reasoning blocks removed (`strip_think`), then
    :func:`kag.grading.letter.read_letter`. ``option_keys`` may map each key to its option
    text (a datasets file's ``options``): a reply that names no key is then read for an
    option's text (step 6). Empty keys are ignored; no keys means nothing is extracted.
    Time is linear in the length of ``response``.
    """
    return read_letter(strip_think(response), option_keys)


@lru_cache(maxsize=64)
def compile_pattern(source: str) -> regex.Pattern[str]:
    """Compile a ``regex:`` pattern; UsageError naming ``--extract`` when it is empty or invalid."""
    if not source:
        raise UsageError("--extract regex:PATTERN: the pattern is empty")
    problem = _unbounded_construct(source)
    if problem is not None:
        raise UsageError(f"--extract regex:{source}: {problem}")
    try:
        return regex.compile(source)
    except regex.error as exc:
        raise UsageError(f"--extract regex:{source}: invalid pattern: {exc}") from None
    except (MemoryError, RecursionError, OverflowError):
        raise UsageError(f"--extract regex:{source}: the pattern is too large to compile") from None


#: The most repetitions a ``regex:`` pattern may ask for, counted over nested repeats:
#: ``(?:a{1000}){100}`` asks for 100,000. The engine unrolls counted repeats when it
#: compiles, so ``(?:a{1000000}){1000000}`` would need terabytes.
MAX_REPEAT = 100_000

_RECURSION = regex.compile(r"\(\?(?:R|[+-]?\d|&|P>)")
_COUNTED = regex.compile(r"\{(\d+)?(?:,(\d*))?\}")


def _unbounded_construct(source: str) -> str | None:
    """Why ``source`` would exhaust memory (recursion, counted repeats past `MAX_REPEAT`), or None.

    One pass over the pattern's text that knows escapes, character classes and groups:
    enough to find every recursion and to weigh every counted repeat by the repeats it
    holds (a character weighs 1, ``X{n}`` weighs n times X, a group its heaviest part).
    """
    frames: list[int] = [1]  # the heaviest part of each open group, outermost first
    last = 1  # the weight of the last atom (character, class or group)
    index, size = 0, len(source)
    while index < size:
        char = source[index]
        if char == "\\":
            index, last = index + 2, 1
        elif char == "[":
            index, last = _class_end(source, index), 1
        elif char == "(":
            if _RECURSION.match(source, index):
                return "recursive patterns ((?R), (?1), (?&name)) are not supported"
            frames.append(1)
            index += 1
        elif char == ")" and len(frames) > 1:
            last = frames.pop()
            index += 1
        elif char == "{" and (counted := _COUNTED.match(source, index)) is not None:
            low, high = counted.group(1), counted.group(2)
            last *= max(int(high or low or "0"), 1)
            if last > MAX_REPEAT:
                return f"counted repeats may ask for at most {MAX_REPEAT:,} repetitions in all"
            index = counted.end()
        else:
            index, last = index + 1, 1
        frames[-1] = max(frames[-1], last)
    return None


def _class_end(source: str, index: int) -> int:
    """Where the character class opening at ``index`` ends (past its ``]``)."""
    index += 1
    if source[index : index + 1] == "^":
        index += 1
    if source[index : index + 1] == "]":  # a "]" first is a member
        index += 1
    while index < len(source) and source[index] != "]":
        index += 2 if source[index] == "\\" else 1
    return index + 1


def extract_regex(
    response: str, pattern: str | regex.Pattern[str], *, timeout: float = REGEX_TIMEOUT_S
) -> str | None:
    """The first capture group of the first match of ``pattern`` in ``response`` (group 0 without groups).

    ``pattern`` is a compiled pattern or its source (compiled once, see `compile_pattern`).
    With groups, the first group that took part in the first match and captured more than
    white space (``(a)|(b)`` on ``"b"`` gives ``"b"``, as lm-evaluation-harness'
    ``RegexFilter``); none did (``(a)|b`` on ``"b"``): None. The text is returned with the
    white space around it stripped; None when nothing matches or only white space was
    captured. Raises :class:`RegexTimeout` when the search takes longer than ``timeout``
    seconds.
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
    captured = match.groups() if pattern.groups else (match.group(0),)
    return next((text.strip() for text in captured if text and text.strip()), None)


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

        For ``letter`` an option key as spelled in ``option_keys`` (a mapping key -> text
        lets it read options' texts); for ``regex`` the captured text (``option_keys``
        unused), to be graded by the caller.
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
