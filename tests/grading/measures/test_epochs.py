"""kag.grading.measures.epochs: the JSON epochs block from the summary and the registered reducers."""

from __future__ import annotations

from kag.grading.epochs import EpochOutcome, summarize_epochs
from kag.grading.measures import reducers
from kag.grading.measures.epochs import epochs_to_json
from kag.grading.measures.layout import EPOCH_KEYS


def _question(*correct: bool) -> list[EpochOutcome]:
    return [EpochOutcome(c, "A" if c else "B") for c in correct]


def test_every_reducer_runs_on_the_complete_questions_and_fills_its_key() -> None:
    summary = summarize_epochs([_question(True, False), _question(False, False), _question(True)])
    assert summary is not None and summary.questions == 2
    assert set(summary.reduced) == {r.key for r in reducers()}
    assert summary.reduced["pass_at"] == {1: 0.25, 2: 0.5}


def test_the_block_has_the_compatible_keys_first_then_the_other_reducers() -> None:
    summary = summarize_epochs([_question(True, False, True), _question(False, False, True)])
    block = epochs_to_json(summary)
    assert block is not None
    assert tuple(block)[: len(EPOCH_KEYS)] == EPOCH_KEYS
    assert set(block) == set(EPOCH_KEYS) | {r.key for r in reducers()}
    assert block["pass_at"] == {"1": 0.5, "2": 5 / 6, "3": 1.0}
    assert epochs_to_json(None) is None
