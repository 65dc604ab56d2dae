"""The retrieval_quality measure: its sums of a block, folded record by record."""

from __future__ import annotations

import itertools
import random

from kag.grading.measures.retrieval_quality import RetrievalQualityCounts, add_quality
from kag.grading.retrieval_quality import (
    QualityRecord,
    entity_recall,
    is_reached,
    seed_recall_at_k,
    seed_reciprocal_rank,
    triple_f1,
    triple_precision,
    triple_recall,
)


def _by_figures(counts: RetrievalQualityCounts, r: QualityRecord) -> None:
    """A record folded in by the figure functions, one call each (the plain formula)."""
    counts.rq_questions += 1
    recall = entity_recall(r)
    if recall is not None:
        counts.rq_entity_questions += 1
        counts.rq_entity_recall += recall
    t_recall, t_precision, t_f1 = triple_recall(r), triple_precision(r), triple_f1(r)
    if t_recall is not None and t_precision is not None and t_f1 is not None:
        counts.rq_triple_questions += 1
        counts.rq_triple_recall += t_recall
        counts.rq_triple_precision += t_precision
        counts.rq_triple_f1 += t_f1
    s_recall, s_rr = seed_recall_at_k(r), seed_reciprocal_rank(r)
    if s_recall is not None and s_rr is not None:
        counts.rq_seed_questions += 1
        counts.rq_seed_recall += s_recall
        counts.rq_seed_rr += s_rr
    outcome = ("reached" if is_reached(r) else "missed") + ("_right" if r.correct else "_wrong")
    setattr(counts, f"rq_{outcome}", getattr(counts, f"rq_{outcome}") + 1)


def _records() -> list[QualityRecord]:
    """Every record of small counts (none, some and all found; no relationship retrieved;
    no, empty and ranked seeds), both grades."""
    out = []
    for entities, triples, retrieved in itertools.product(range(4), range(4), (0, 1, 3, 7)):
        for found, t_found, matched in itertools.product(
            range(entities + 1), range(triples + 1), range(retrieved + 1)
        ):
            for seeds in (None, (), tuple(range(entities)), (0,) * entities):
                for correct in (False, True):
                    out.append(
                        QualityRecord(entities, found, triples, t_found, retrieved, matched, seeds, correct)
                    )
    rng = random.Random(3)  # and larger counts, whose figures round in more ways
    for _ in range(5000):
        entities, triples, retrieved = rng.randrange(60), rng.randrange(1, 60), rng.randrange(1, 3000)
        matched = rng.randrange(retrieved + 1)
        out.append(
            QualityRecord(
                entities,
                rng.randrange(entities + 1),
                triples,
                rng.randrange(triples + 1),
                retrieved,
                matched,
                None,
                rng.random() < 0.5,
            )
        )
    return out


def test_a_record_adds_what_the_figure_functions_give_in_the_same_order() -> None:
    # The sums are floats added record by record: the same values in the same order give
    # the same bits, which the reports print (hence equality, not a tolerance).
    records = _records()
    random.Random(7).shuffle(records)
    written, plain = RetrievalQualityCounts(), RetrievalQualityCounts()
    for r in records:
        add_quality(written, r)
        _by_figures(plain, r)
        assert written == plain, r
    assert written.rq_questions == len(records) > 10_000
    assert 0 < written.rq_triple_f1 < written.rq_triple_questions
    assert written.rq_seed_questions > 0 and written.rq_missed_right > 0
