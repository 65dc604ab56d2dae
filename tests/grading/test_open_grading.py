"""kag.grading.open_grading: which accepted answers are gold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.datasets import load_datasets
from kag.errors import InputError
from kag.grading.open_grading import check_open_gold


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
