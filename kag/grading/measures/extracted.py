"""The extracted grade (``extracted``, under ``--extract``): OK, WRONG and not extracted
of the same MCQ files (:mod:`kag.grading.mcq.extracted` grades them), and
XACC = extracted OK / TOT, the denominator of ACC, so that the two compare directly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kag.grading.measures.accuracy import accuracy
from kag.grading.measures.declarations import TEXT_MD_HTML, Block, Column, JsonKey, Shown
from kag.grading.measures.registry import Counters, Measure, merge_first, register
from kag.grading.percent import pct
from kag.grading.record import GradedFile, Outcome


@dataclass(slots=True)
class ExtractedCounts(Counters):
    """The extracted grade's counters of a block (all 0 without ``--extract``)."""

    extracted_correct: int = 0
    extracted_incorrect: int = 0
    not_extracted: int = 0


def add(counts: ExtractedCounts, graded: GradedFile) -> None:
    """Count the file's extracted grade, when it was graded so."""
    x = graded.extracted
    if x is not None:
        if x is Outcome.OK:
            counts.extracted_correct += 1
        elif x is Outcome.WRONG:
            counts.extracted_incorrect += 1
        else:
            counts.not_extracted += 1


def extracted_to_json(b: Block) -> dict[str, Any]:
    """The ``extracted`` block: counts and accuracy = correct / total (None when 0), and
    with later epochs the ``epochs`` block under the extracted grade."""
    m = b.metrics
    out: dict[str, Any] = {
        "correct": m.extracted_correct,
        "incorrect": m.extracted_incorrect,
        "not_extracted": m.not_extracted,
        "accuracy": m.extracted_accuracy,
    }
    found = b.report.extracted_epochs.get(b.setup) if b.report is not None else None
    if found is not None:
        # Imported here, not above: importing it registers the epochs measure, whose place
        # in the registry is after this one.
        from kag.grading.measures.epochs import epochs_to_json

        out["epochs"] = epochs_to_json(
            found.overall if b.dataset is None else found.per_dataset.get(b.dataset)
        )
    return out


def _graded(b: Block) -> bool:
    return b.report.extract is not None


def _extracted(s: Shown) -> bool:
    return s.extract is not None


# The run keeps the spec the files were graded with (``GradeRun.extract``), every tree's the same.
MEASURE = register(
    Measure(
        "extracted",
        ExtractedCounts,
        add,
        needs=frozenset({"extracted"}),
        # XACC = extracted correct / TOT (the denominator of ACC, the accuracy's); None when TOT = 0.
        block_values={"extracted_accuracy": lambda m: accuracy(m.extracted_correct, m.total)},
        json=(JsonKey("extracted", extracted_to_json, when=_graded),),
        columns=(
            Column("XACC%", lambda b: pct(b.metrics.extracted_accuracy), TEXT_MD_HTML, 7, when=_extracted),
        ),
        run_field="extract",
        merge_trees=merge_first,
    )
)
