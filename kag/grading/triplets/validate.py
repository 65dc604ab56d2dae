"""validate_schema: which predicted items are triplets the grader can match.

A triplet is valid when it is an object whose ``source`` and ``target`` are objects with
non-empty string ``title`` and ``type``, whose ``relation`` is a non-empty string, and
whose ``weight`` is an ``int`` or ``float`` (``bool`` rejected, although Python counts it
as an int), finite, in ``[0, 1]``. "Non-empty" means something other than whitespace.
Extra keys are allowed. Invalid items never crash anything: they get a reason instead.
"""

from __future__ import annotations

import math
from typing import Any

from kag.grading.triplets.model import Triplet
from kag.grading.triplets.normalize import normalize_relation, normalize_title


def _entity_problem(value: Any, key: str) -> str | None:
    if not isinstance(value, dict):
        return f"'{key}' is missing" if value is None else f"'{key}' is not an object"
    for field in ("title", "type"):
        text = value.get(field)
        if not isinstance(text, str):
            return f"'{key}.{field}' is missing" if text is None else f"'{key}.{field}' is not a string"
        if not text.strip():
            return f"'{key}.{field}' is empty"
    return None


def triplet_problem(item: Any) -> str | None:
    """Why ``item`` is not a valid triplet, or ``None`` when it is."""
    if not isinstance(item, dict):
        return f"not an object ({type(item).__name__})"
    for key in ("source", "target"):
        problem = _entity_problem(item.get(key), key)
        if problem is not None:
            return problem
    relation = item.get("relation")
    if not isinstance(relation, str):
        return "'relation' is missing" if relation is None else "'relation' is not a string"
    if not relation.strip():
        return "'relation' is empty"
    weight = item.get("weight")
    if weight is None:
        return "'weight' is missing"
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        return f"'weight' is not a number ({type(weight).__name__})"
    if not math.isfinite(weight) or not 0.0 <= weight <= 1.0:
        return f"'weight' {weight!r} is outside [0, 1]"
    return None


def to_triplet(item: dict[str, Any]) -> Triplet:
    """A valid item (``triplet_problem(item) is None``) as a `Triplet` with normalized forms."""
    source = item["source"]
    target = item["target"]
    relation = item["relation"]
    source_title = source["title"]
    target_title = target["title"]
    return Triplet(
        source_title,
        source["type"],
        target_title,
        target["type"],
        relation,
        float(item["weight"]),
        normalize_title(source_title),
        normalize_title(target_title),
        normalize_relation(relation),
    )


def _fast_triplet(item: Any) -> Triplet | None:
    """`to_triplet` of a valid item in one pass, or ``None`` for anything unusual.

    The common case checked with exact type tests (JSON gives no subclasses; ``type(w) is
    int`` excludes bool; NaN fails the range test). ``None`` sends the item to the full
    check, which either accepts it or names the problem.
    """
    if type(item) is not dict:
        return None
    source = item.get("source")
    target = item.get("target")
    relation = item.get("relation")
    weight = item.get("weight")
    if not (type(source) is dict and type(target) is dict and type(relation) is str):
        return None
    if not ((type(weight) is float or type(weight) is int) and 0.0 <= weight <= 1.0):
        return None
    source_title = source.get("title")
    source_type = source.get("type")
    target_title = target.get("title")
    target_type = target.get("type")
    if not (
        type(source_title) is str
        and type(source_type) is str
        and type(target_title) is str
        and type(target_type) is str
        and source_title.strip()
        and source_type.strip()
        and target_title.strip()
        and target_type.strip()
        and relation.strip()
    ):
        return None
    return Triplet(
        source_title,
        source_type,
        target_title,
        target_type,
        relation,
        float(weight),
        normalize_title(source_title),
        normalize_title(target_title),
        normalize_relation(relation),
    )


def validate_items(items: tuple[Any, ...]) -> tuple[list[tuple[int, Triplet]], list[tuple[int, str]]]:
    """Split predicted items into ``(index, Triplet)`` and ``(index, reason)`` lists."""
    valid: list[tuple[int, Triplet]] = []
    invalid: list[tuple[int, str]] = []
    for index, item in enumerate(items):
        triplet = _fast_triplet(item)
        if triplet is not None:
            valid.append((index, triplet))
            continue
        problem = triplet_problem(item)
        if problem is None:
            valid.append((index, to_triplet(item)))
        else:
            invalid.append((index, problem))
    return valid, invalid
