"""`GradeRequest`: what a walk grades, one frozen value; the walk keeps exactly what it asks for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.datasets import load_datasets
from kag.grading.mcq.request import RECORDS, GradeRequest
from kag.grading.mcq.walk import grade_tree
from kag.grading.measures import kept_parts, optional_names
from kag.results import OkResult, result_path, write_result


def test_lists_of_globs_are_kept_as_tuples_and_the_request_is_hashable() -> None:
    request = GradeRequest("p-", ["a*"], ["d"], measures={"epochs"})
    assert (request.setups, request.dataset_globs, request.measures) == (
        ("a*",),
        ("d",),
        frozenset({"epochs"}),
    )
    assert hash(request) == hash(GradeRequest("p-", ("a*",), ("d",), measures=frozenset({"epochs"})))


def test_a_single_string_is_not_a_list_of_globs() -> None:
    with pytest.raises(TypeError, match="setups: expected a sequence of globs, got the string 'gpt-\\*'"):
        GradeRequest(setups="gpt-*")
    with pytest.raises(TypeError, match="dataset_globs"):
        GradeRequest(dataset_globs="d")


def test_only_the_optional_outputs_can_be_asked_for() -> None:
    with pytest.raises(ValueError, match="measures: accuracy, epoch cannot be asked for"):
        GradeRequest(measures=frozenset({"epoch", "accuracy", "records"}))
    assert GradeRequest(measures=optional_names() - {"judge"}).records


def test_derived_requests() -> None:
    base = GradeRequest("p-", ("s",), extract="letter")
    assert base.glob_prefix == "" and not base.records
    labelled = base.of_tree("run1")
    assert (labelled.label, labelled.glob_prefix, labelled.setups) == ("run1", "run1/", ("s",))
    asking = labelled.asking({RECORDS})
    assert asking.records and asking.measures == {RECORDS} and asking.label == "run1"
    assert base.measures == frozenset()  # frozen: the derived requests are new values


def test_the_optional_measures_keep_every_optional_output_of_a_run() -> None:
    assert set(kept_parts(optional_names())) == {"records", "open_records", "epochs", "evidence"}


def test_the_walk_keeps_what_is_asked_and_nothing_else(tmp_path: Path) -> None:
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    (tmp_path / "ds.json").write_text(json.dumps({"d": {"q": {"input": "?", "output": mcq}}}))
    write_result(result_path(tmp_path / "r", "d", "q", "", "s"), OkResult("A"))
    datasets = load_datasets(tmp_path / "ds.json")
    fields = ("records", "open_records", "epochs", "evidence")
    nothing = grade_tree(datasets, tmp_path / "r", GradeRequest(), workers=1)
    assert [getattr(nothing, f) for f in fields] == [None] * 4
    assert grade_tree(datasets, tmp_path / "r", workers=1) == nothing  # None: the default request
    records = grade_tree(datasets, tmp_path / "r", GradeRequest(measures={RECORDS}), workers=1)
    assert records.records is not None and [r.setup for r in records.records] == ["s"]
    assert (records.open_records, records.epochs, records.evidence) == ((), None, None)
    epochs = grade_tree(datasets, tmp_path / "r", GradeRequest(measures={"epochs"}), workers=1)
    assert (epochs.records, epochs.epochs, epochs.evidence) == (None, {}, None)
