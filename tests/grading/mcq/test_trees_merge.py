"""`merge_runs`: the runs of several labelled trees become one run, every field of
:class:`GradeRun` merged (setups renamed ``LABEL/setup``), none dropped."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kag.grading.epochs import EpochOutcome
from kag.grading.evidence import EvidenceRecord
from kag.grading.mcq import trees
from kag.grading.mcq.metrics import GradeRun, Metrics, Tally, Unreadable
from kag.grading.mcq.trees import merge_runs
from kag.grading.record import GradedFile, Outcome
from kag.grading.verdicts import JudgeKey


def metrics(*outcomes: Outcome) -> Metrics:
    tally = Tally()
    for outcome in outcomes:
        tally.add(GradedFile("d", "q", "s", outcome, None if outcome is Outcome.ERR else "A"))
    return tally.freeze()


def graded(question: str, setup: str, outcome: Outcome = Outcome.OK) -> GradedFile:
    return GradedFile("d", question, setup, outcome, "A", extracted=Outcome.OK)


def open_graded(question: str, setup: str, f1: float) -> GradedFile:
    exact = Outcome.OK if f1 == 1 else Outcome.WRONG
    return GradedFile("t", question, setup, exact, "Paris", exact_match=float(f1 == 1), f1=f1)


JUDGE = JudgeKey("p", "m", ("openai", "http://127.0.0.1:1"), "0" * 64)
RIGHT, WRONG = EpochOutcome(True, "A"), EpochOutcome(False, "B")
HIT, MISS = EvidenceRecord((True,), True), EvidenceRecord((False,), False)
M1, M2, M3 = metrics(Outcome.OK), metrics(Outcome.WRONG, Outcome.OK), metrics(Outcome.ERR)

# Every field set, to values that tell the trees apart; b's setups sort before a's in
# places, so that the merged keys are seen re-sorted.
RUN_A = GradeRun(
    tallies={("s", "d"): M1, ("t", "d"): M2},
    datasets=2,
    scorable_questions=5,
    skipped_files=1,
    ignored_files=2,
    unreadable=(Unreadable("A/d/q/x.json", "not JSON"),),
    records=(graded("q1", "s"), graded("q2", "s", Outcome.WRONG)),
    scorable_open_questions=3,
    extract="letter",
    epochs={("s", "d"): {"q1": (RIGHT, WRONG)}},
    evidence={("s", "d"): {"q1": HIT}},
    open_records=(open_graded("o1", "s", 1.0),),
    judge=JUDGE,
)
RUN_B = GradeRun(
    tallies={("s", "d"): M3},
    datasets=2,
    scorable_questions=5,
    skipped_files=4,
    ignored_files=3,
    unreadable=(Unreadable("B/d/q/y.json", "empty"), Unreadable("B/d/r/y.json", "empty")),
    records=(graded("q1", "s", Outcome.ERR),),
    scorable_open_questions=3,
    extract="letter",
    epochs={("s", "d"): {"q1": (WRONG, WRONG, RIGHT)}},
    evidence={("s", "d"): {"q1": MISS}},
    open_records=(open_graded("o1", "s", 0.5),),
    judge=JUDGE,
)


def _is_default(run: GradeRun, field: dataclasses.Field[Any]) -> bool:
    value = getattr(run, field.name)
    if field.default is not dataclasses.MISSING:
        return value == field.default
    return not value  # a field without default: unset means empty or zero


def test_the_runs_of_this_test_set_every_field() -> None:
    # A new GradeRun field fails here first: set it in RUN_A and RUN_B, then merge it.
    for run in (RUN_A, RUN_B):
        assert [f.name for f in dataclasses.fields(GradeRun) if _is_default(run, f)] == []


def test_every_field_survives_the_merge() -> None:
    merged = merge_runs([("b", RUN_B), ("a", RUN_A)])
    assert [f.name for f in dataclasses.fields(GradeRun) if _is_default(merged, f)] == []


def test_each_field_merged_by_hand() -> None:
    merged = merge_runs([("b", RUN_B), ("a", RUN_A)])
    assert merged == GradeRun(
        tallies={("a/s", "d"): M1, ("a/t", "d"): M2, ("b/s", "d"): M3},
        datasets=2,
        scorable_questions=5,
        skipped_files=5,
        ignored_files=5,
        # In the order the trees were given, each tree's as it was (paths already real).
        unreadable=(*RUN_B.unreadable, *RUN_A.unreadable),
        records=(
            graded("q1", "a/s"),
            graded("q1", "b/s", Outcome.ERR),
            graded("q2", "a/s", Outcome.WRONG),
        ),
        scorable_open_questions=3,
        extract="letter",
        epochs={("a/s", "d"): {"q1": (RIGHT, WRONG)}, ("b/s", "d"): {"q1": (WRONG, WRONG, RIGHT)}},
        evidence={("a/s", "d"): {"q1": HIT}, ("b/s", "d"): {"q1": MISS}},
        open_records=(open_graded("o1", "a/s", 1.0), open_graded("o1", "b/s", 0.5)),
        judge=JUDGE,
    )
    # The keyed fields are in key order, as a single tree's are (the reports list them so).
    for keyed in (merged.tallies, merged.epochs, merged.evidence):
        assert keyed is not None and list(keyed) == sorted(keyed)


def test_what_a_tree_was_not_asked_for_stays_none() -> None:
    bare = dataclasses.replace(
        RUN_B, records=None, open_records=None, epochs=None, evidence=None, scorable_open_questions=None
    )
    merged = merge_runs([("a", dataclasses.replace(RUN_A, records=None, open_records=None)), ("b", bare)])
    assert (merged.records, merged.open_records, merged.epochs, merged.evidence) == (None, None, None, None)
    # the datasets file's and the options' values are the first run's (every tree has the same)
    assert (merged.scorable_open_questions, merged.extract) == (3, "letter")
    alone = merge_runs([("b", bare)])
    assert alone.scorable_open_questions is None and alone.epochs is None and alone.evidence is None


def test_asked_for_but_empty_stays_empty() -> None:
    # Epochs asked for on trees without any epoch folder: {} (no block), not None, as for one tree.
    empty = [
        (label, dataclasses.replace(run, epochs={}, evidence={}))
        for label, run in (("a", RUN_A), ("b", RUN_B))
    ]
    merged = merge_runs(empty)
    assert (merged.epochs, merged.evidence) == ({}, {})


def test_no_run_to_merge() -> None:
    with pytest.raises(ValueError, match="no run to merge"):
        merge_runs([])


def test_a_field_no_rule_merges_fails_the_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    # A field forgotten by the rules would come back as its default (None, 0): refused instead.
    own = trees._merge_own

    def forgetful(runs: trees.LabelledRuns) -> dict[str, Any]:
        merged = own(runs)
        del merged["skipped_files"], merged["open_records"]
        return merged

    monkeypatch.setattr(trees, "_merge_own", forgetful)
    with pytest.raises(TypeError, match="no rule merges the run field"):
        merge_runs([("b", RUN_B), ("a", RUN_A)])
    # the message names the fields, in GradeRun's order
    with pytest.raises(TypeError, match="skipped_files, open_records$"):
        merge_runs([("a", RUN_A)])
