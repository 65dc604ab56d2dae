"""Retrieval evidence in `kag stats`: the ``evidence`` blocks of the report.

The walk of :mod:`.walk` reads the rendered retrieval text of an epoch-1 file only when its
question lists evidence names, and keeps one
:class:`~kag.grading.evidence.EvidenceRecord` per such file that has a retrieval text
(:func:`kag.grading.evidence.evidence_record`); the blocks aggregate them
(:func:`kag.grading.evidence.summarize_evidence`). A setup that never retrieved, or a
dataset without evidence names, has no record: its block is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kag.grading.evidence import EvidenceCounts, EvidenceRecord, EvidenceSummary

#: (setup, dataset) -> question -> the evidence record of that setup's (epoch 1) file.
EvidenceRecords = Mapping[tuple[str, str], Mapping[str, EvidenceRecord]]


@dataclass(frozen=True)
class SetupEvidence:
    """The ``evidence`` blocks of one setup: overall, and per dataset."""

    overall: EvidenceSummary | None
    per_dataset: Mapping[str, EvidenceSummary | None]


def summarize_setup_evidence(records: EvidenceRecords) -> dict[str, SetupEvidence]:
    """Per setup with records: the overall block (all its records) and one per dataset,
    each record counted once (the overall block joins the datasets' counts)."""
    grouped: dict[str, dict[str, EvidenceCounts]] = {}
    for (setup, dataset), group in records.items():
        grouped.setdefault(setup, {})[dataset] = EvidenceCounts.of(group.values())
    return {
        setup: SetupEvidence(
            EvidenceCounts.joined(per_dataset.values()).summary(),
            {dataset: counts.summary() for dataset, counts in sorted(per_dataset.items())},
        )
        for setup, per_dataset in grouped.items()
    }
