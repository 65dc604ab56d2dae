"""The first JSON value that starts at a given ``[`` or ``{`` of raw model text, in linear time.

`json.JSONDecoder.raw_decode` tried at every bracket re-reads the rest of the text each
time it fails (1.8 MB of ``[1,1,1,…`` took 76 s) and recurses once per nesting level
(1,000 nested ``[`` raised `RecursionError`). `scan_container` checks the same grammar
as Python's ``json`` module (``NaN``, ``Infinity`` and ``-Infinity`` included, control
characters in strings rejected) without recursion, and records the outcome of every
container it passes (outside strings) in ``known``: a container that closed is valid
JSON on its own, and one still open where the scan failed fails at the same place when
tried on its own. So no bracket outside a string is scanned twice. The caller
(`kag.grading.triplets.io.parse_model_output`) lets ``raw_decode`` try only the first
bracket of a text unchecked (the usual output is one valid array), and otherwise only
spans known to be valid and at most `MAX_DEPTH` deep.
"""

from __future__ import annotations

import re

MAX_DEPTH = 100  # nesting levels; a triplet list needs three

_WS = r"[ \t\n\r]*"
_STRING = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_SCALAR = rf"(?:{_STRING}|{_NUMBER}|true|false|null|NaN|Infinity|-Infinity)"

_PAIR = rf"{_STRING}{_WS}:{_WS}{_SCALAR}"
# A container holding scalars only (a triplet's {"title": …, "type": …}): one regex call,
# and not recorded in `known` (a later start there is decided by `next_bracket` alone).
_FLAT_CONTAINER = (
    rf"\[{_WS}(?:{_SCALAR}(?:{_WS},{_WS}{_SCALAR})*+{_WS})?\]"
    rf"|\{{{_WS}(?:{_PAIR}(?:{_WS},{_WS}{_PAIR})*+{_WS})?\}}"
)
_VALUE = rf"(?:{_SCALAR}|{_FLAT_CONTAINER})"

_WHITESPACE = re.compile(_WS)
_SCALAR_VALUE = re.compile(_SCALAR)
_FLAT_VALUE = re.compile(_FLAT_CONTAINER)
_KEY = re.compile(rf"{_STRING}{_WS}:{_WS}")
# Runs of scalar or flat elements are matched in one regex call, so a long flat array
# costs one call instead of one Python step per element.
_ARRAY_RUN = re.compile(rf"(?:{_VALUE}{_WS},{_WS})*+")
_OBJECT_RUN = re.compile(rf"(?:{_VALUE}{_WS},{_WS}{_STRING}{_WS}:{_WS})*+")
_CLOSER = {"[": "]", "{": "}"}
# A container's first stretch of scalars, found with the bracket in one search: enough to
# decide most brackets in prose without a Python step per bracket.
_BRACKET = re.compile(r"[\[{]")
_FLAT = re.compile(
    rf"\[{_WS}(?P<array_run>(?:{_SCALAR}{_WS},{_WS})*+)(?P<array_tail>{_SCALAR}{_WS})?"
    rf"|\{{{_WS}(?P<object_run>(?:{_PAIR}{_WS},{_WS})*+)(?P<object_tail>{_PAIR}{_WS})?"
)


class TooDeep(Exception):
    """A container nested more than `MAX_DEPTH` levels deep was met."""


def too_deep(value: object) -> bool:
    """Whether a decoded JSON value nests containers more than `MAX_DEPTH` levels deep (the
    value itself is level 1): what `scan_container` raises `TooDeep` for."""
    level: list[tuple[object, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        if depth > MAX_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        level += [(child, depth + 1) for child in children if isinstance(child, list | dict)]
    return False


def next_bracket(text: str, position: int) -> tuple[int, int | None] | None:
    """The next ``[`` or ``{`` at or after ``position``, with what its first stretch says:
    ``(start, end)`` for a valid container holding no other, ``(start, -1)`` for an invalid
    one, ``(start, None)`` when a nested container may follow and `scan_container` must
    decide; ``None`` when no bracket is left."""
    bracket = _BRACKET.search(text, position)  # a plain search skips prose far faster
    if bracket is None:
        return None
    start = bracket.start()
    flat = _FLAT.match(text, start)
    assert flat is not None  # both alternatives start with the bracket found
    i = flat.end()
    char = text[i : i + 1]
    if text[start] == "[":
        run, tail, closer, nested = flat.group("array_run"), flat.group("array_tail"), "]", "[{"
    else:
        run, tail, closer, nested = flat.group("object_run"), flat.group("object_tail"), "}", '"'
    if tail is not None:
        return start, i + 1 if char == closer else -1
    if char == closer:
        return start, -1 if run else i + 1
    if char and char in nested:
        return start, None
    return start, -1


def scan_container(text: str, start: int, known: dict[int, int]) -> int:
    """The end (exclusive) of the JSON array or object at ``text[start]``, or -1 if it is invalid.

    ``known`` maps the start of every container the scan met outside strings to its end,
    or to -1 when it was still open where the scan failed; the start itself included.
    Raises `TooDeep` past `MAX_DEPTH` nesting levels.
    """
    size = len(text)
    stack: list[int] = []
    i = start
    want_value = True
    while True:
        if want_value:
            if stack:
                run = _ARRAY_RUN if text[stack[-1]] == "[" else _OBJECT_RUN
                i = run.match(text, i).end()  # type: ignore[union-attr]  # `*+` always matches
            char = text[i] if i < size else ""
            if char in _CLOSER:
                flat = _FLAT_VALUE.match(text, i) if stack else None
                if flat is not None:
                    if len(stack) >= MAX_DEPTH:
                        raise TooDeep
                    i = flat.end()
                    want_value = False
                    continue
                stack.append(i)
                if len(stack) > MAX_DEPTH:
                    raise TooDeep
                i = _WHITESPACE.match(text, i + 1).end()  # type: ignore[union-attr]
                if text.startswith(_CLOSER[char], i):  # empty
                    i += 1
                    known[stack.pop()] = i
                    if not stack:
                        return i
                    want_value = False
                elif char == "{":
                    key = _KEY.match(text, i)
                    if key is None:
                        break
                    i = key.end()
                continue
            scalar = _SCALAR_VALUE.match(text, i)
            if scalar is None:
                break
            i = scalar.end()
            want_value = False
        else:
            i = _WHITESPACE.match(text, i).end()  # type: ignore[union-attr]
            char = text[i] if i < size else ""
            top = stack[-1]
            if char == ",":
                i = _WHITESPACE.match(text, i + 1).end()  # type: ignore[union-attr]
                if text[top] == "{":
                    key = _KEY.match(text, i)
                    if key is None:
                        break
                    i = key.end()
                want_value = True
            elif char == _CLOSER[text[top]]:
                i += 1
                known[stack.pop()] = i
                if not stack:
                    return i
            else:
                break
    for opened in stack:
        known[opened] = -1
    return -1
