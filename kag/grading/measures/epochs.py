"""Epochs (``epochs``): the outcomes of the repeated samples of each question (its
``epochs`` folder, read only when the epochs are asked for), summarized per block by
:func:`kag.grading.epochs.summarize_epochs` (mean accuracy, its clustered standard error,
maj@k, consistency, and the registered reducers' values such as pass@k).

It adds no counter to a block: the run holds the outcomes (``GradeRun.epochs``, keyed by
(setup, dataset), then by question), and several trees' runs merge them setup by setup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kag.grading.measures.declarations import TEXT, Block, Column, JsonKey
from kag.grading.measures.layout import EPOCH_KEYS, in_layout
from kag.grading.measures.registry import ByQuestion, Measure, merge_by_setup, reducers, register
from kag.grading.percent import pct

#: The keys of an ``epochs`` block that the summary itself holds (an
#: :class:`~kag.grading.epochs.EpochSummary`; the reducers' keys join them, :func:`epochs_to_json`).
SUMMARY_KEYS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("n", lambda e: e.n),
    ("mean_accuracy", lambda e: e.mean_accuracy),
    ("stderr", lambda e: e.stderr),
    ("pass_at_k", lambda e: e.pass_at_k),
    ("maj_at_k", lambda e: e.maj_at_k),
    ("consistent", lambda e: e.consistent),
    ("questions", lambda e: e.questions),
    ("incomplete", lambda e: e.incomplete),
)


def epochs_to_json(summary: Any) -> dict[str, object] | None:
    """The JSON ``epochs`` block of one :class:`~kag.grading.epochs.EpochSummary` (None: no
    question has all ``n`` epochs): the summary's keys and every registered reducer's, in
    the order of :data:`~.layout.EPOCH_KEYS` (the measures, then how many questions they
    cover and how many were left out for having fewer than ``n`` epochs), a reducer it
    does not name after."""
    if summary is None:
        return None
    values = [(key, value(summary)) for key, value in SUMMARY_KEYS]
    values += [(r.key, r.to_json(summary.reduced[r.key])) for r in reducers()]
    return dict(in_layout(values, lambda pair: pair[0], EPOCH_KEYS))


def _block_epochs(b: Block) -> dict[str, object] | None:
    found = b.report.epochs[b.setup]
    return epochs_to_json(found.overall if b.dataset is None else found.per_dataset.get(b.dataset))


def _has_epochs(b: Block) -> bool:
    """Only the blocks of a setup with later epochs in the tree have the key."""
    return b.setup in b.report.epochs


def _column(header: str, cell: Callable[[Any], str], width: int, legend: str = "") -> Column[Any]:
    """A column of the epochs table, whose rows are :class:`~kag.grading.epochs.EpochSummary`."""
    return Column(header, cell, TEXT, width, table="epochs", legend=legend)


MEASURE = register(
    Measure(
        "epochs",
        json=(JsonKey("epochs", _block_epochs, when=_has_epochs),),
        columns=(
            _column(
                "EPOCHS",
                lambda e: str(e.n),
                6,
                "EPOCHS = epochs measured (N), Q = questions with all N epochs, "
                "INC = questions left out for having fewer",
            ),
            _column("Q", lambda e: str(e.questions), 4),
            _column("INC", lambda e: str(e.incomplete), 4),
            _column(
                "MEAN%",
                lambda e: pct(e.mean_accuracy),
                7,
                "MEAN% = mean over every answer, SE% = its standard error clustered by question",
            ),
            _column("SE%", lambda e: pct(e.stderr), 6),
            _column(
                "MAJ%",
                lambda e: pct(e.maj_at_k),
                7,
                "MAJ% = most frequent answer right, CONS% = all N answers right or all wrong",
            ),
            _column("CONS%", lambda e: pct(e.consistent), 7),
        ),
        run_field="epochs",
        merge_trees=merge_by_setup,
        keeps={"epochs": ByQuestion},
        optional=True,
    )
)
