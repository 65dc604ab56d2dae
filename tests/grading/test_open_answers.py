"""open_answers: SQuAD v1.1 normalization, exact match and token F1 against hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.grading.open_answers import exact_match, normalize_answer, token_f1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The  City of Paris!", "city of paris"),
        ("Don't stop", "dont stop"),  # punctuation is removed, not replaced by a space
        ("an apple, a pear", "apple pear"),
        ("theory anthem", "theory anthem"),  # articles only as whole words
        ("THE", ""),
        ("", ""),
        ("\tVitamin\nC.", "vitamin c"),
        ("«Paris»", "«paris»"),  # string.punctuation is ASCII only, as in the official script
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("Paris", ["City of Paris", "Paris"], 1.0),
        ("paris.", ["Paris"], 1.0),
        ("the City of Paris", ["City of Paris"], 1.0),
        ("Paris, France", ["Paris"], 0.0),
        ("", [""], 1.0),  # both normalize to ""
        ("the", ["a"], 1.0),
        ("", ["Paris"], 0.0),
    ],
)
def test_exact_match(prediction: str, answers: list[str], expected: float) -> None:
    assert exact_match(prediction, answers) == expected


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        # P = {paris, france}, G = {paris}: same 1, precision 1/2, recall 1 -> 2*(1/2)/(3/2) = 2/3
        ("Paris, France", ["Paris"], 2 / 3),
        ("the city of Paris", ["City of Paris"], 1.0),
        # P = {in, city}, G = {city, of, paris}: same 1, p 1/2, r 1/3 -> 2*(1/6)/(5/6) = 2/5
        ("in the city", ["City of Paris"], 0.4),
        # multisets: same = min(2, 1) = 1, p 1/2, r 1 -> 2/3
        ("paris paris", ["paris"], 2 / 3),
        # best over answers: vs "red" 1/2 (p 1/3, r 1); vs "big red truck" 2/3 (p 2/3, r 2/3)
        ("big red car", ["red", "big red truck"], 2 / 3),
        ("London", ["Paris"], 0.0),
        # SQuAD v1.1: no common token means F1 0, even when both sides are empty
        ("", [""], 0.0),
        ("the", ["a"], 0.0),
        ("", ["Paris"], 0.0),
        ("Paris", [""], 0.0),
    ],
)
def test_token_f1(prediction: str, answers: list[str], expected: float) -> None:
    assert token_f1(prediction, answers) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("metric", [exact_match, token_f1])
def test_no_reference_is_an_error(metric) -> None:
    with pytest.raises(ValueError, match="at least one reference"):
        metric("Paris", [])


words = st.lists(
    st.sampled_from(["a", "an", "the", "Paris", "city", "of", "x", "x.", "Don't", "  "]), max_size=6
)
phrase = words.map(" ".join)


@given(phrase, st.lists(phrase, min_size=1, max_size=3))
def test_scores_in_unit_interval_and_em_implies_full_f1(prediction: str, answers: list[str]) -> None:
    em = exact_match(prediction, answers)
    f1 = token_f1(prediction, answers)
    assert em in (0.0, 1.0)
    assert 0.0 <= f1 <= 1.0
    if em == 1.0 and normalize_answer(prediction):
        assert f1 == pytest.approx(1.0)


@given(phrase, phrase)
def test_f1_symmetric_and_normalize_idempotent(a: str, b: str) -> None:
    assert token_f1(a, [b]) == pytest.approx(token_f1(b, [a]))
    assert normalize_answer(normalize_answer(a)) == normalize_answer(a)
