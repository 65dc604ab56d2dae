"""Evidence (``evidence``): whether the retrieval text of a file holds one of its question's
evidence names (:func:`kag.grading.evidence.evidence_record`; the retrieval text is read only
when the evidence is asked for), summarized per block by
:mod:`kag.grading.mcq.evidence_blocks`.

It adds no counter to a block: the run holds the records (``GradeRun.evidence``, keyed by
(setup, dataset), then by question), and several trees' runs merge them setup by setup.
"""

from __future__ import annotations

from kag.grading.evidence import EvidenceSummary
from kag.grading.measures.declarations import Block, JsonKey
from kag.grading.measures.registry import ByQuestion, Measure, merge_by_setup, register


def summary_to_json(summary: EvidenceSummary | None) -> dict[str, object] | None:
    """The JSON ``evidence`` block of one :class:`~kag.grading.evidence.EvidenceSummary`."""
    if summary is None:
        return None
    return {
        "questions": summary.questions,
        "recall": summary.recall,
        "hit_rate": summary.hit_rate,
        "accuracy_when_hit": summary.accuracy_when_hit,
        "accuracy_when_missed": summary.accuracy_when_missed,
    }


def evidence_to_json(b: Block) -> dict[str, object] | None:
    """The block's ``evidence``: None for a setup without records (it never retrieved)."""
    found = b.report.evidence.get(b.setup)
    if found is None:
        return None
    return summary_to_json(found.overall if b.dataset is None else found.per_dataset.get(b.dataset))


def _has_evidence(b: Block) -> bool:
    return b.report.evidence is not None


MEASURE = register(
    Measure(
        "evidence",
        needs=frozenset({"retrieval_text"}),
        json=(JsonKey("evidence", evidence_to_json, when=_has_evidence),),
        run_field="evidence",
        merge_trees=merge_by_setup,
        keeps={"evidence": ByQuestion},
        optional=True,
    )
)
