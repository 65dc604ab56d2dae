"""The grid's choices in `kag view`: its query parameters read and checked against the
names the index holds, the state every link of a page keeps, and the option a cell's
answer names.

A page keeps its state in its address (see docs/view.md): the filters and sort of the
grid, and the overview's baseline. A name that is not one of the index's (a mistyped
setup, ``dataset=nope``) is an :class:`UnknownChoice` that names the valid ones, never
an empty grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from kag.errors import UsageError
from kag.grading.record import Outcome
from kag.grading.rule import is_correct

SORTS = ("question", "-question", "correct", "-correct", "vertices", "-vertices")
OUTCOMES = tuple(o.value for o in Outcome)
#: ``retrieval=``: a column's retrieval reached the question's gold evidence, or missed it.
RETRIEVALS = ("reached", "missed")
#: The parameters a page keeps in every link it makes (``page`` is the grid's own).
STATE = ("dataset", "setup", "outcome", "retrieval", "flip", "disagree", "q", "sort", "baseline")
TRUE = frozenset({"1", "true", "yes"})
MAX_NAMES_SHOWN = 20


class BadChoice(UsageError):
    """A query parameter ``key`` a page cannot use."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class UnknownChoice(BadChoice):
    """A parameter whose value is not one the index has: ``key``, the value, the valid ``names``."""

    def __init__(self, key: str, value: str, kind: str, names: Sequence[str]) -> None:
        shown = ", ".join(names[:MAX_NAMES_SHOWN]) or "none"
        if len(names) > MAX_NAMES_SHOWN:
            shown += f", … ({len(names) - MAX_NAMES_SHOWN} more)"
        super().__init__(key, f"{key}={value}: no {kind} has that name ({kind}s: {shown})")
        self.value = value
        self.kind = kind
        self.names = tuple(names)


class Choice(NamedTuple):
    """The grid's filters and sort, checked (a key of the lists the snapshot keeps)."""

    dataset: str | None
    setups: tuple[str, ...]
    outcome: str | None
    flip: tuple[str, str] | None
    disagree: bool
    pattern: str | None
    sort: str
    retrieval: str | None = None


def one(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    """The last value of ``name``; None when absent or empty."""
    values = params.get(name)
    return values[-1] if values and values[-1] != "" else None


def read_page(params: Mapping[str, Sequence[str]]) -> int:
    """The grid's ``page`` (1 when absent)."""
    text = one(params, "page") or "1"
    if not text.isdigit() or len(text) > 9:
        raise BadChoice("page", f"page must be a positive whole number (got {text!r})")
    return int(text)


def read_flip(values: Sequence[str], setups: Sequence[str]) -> tuple[str, str] | None:
    """The flip pair (A right, B not) of ``flip=A,B`` or of ``flip=A&flip=B`` (the page's two
    menus, which also hold names with a comma); None when every value is empty."""
    given = [v for v in values if v != ""]
    if not given:
        return None
    if len(values) == 2:  # the two menus, A then B
        a, b = values
        if a == "" or b == "":
            raise BadChoice("flip", "flip: choose two setups, the one right and the one not")
    elif len(given) == 1:
        text = given[0]
        if "," not in text and text in setups:  # one of the two menus left unset
            raise BadChoice("flip", "flip: choose two setups, the one right and the one not")
        # Split where both sides are setups (a setup's name may hold a comma itself).
        pairs = [(text[:i], text[i + 1 :]) for i, ch in enumerate(text) if ch == ","]
        found = [p for p in pairs if p[0] in setups and p[1] in setups]
        if len(found) != 1:
            if pairs and len(found) == 0:
                a, b = pairs[0]
                raise UnknownChoice("flip", a if a not in setups else b, "setup", setups)
            raise BadChoice("flip", f"flip=A,B takes two graded setup names (got {text!r})")
        a, b = found[0]
    else:
        raise BadChoice("flip", f"flip takes A,B or two values (got {len(given)})")
    for name in (a, b):
        if name not in setups:
            raise UnknownChoice("flip", name, "setup", setups)
    if a == b:
        raise BadChoice("flip", f"flip: choose two different setups (got {a!r} twice)")
    return a, b


def read_choice(
    params: Mapping[str, Sequence[str]], setups: Sequence[str], datasets: Sequence[str]
) -> Choice:
    """The grid's choice of ``params`` (see docs/view.md), checked against the graded
    ``setups`` and the ``datasets`` of the grid's questions."""
    dataset = one(params, "dataset")
    if dataset is not None and dataset not in datasets:
        raise UnknownChoice("dataset", dataset, "dataset", datasets)
    columns = [s for s in params.get("setup", []) if s] or list(setups)
    for s in columns:
        if s not in setups:
            raise UnknownChoice("setup", s, "setup", setups)
    outcome = one(params, "outcome")
    if outcome is not None and outcome not in OUTCOMES:
        raise UnknownChoice("outcome", outcome, "outcome", OUTCOMES)
    retrieval = one(params, "retrieval")
    if retrieval is not None and retrieval not in RETRIEVALS:
        raise UnknownChoice("retrieval", retrieval, "retrieval", RETRIEVALS)
    sort = one(params, "sort") or "question"
    if sort not in SORTS:
        raise UnknownChoice("sort", sort, "sort", SORTS)
    return Choice(
        dataset,
        tuple(columns),
        outcome,
        read_flip(params.get("flip", []), setups),
        one(params, "disagree") in TRUE,
        one(params, "q"),
        sort,
        retrieval,
    )


def neighbours(keys: Sequence[tuple[str, str]], key: tuple[str, str], page_size: int) -> dict[str, Any]:
    """Where the question ``key`` stands in the grid's list ``keys``: ``position`` (from 1;
    None when the filters leave it out), ``total``, the ``previous`` and ``next`` questions
    (None at either end) and the grid's ``page`` that shows it."""
    try:
        i = keys.index(key)
    except ValueError:
        return {"position": None, "total": len(keys), "previous": None, "next": None, "page": 1}
    return {
        "position": i + 1,
        "total": len(keys),
        "previous": keys[i - 1] if i > 0 else None,
        "next": keys[i + 1] if i + 1 < len(keys) else None,
        "page": i // page_size + 1,
    }


def link_state(
    params: Mapping[str, Sequence[str]], choice: Choice | None = None, drop: str = ""
) -> dict[str, Any]:
    """What every link of a page carries on: the :data:`STATE` parameters that are set
    (``drop`` left out), one value each, ``setup`` a list; ``flip`` the two names of
    ``choice`` when given (the form that holds any name), else as it came."""
    out: dict[str, Any] = {}
    for key in STATE:
        values = [v for v in params.get(key, []) if v != ""]
        if key == drop or not values:
            continue
        if key == "setup":
            out[key] = values
        elif key == "flip":
            out[key] = list(choice.flip) if choice is not None and choice.flip else values
        elif key == "disagree":
            if values[-1] in TRUE:
                out[key] = "1"
        else:
            out[key] = values[-1]
    return out


def option_key(answer: str | None, options: Mapping[str, str] | None) -> str | None:
    """The option key ``answer`` is by the strict rule (trimmed, ASCII case aside), or None."""
    if answer is None or not options:
        return None
    for key in options:
        if is_correct(answer, key):
            return key
    return None
