"""kag.grading.measures.layout: the compatible order of keys and columns, and what comes after it."""

from __future__ import annotations

from kag.grading.measures import registered
from kag.grading.measures.layout import BLOCK_KEYS, EPOCH_HEADERS, STATS_HEADERS, in_layout


def test_items_the_layout_names_come_first_in_its_order_then_the_rest_in_their_own() -> None:
    items = ["new2", "b", "new1", "a", "c"]
    assert in_layout(items, str, ("a", "b", "c")) == ("a", "b", "c", "new2", "new1")
    assert in_layout([], str, ("a",)) == ()
    assert in_layout(["x", "y"], str, ()) == ("x", "y")


def test_every_key_and_column_of_the_layout_is_declared_by_a_measure() -> None:
    keys = {k.key for m in registered() for k in m.json}
    headers = {c.header for m in registered() for c in m.columns if c.table == "stats"}
    assert set(BLOCK_KEYS) == keys
    assert set(STATS_HEADERS) == headers
    assert len(set(EPOCH_HEADERS)) == len(EPOCH_HEADERS)


def test_the_first_keys_of_a_block_are_the_rust_tools_and_measures_interleave() -> None:
    assert BLOCK_KEYS[:12] == (
        "total",
        "correct",
        "incorrect",
        "errors",
        "parsed",
        "accuracy",
        "precision",
        "coverage",
        "avg_generation_secs",
        "total_generation_secs",
        "avg_context_length",
        "retrieval",
    )
    owner = {k.key: m.name for m in registered() for k in m.json}
    assert [owner[k] for k in ("coverage", "avg_generation_secs", "accuracy_ci95", "abstentions")] == [
        "accuracy",
        "timing",
        "interval",
        "accuracy",
    ]
