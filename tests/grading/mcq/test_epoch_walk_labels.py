"""The later epochs of a question are selected by the same ``--setup`` globs as epoch 1's
files, labelled names included (``<label>/<setup>``, the names of a report over several
trees)."""

from __future__ import annotations

import json
from pathlib import Path

from kag.datasets import parse_datasets
from kag.grading.epochs import EpochOutcome
from kag.grading.mcq import GradeRequest, grade_tree
from kag.results import ErrorResult, OkResult, epoch_result_path, write_result

MCQ = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
# setup -> question -> answers, epoch 1 first (None: an error file).
ANSWERS = {"x": {"q1": ["A", "B", "A"], "q2": ["B", None]}, "y": {"q1": ["B", "A"]}}


def test_labelled_setup_globs_select_the_later_epochs(tmp_path: Path) -> None:
    path = tmp_path / "datasets.json"
    path.write_text(
        json.dumps({"d": {"q1": {"input": "?", "output": MCQ}, "q2": {"input": "?", "output": MCQ}}})
    )
    datasets = parse_datasets(path.read_bytes(), path)
    for setup, questions in ANSWERS.items():
        for question, answers in questions.items():
            for epoch, answer in enumerate(answers, start=1):
                result = ErrorResult("failed") if answer is None else OkResult(answer)
                write_result(epoch_result_path(tmp_path / "t", "d", question, "", setup, epoch), result)

    labelled = grade_tree(
        datasets, tmp_path / "t", GradeRequest(setups=("L/x",), label="L", measures={"epochs"}), workers=1
    )
    alone = grade_tree(datasets, tmp_path / "t", GradeRequest(setups=("x",), measures={"epochs"}), workers=1)
    right, wrong = EpochOutcome(True, "A"), EpochOutcome(False, "B")
    expected = {("x", "d"): {"q1": (right, wrong, right), "q2": (wrong, EpochOutcome(False, None))}}
    assert labelled.epochs == alone.epochs == expected
    # The label is part of the name the globs see: the bare name matches nothing then.
    assert (
        grade_tree(
            datasets, tmp_path / "t", GradeRequest(setups=("x",), label="L", measures={"epochs"})
        ).epochs
        == {}
    )
