"""`tree_part`: the part of a merged run that is one labelled tree's, named as that tree
graded alone names its setups (the inverse of `merge_runs` for what is kept by setup)."""

from __future__ import annotations

import dataclasses

from kag.grading.compare.trees import tree_part
from kag.grading.mcq.trees import merge_runs
from tests.grading.mcq.test_trees_merge import RUN_A, RUN_B

BY_SETUP = ("tallies", "records", "open_records", "epochs", "evidence")


def test_tree_part_gives_back_each_trees_own_fields() -> None:
    merged = merge_runs([("a", RUN_A), ("b", RUN_B)])
    for label, run in (("a", RUN_A), ("b", RUN_B)):
        part = tree_part(merged, label)
        assert {name: getattr(part, name) for name in BY_SETUP} == {
            name: getattr(run, name) for name in BY_SETUP
        }
        # The fields not kept by setup stay the merged run's.
        assert part.skipped_files == merged.skipped_files == RUN_A.skipped_files + RUN_B.skipped_files


def test_tree_part_of_an_unknown_label_is_empty_and_keeps_what_was_not_asked_for() -> None:
    merged = merge_runs([("a", RUN_A), ("b", RUN_B)])
    part = tree_part(merged, "c")
    assert (part.tallies, part.records, part.open_records, part.epochs, part.evidence) == ({}, (), (), {}, {})
    # An optional field one tree was not graded for is None in the merged run and its parts.
    bare = tree_part(merge_runs([("a", dataclasses.replace(RUN_A, epochs=None)), ("b", RUN_B)]), "a")
    assert bare.epochs is None and bare.evidence == RUN_A.evidence
