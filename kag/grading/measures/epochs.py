"""Epochs (``epochs``): the outcomes of the repeated samples of each question (its
``epochs`` folder, read only when the epochs are asked for), summarized per block by
:func:`kag.grading.epochs.summarize_epochs` (mean accuracy, its clustered standard error,
pass@k, maj@k, consistency).

It adds no counter to a block: the run holds the outcomes (``GradeRun.epochs``, keyed by
(setup, dataset), then by question), and several trees' runs merge them setup by setup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kag.grading.measures.registry import Measure, merge_by_setup, register


class EpochsCounts:
    """No counter: the outcomes are kept per question in the run."""

    # No counter: hidden from the type checker like every measure's empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()


MEASURE = register(
    Measure("epochs", EpochsCounts, json_keys=("epochs",), run_field="epochs", merge_trees=merge_by_setup)
)
