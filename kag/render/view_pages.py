"""What the templates of `kag view`'s pages are given beside their data: the state every
link keeps (the grid's filters and sort, the baseline), the names the grid's menus offer,
a question's previous and next in the grid it was opened from, and on a bad request the
names that would have been valid, each a link to the page with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kag.errors import UsageError
from kag.view.choices import (
    OUTCOMES,
    RETRIEVALS,
    SORTS,
    BadChoice,
    UnknownChoice,
    link_state,
    option_key,
    read_choice,
)
from kag.view.query import View

#: The sort menu's entries, in its order.
SORT_LABELS = {
    "question": "question",
    "-question": "question, reversed",
    "correct": "fewest columns right first",
    "-correct": "most columns right first",
    "vertices": "fewest retrieved vertices first",
    "-vertices": "most retrieved vertices first",
}
assert tuple(SORT_LABELS) == SORTS


def menus(view: View) -> dict[str, Any]:
    """The names the grid's menus offer: every graded setup, the datasets of the grid's
    questions, the outcomes, the retrieval choices (``with_evidence``: whether the
    datasets file has gold evidence, so that the menu is offered) and the sorts."""
    snap = view.snapshot
    return {
        "all_setups": snap.setups,
        "datasets": snap.datasets,
        "outcomes": OUTCOMES,
        "retrievals": RETRIEVALS,
        "with_evidence": snap.run.evidence is not None,
        "sorts": SORT_LABELS,
    }


def questions_context(view: View, params: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The grid page's state and menus (the rows themselves come from :meth:`View.questions`)."""
    snap = view.snapshot
    choice = read_choice(params, snap.setups, snap.datasets)
    return {**menus(view), "state": link_state(params, choice), "flip": choice.flip}


def question_nav(
    view: View, params: Mapping[str, Sequence[str]], detail: Mapping[str, Any]
) -> dict[str, Any]:
    """A question page's place in the grid its address names (previous, next, the grid's
    page), and the option key each setup's response is (by the strict rule)."""
    snap = view.snapshot
    choice = read_choice(params, snap.setups, snap.datasets)
    key = (detail["dataset"], detail["question"])
    named = {s["setup"]: option_key(s.get("response"), detail["options"]) for s in detail["setups"]}
    return {
        "state": link_state(params, choice),
        "flip": choice.flip,
        "nav": view.neighbours(params, key),
        "named": named,
        "sorts": SORT_LABELS,
    }


def error_context(
    view: View,
    segments: Sequence[str],
    params: Mapping[str, Sequence[str]],
    exc: UsageError,
    link: Callable[..., str],
) -> dict[str, Any]:
    """A bad request's page: the message; for a name the index does not have, the valid ones,
    each a link to the page asked for with that name instead; for the grid, its menus."""
    drop = exc.key if isinstance(exc, BadChoice) else ""
    state = link_state(params, drop=drop)
    valid: list[tuple[str, str | None]] = []
    if isinstance(exc, UnknownChoice):
        for name in exc.names:
            fixed = dict(state)
            if exc.key == "setup":
                given = [s for s in params.get("setup", []) if s]
                fixed["setup"] = [name if s == exc.value else s for s in given]
            elif exc.key != "flip":
                fixed[exc.key] = name
            if exc.key == "flip":
                valid.append((name, None))  # a pair is chosen with the menus below
            elif segments[:1] == ["q"]:
                valid.append((name, link("q", *segments[1:], **fixed)))
            else:
                valid.append((name, link("overview" if not segments else "questions", **fixed)))
    return {
        **menus(view),
        "error": str(exc),
        "kind": exc.kind if isinstance(exc, UnknownChoice) else None,
        "valid": valid,
        "state": state,
        "flip": None,
        "grid": bool(segments),
    }
