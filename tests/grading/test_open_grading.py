"""kag.grading.open_grading: which accepted answers are gold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.datasets import load_datasets
from kag.errors import InputError
from kag.grading.open_grading import (
    check_open_gold,
    empty_gold_warning,
    grade_open_response,
    usable_open_gold,
)


def datasets_with(tmp_path: Path, **questions: list[str]):
    path = tmp_path / "datasets.json"
    doc = {
        "trivia": {
            qid: {"input": "?", "output": {"type": "Open", "answers": a}} for qid, a in questions.items()
        }
    }
    path.write_text(json.dumps(doc))
    return load_datasets(path)


@pytest.mark.parametrize("alias", ["", "The", "!!!", "A", " a  AN the ", "...?", "\t\n"])
def test_an_answer_that_normalizes_to_nothing_is_no_gold(tmp_path: Path, alias: str):
    loaded = datasets_with(tmp_path, q1=["Paris"], q2=["Rome", alias])
    with pytest.raises(InputError) as info:
        check_open_gold(loaded)
    message = str(info.value)
    assert message.startswith(f"{loaded.path}: trivia/q2: 'output.answers' item 2, {alias!r}, ")
    assert "normalizes to nothing" in message and "\n" not in message


def test_every_question_is_counted_and_a_long_answer_cut(tmp_path: Path):
    loaded = datasets_with(tmp_path, q1=["!" * 5000], q2=["the"], q3=["ok"])
    with pytest.raises(InputError) as info:
        check_open_gold(loaded)
    message = str(info.value)
    assert "trivia/q1" in message and "(1 more question(s) have one)" in message
    assert len(message) < 400


def test_answers_with_a_word_left_are_gold(tmp_path: Path):
    check_open_gold(datasets_with(tmp_path, q1=["The Who"], q2=["A-1"], q3=["«»"], q4=["1"]))


def test_answers_that_are_no_gold_are_set_aside(tmp_path: Path):
    loaded = datasets_with(tmp_path, q1=["Paris"], q2=["Rome", "\t", "the"], q3=["...", "an"])
    usable, found = usable_open_gold(loaded)
    assert [(g.question, g.item, g.answer, g.alone) for g in found] == [
        ("q2", 2, "\t", False),
        ("q2", 3, "the", False),
        ("q3", 1, "...", True),
        ("q3", 2, "an", True),
    ]
    q1, q2, q3 = (usable.get("trivia", q) for q in ("q1", "q2", "q3"))
    assert q1 is loaded.get("trivia", "q1")
    assert q2 is not None and q2.open is not None and q2.open.answers == ("Rome",)
    assert q3 is not None and q3.open is None and q3.mcq is None  # no alias left: not scored
    assert loaded.get("trivia", "q2").open.answers == ("Rome", "\t", "the")  # the original is unchanged
    assert usable.path == loaded.path
    warning = empty_gold_warning(usable, found)
    assert warning == (
        f"{loaded.path}: ignored 4 accepted answer(s) that normalize to nothing (case, punctuation and "
        "articles are ignored: only an empty reply would match them): trivia/q2: 'output.answers' item 2, "
        "'\\t' (and 3 more); 1 question(s) left with none are not scored; kag datasets check lists them"
    )


def test_gold_without_empty_answers_is_returned_as_is(tmp_path: Path):
    loaded = datasets_with(tmp_path, q1=["Paris"])
    assert usable_open_gold(loaded) == (loaded, [])
    assert empty_gold_warning(loaded, []) is None


def test_an_empty_reply_never_matches_an_answer_that_is_no_gold():
    assert grade_open_response("", ["Paris", "the"]) == (0.0, 0.0)
    assert grade_open_response("", ["..."]) == (0.0, 0.0)
    assert grade_open_response("The Paris!", ["Paris", "the"]) == (1.0, 1.0)
    with pytest.raises(ValueError, match="at least one"):
        grade_open_response("x", [])
