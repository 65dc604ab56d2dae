"""Retrieval quality (``retrieval_quality``): the retrieved graph against the questions'
gold evidence (:mod:`kag.grading.retrieval_quality`), per block the means of the
per-question figures over the questions that have that kind of gold and a retrieval.

The walk sets each graded file's :class:`~kag.grading.retrieval_quality.QualityRecord` when
evidence is measured (the datasets file lists some); the counters are sums and counts that
merge by addition. A block has the JSON key when the report measured evidence; its value is
None when no question of the block qualifies, and a figure None when no question has its
kind of gold (or, for the seed figures, a file with seeds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kag.grading.measures.declarations import MD_HTML, Block, Column, JsonKey, Shown
from kag.grading.measures.registry import Counters, Measure, register
from kag.grading.percent import pct
from kag.grading.record import GradedFile
from kag.grading.retrieval_quality import (
    QualityRecord,
    seed_recall_at_k,
    seed_reciprocal_rank,
)


@dataclass(slots=True)
class RetrievalQualityCounts(Counters):
    """The retrieval-quality sums of a block (the float sums of per-question figures)."""

    rq_questions: int = 0
    rq_entity_questions: int = 0
    rq_entity_recall: float = 0.0
    rq_triple_questions: int = 0
    rq_triple_recall: float = 0.0
    rq_triple_precision: float = 0.0
    rq_triple_f1: float = 0.0
    rq_seed_questions: int = 0
    rq_seed_recall: float = 0.0
    rq_seed_rr: float = 0.0
    rq_reached_right: int = 0
    rq_reached_wrong: int = 0
    rq_missed_right: int = 0
    rq_missed_wrong: int = 0


def add(counts: RetrievalQualityCounts, graded: GradedFile) -> None:
    """Fold a file's quality record in, when it has one (an MCQ or an open question's file)."""
    if graded.retrieval_quality is not None:
        add_quality(counts, graded.retrieval_quality)


def add_quality(counts: RetrievalQualityCounts, r: QualityRecord) -> None:
    """Fold one quality record into ``counts`` (for an open question ``r.correct`` is the
    exact match): the figures of :mod:`kag.grading.retrieval_quality` (``entity_recall``,
    ``triple_recall``, ``triple_precision``, ``triple_f1``, ``is_reached``) by their
    formulas written out, the same floats added in the same order (this runs for every file
    with a retrieval); the seed figures, rarer, by their functions."""
    counts.rq_questions += 1
    entities, triples = r.entities, r.triples
    if entities:
        counts.rq_entity_questions += 1
        counts.rq_entity_recall += r.entities_found / entities
    if triples:
        recall = r.triples_found / triples
        retrieved = r.relationships
        precision = r.relationships_matched / retrieved if retrieved else 0.0
        counts.rq_triple_questions += 1
        counts.rq_triple_recall += recall
        counts.rq_triple_precision += precision
        counts.rq_triple_f1 += 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        reached = r.triples_found == triples
    else:
        reached = r.entities_found == entities
    if r.seed_ranks:
        s_recall, s_rr = seed_recall_at_k(r), seed_reciprocal_rank(r)
        if s_recall is not None and s_rr is not None:
            counts.rq_seed_questions += 1
            counts.rq_seed_recall += s_recall
            counts.rq_seed_rr += s_rr
    if reached:
        if r.correct:
            counts.rq_reached_right += 1
        else:
            counts.rq_reached_wrong += 1
    elif r.correct:
        counts.rq_missed_right += 1
    else:
        counts.rq_missed_wrong += 1


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


def quality_to_json(m: Any) -> dict[str, Any] | None:
    """The ``retrieval_quality`` object of a block's counters; None when no question qualifies."""
    if m.rq_questions == 0:
        return None
    return {
        "questions": m.rq_questions,
        "entity_recall": _mean(m.rq_entity_recall, m.rq_entity_questions),
        "triple_recall": _mean(m.rq_triple_recall, m.rq_triple_questions),
        "triple_precision": _mean(m.rq_triple_precision, m.rq_triple_questions),
        "triple_f1": _mean(m.rq_triple_f1, m.rq_triple_questions),
        "reached": m.rq_reached_right + m.rq_reached_wrong,
        "seed_recall_at_k": _mean(m.rq_seed_recall, m.rq_seed_questions),
        "seed_mrr": _mean(m.rq_seed_rr, m.rq_seed_questions),
        "outcomes": {
            "reached_right": m.rq_reached_right,
            "reached_wrong": m.rq_reached_wrong,
            "missed_right": m.rq_missed_right,
            "missed_wrong": m.rq_missed_wrong,
        },
    }


def _block_to_json(b: Block) -> dict[str, Any] | None:
    return quality_to_json(b.metrics)


def reached_rate(m: Any) -> float | None:
    """The share of the block's questions with gold and a retrieval whose gold was reached."""
    return _mean(m.rq_reached_right + m.rq_reached_wrong, m.rq_questions)


def _cell(value: float | None) -> str | None:
    # A block without a question to measure (a setup without retrieval) leaves it blank.
    return None if value is None else pct(value)


def _shown(s: Shown) -> bool:
    return s.evidence


def _measured(b: Block) -> bool:
    # Evidence is measured (and so the records are made) exactly when the datasets file has some.
    return b.report is not None and b.report.evidence is not None


MEASURE = register(
    Measure(
        "retrieval_quality",
        RetrievalQualityCounts,
        add,
        add_open=add,
        needs=frozenset({"retrieval_text"}),
        json=(JsonKey("retrieval_quality", _block_to_json, when=_measured),),
        columns=(
            Column("REACHED%", lambda b: _cell(reached_rate(b.metrics)), MD_HTML, when=_shown),
            Column(
                "E-RECALL%",
                lambda b: _cell(_mean(b.metrics.rq_entity_recall, b.metrics.rq_entity_questions)),
                MD_HTML,
                when=_shown,
            ),
            Column(
                "T-RECALL%",
                lambda b: _cell(_mean(b.metrics.rq_triple_recall, b.metrics.rq_triple_questions)),
                MD_HTML,
                when=_shown,
            ),
        ),
        junit=True,
    )
)
