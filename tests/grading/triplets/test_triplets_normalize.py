"""normalize: table cases, whole-word grounding, and the idempotence invariant."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kag.grading.triplets.normalize import (
    contains_words,
    ends_with_legal_suffix,
    normalize_relation,
    normalize_text,
    normalize_title,
    relation_key,
)
from tests.conftest import TEST_DATA

CASES = json.loads((TEST_DATA / "triplets" / "normalize_cases.json").read_text())["cases"]


@pytest.mark.parametrize(("raw", "title", "text"), CASES, ids=[case[0] for case in CASES])
def test_table(raw: str, title: str, text: str) -> None:
    assert normalize_title(raw) == title
    assert normalize_text(raw) == text
    assert normalize_relation(raw) == text


def test_relation_key_restores_underscores() -> None:
    assert relation_key(normalize_relation("Based On")) == "based_on"


@pytest.mark.parametrize(
    ("haystack", "needle", "expected"),
    [
        ("marie curie discovered polonium", "polonium", True),
        ("marie curie discovered polonium", "marie curie", True),
        ("a partial view", "art", False),
        ("a bee-hive", "bee", True),
        ("bees", "bee", False),
        ("the bee", "bee", True),
        ("bee", "bee", True),
        ("abee bee", "bee", True),  # the second occurrence is a whole word
        ("anything", "", False),
        ("", "x", False),
        ("x2 x", "x", True),
        ("x2", "x", False),
    ],
)
def test_contains_words(haystack: str, needle: str, expected: bool) -> None:
    assert contains_words(haystack, needle) is expected


text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("abcXYZ _-.,;:!?()\"' \t\nÅßﬁ１２ＡＢ　")),
        st.characters(codec="utf-8"),
    ),
    max_size=30,
)


@given(text)
def test_normalizing_twice_equals_once(value: str) -> None:
    once = normalize_text(value)
    assert normalize_text(once) == once
    assert normalize_relation(normalize_relation(value)) == normalize_relation(value)


@given(
    st.lists(st.sampled_from(["acme", "co.,", "ltd", "inc", "x", ",", "corp.", "gmbh", " "]), max_size=6).map(
        " ".join
    )
)
def test_title_idempotent_unless_a_second_suffix_remains(value: str) -> None:
    once = normalize_title(value)
    assume(not ends_with_legal_suffix(once))
    assert normalize_title(once) == once


@given(text)
def test_title_idempotent_on_arbitrary_text(value: str) -> None:
    once = normalize_title(value)
    assume(not ends_with_legal_suffix(once))
    assert normalize_title(once) == once


def _bounded_occurrence(haystack: str, needle: str) -> bool:
    size = len(needle)
    return bool(needle) and any(
        haystack.startswith(needle, start)
        and (start == 0 or not haystack[start - 1].isalnum())
        and (start + size == len(haystack) or not haystack[start + size].isalnum())
        for start in range(len(haystack))
    )


@given(st.text(alphabet="ab é", max_size=80), st.text(alphabet="ab é", max_size=6))
def test_contains_words_equals_a_search_from_every_position(haystack: str, needle: str) -> None:
    # Periodic needles over a small alphabet reach the linear pass after the first searches.
    assert contains_words(haystack, needle) is _bounded_occurrence(haystack, needle)


@pytest.mark.parametrize(
    ("haystack", "needle", "expected"),
    [
        ("a" * 1000, "a" * 500, False),  # 501 occurrences, none bounded
        ("a" * 1000 + " " + "a" * 500, "a" * 500, True),  # the last one is
        ("ab" * 100 + " ab", "ab", True),
        ("aba" * 50, "aba", False),
    ],
)
def test_contains_words_after_many_unbounded_occurrences(haystack: str, needle: str, expected: bool) -> None:
    assert contains_words(haystack, needle) is expected
