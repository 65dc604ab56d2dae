"""Evidence (``evidence``): whether the retrieval text of a file holds one of its question's
evidence names (:func:`kag.grading.evidence.evidence_record`; the retrieval text is read only
when the evidence is asked for), summarized per block by
:mod:`kag.grading.mcq.evidence_blocks`.

It adds no counter to a block: the run holds the records (``GradeRun.evidence``, keyed by
(setup, dataset), then by question), and several trees' runs merge them setup by setup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kag.grading.measures.registry import Measure, merge_by_setup, register


class EvidenceCounts:
    """No counter: the records are kept per question in the run."""

    # No counter: hidden from the type checker like every measure's empty __slots__.
    if not TYPE_CHECKING:
        __slots__ = ()


MEASURE = register(
    Measure(
        "evidence",
        EvidenceCounts,
        needs=frozenset({"retrieval_text"}),
        json_keys=("evidence",),
        run_field="evidence",
        merge_trees=merge_by_setup,
    )
)
