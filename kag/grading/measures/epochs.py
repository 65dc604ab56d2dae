"""Epochs (``epochs``): the outcomes of the repeated samples of each question (its
``epochs`` folder, read only when the epochs are asked for), summarized per block by
:func:`kag.grading.epochs.summarize_epochs` (mean accuracy, its clustered standard error,
pass@k, maj@k, consistency).

It adds no counter to a block: the run holds the outcomes (``GradeRun.epochs``, keyed by
(setup, dataset), then by question), and several trees' runs merge them setup by setup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kag.grading.measures.declarations import Block, JsonKey
from kag.grading.measures.registry import Measure, merge_by_setup, register


class EpochsCounts:
    """No counter: the outcomes are kept per question in the run."""

    # No counter: hidden from the type checker like every measure's empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()


def epochs_to_json(summary: Any) -> dict[str, object] | None:
    """The JSON ``epochs`` block of one :class:`~kag.grading.epochs.EpochSummary` (None: no
    question has all ``n`` epochs): the measures, then how many questions they cover and
    how many were left out for having fewer than ``n`` epochs."""
    if summary is None:
        return None
    return {
        "n": summary.n,
        "mean_accuracy": summary.mean_accuracy,
        "stderr": summary.stderr,
        "pass_at_k": summary.pass_at_k,
        "pass_at": {str(k): value for k, value in summary.pass_at.items()},
        "maj_at_k": summary.maj_at_k,
        "consistent": summary.consistent,
        "questions": summary.questions,
        "incomplete": summary.incomplete,
    }


def _block_epochs(b: Block) -> dict[str, object] | None:
    found = b.report.epochs[b.setup]
    return epochs_to_json(found.overall if b.dataset is None else found.per_dataset.get(b.dataset))


def _has_epochs(b: Block) -> bool:
    """Only the blocks of a setup with later epochs in the tree have the key."""
    return b.setup in b.report.epochs


MEASURE = register(
    Measure(
        "epochs",
        EpochsCounts,
        json=(JsonKey("epochs", _block_epochs, when=_has_epochs),),
        run_field="epochs",
        merge_trees=merge_by_setup,
    )
)
