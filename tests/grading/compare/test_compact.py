"""The comparisons of compact records (what `kag view` holds of a million files) equal those
of the full records, flips aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.datasets import load_datasets
from kag.grading.compare import (
    CompactAnswer,
    analyse,
    analyse_indexed,
    best_setup,
    index_answers,
    load_source_answers,
)
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.trees import one_tree
from kag.grading.record import Outcome
from tests.commands.test_compare_cli import PREFIX, build_tree


@pytest.mark.parametrize("baseline", [None, "native", "kag"])
def test_compact_analysis_equals_the_full_one(tmp_path: Path, baseline: str | None) -> None:
    datasets, results = build_tree(tmp_path)
    loaded = load_source_answers(load_datasets(datasets), one_tree(results), GradeRequest(PREFIX))
    full = analyse(loaded, baseline, n_resamples=200, seed=3)
    compact = [CompactAnswer.of(a) for a in loaded.answers]
    base = baseline if baseline is not None else best_setup(compact)
    lean = analyse_indexed(index_answers(compact), loaded.profiles, base, n_resamples=200, seed=3)
    assert full.flips and lean.flips == ()
    assert lean.comparisons == full.comparisons
    assert lean.impacts == full.impacts and lean.notes == full.notes
    assert any(impact.hurt_responses for impact in lean.impacts)


def test_index_shares_one_key_per_question(tmp_path: Path) -> None:
    datasets, results = build_tree(tmp_path)
    loaded = load_source_answers(load_datasets(datasets), one_tree(results), GradeRequest(PREFIX))
    by_setup = index_answers(CompactAnswer.of(a) for a in loaded.answers)
    first, second = (by_setup[s] for s in ("native", "other"))
    shared = [k for k in first if k in second]
    assert shared and all(next(k2 for k2 in second if k2 == k) is k for k in shared)
    error = next(a for a in by_setup["kag"].values() if a.outcome is Outcome.ERR)
    assert error.response_or_error == "(error)" and not error.correct


def test_records_made_with_one_shared_table_hold_each_repeated_value_once(tmp_path: Path) -> None:
    datasets, results = build_tree(tmp_path)
    loaded = load_source_answers(load_datasets(datasets), one_tree(results), GradeRequest(PREFIX))
    shared: dict[object, object] = {}
    # Names made anew for each record, as rows read back from an index are.
    made = [CompactAnswer.of(a, f"lab/{a.setup}", shared) for a in loaded.answers]
    assert [(m.setup, m.key, m.outcome) for m in made] == [
        ("lab/" + a.setup, a.key, a.outcome) for a in loaded.answers
    ]
    by_setup: dict[str, list[CompactAnswer]] = {}
    for m in made:
        by_setup.setdefault(m.setup, []).append(m)
    for group in by_setup.values():
        assert all(m.setup is group[0].setup for m in group)
    first, *others = made
    same_question = [m for m in others if m.key == first.key]
    assert same_question and all(
        m.dataset is first.dataset and m.question is first.question for m in same_question
    )
