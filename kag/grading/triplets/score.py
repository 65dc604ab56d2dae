"""Scoring: one gold entry against one prediction, then a prediction file against the gold file.

Per entry (all strings normalized, see `normalize`; ``sim`` from `similarity`):

- ``schema`` = valid / predicted items; N/A when nothing was predicted; 0.0 if malformed.
- ``entity_f1``: P = m/|pred entities|, R = m/|gold entities|, F1 = 2PR/(P+R) (0 when
  P+R = 0), where the entity sets hold the distinct titles of the valid (resp. gold)
  triplets and ``m`` is the size of a maximum one-to-one pairing between them using pairs
  with ``sim > 0`` (equal, or at or above the gate). N/A when both sets are empty.
- alignment: ``align(p, g) = 0.45·sim(src) + 0.45·sim(tgt) + 0.10·sim(rel)``; an assignment
  maximizing ``Σ align`` over valid predicted × gold triplets (`assign.assign_max`; past
  ``PYTHON_MAX_COLS`` triplets on a side, one float64 array built in place, same pairs);
  assigned pairs with ``align ≥ 0.50`` are *accepted* (1e-9 tolerance for float noise).
- ``relation_acc`` = accepted pairs with equal relations / accepted pairs; N/A if none.
- ``weight`` = mean over accepted pairs of ``1 if d ≤ 0.10 else max(0, 1 − (d − 0.10)/0.40)``,
  ``d = |w_pred − w_gold|`` (1e-9 tolerance, so 0.8 vs 0.7 counts as 0.10); N/A if none.
- ``grounding`` = share of the distinct predicted entities that are grounded (a gold entity
  of the entry, or found in the normalized prompt as whole words); N/A without valid triplets.
- ``composite`` = Σ wₐ·axisₐ / Σ wₐ over applicable axes (0.30/0.25/0.20/0.10/0.15). Empty
  gold: 1.0 iff the prediction is an empty list or missing, else 0.0.
- unmatched valid predictions (not in an accepted pair), first rule that fits: ``self_loop``
  (source = target; dropped), ``invalid_relation`` (not in the relation set),
  ``ungrounded`` (source or target not grounded), else ``novel_grounded``.

Ties: when several assignments reach the same total, the solver's deterministic choice is
taken. Three shortcuts skip the solver, each returning the pairs the solver returns: no
positive ``align`` (nothing can be accepted); a single row or column (the solver's warm
start takes the first maximum, as does ``list.index(max(...))``); positive entries forming a
partial permutation (every optimal assignment holds exactly those pairs plus zero-valued
ones, by an exchange argument: swapping a positive pair in gains its value).

An entry past `MAX_ENTRY_PAIRS` (predicted × gold triplets, or entities outside exact mode)
is refused by `grade_triplets` with `InputError` before any entry is graded.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from kag.embedding import Embedder
from kag.errors import InputError
from kag.gcpause import collector_paused
from kag.grading.triplets.assign import PYTHON_MAX_COLS, assign_max, linear_sum_assignment, solve_wide_max
from kag.grading.triplets.io import load_gold, load_predictions
from kag.grading.triplets.model import (
    ACCEPT_THRESHOLD,
    ALIGN_WEIGHTS,
    AXES,
    AXIS_WEIGHTS,
    DEFAULT_RELATIONS,
    HALLUCINATION_CLASSES,
    MAX_ENTRY_PAIRS,
    PRF,
    EntryScore,
    GoldEntry,
    MatchMode,
    Pair,
    Prediction,
    RunSummary,
    Triplet,
    TripletReport,
    Unmatched,
)
from kag.grading.triplets.normalize import contains_words, normalize_relation, relation_key
from kag.grading.triplets.similarity import Similarity, make_similarity
from kag.grading.triplets.validate import validate_items

log = logging.getLogger(__name__)

_TOLERANCE = 1e-9
Validated = tuple[list[tuple[int, Triplet]], list[tuple[int, str]]]


def weight_agreement(predicted: float, gold: float) -> float:
    """``1.0 if d ≤ 0.10 else max(0, 1 − (d − 0.10)/0.40)`` with ``d = |predicted − gold|``.

    ``d ≤ 0.10`` allows 1e-9 of float noise: ``|0.8 − 0.7|`` is 0.10000000000000009.
    """
    distance = abs(predicted - gold)
    if distance <= 0.10 + _TOLERANCE:
        return 1.0
    return max(0.0, 1.0 - (distance - 0.10) / 0.40)


def f1_score(precision: float, recall: float) -> float:
    """``2PR/(P+R)``, 0.0 when ``P + R = 0``."""
    total = precision + recall
    return 2.0 * precision * recall / total if total > 0.0 else 0.0


def composite_score(axes: dict[str, float | None]) -> float | None:
    """Weighted mean of the applicable axes (``None`` ones left out), ``None`` if none apply."""
    weighted = total = 0.0
    for name in AXES:
        value = axes.get(name)
        if value is not None:
            weighted += AXIS_WEIGHTS[name] * value
            total += AXIS_WEIGHTS[name]
    return weighted / total if total > 0.0 else None


def assign_pairs(align: list[list[float]]) -> list[tuple[int, int]]:
    """The ``(pred, gold)`` pairs with positive ``align`` of an optimal (maximum) assignment.

    ``align`` is a list of equal-length rows. The result is what
    ``assign.assign_max(align)`` gives, minus zero-valued pairs; the shortcuts (see the
    module docstring) return the same pairs without running the solver.
    """
    if not align or not align[0]:
        return []
    row_positives = [sum(1 for value in row if value > 0.0) for row in align]
    if not any(row_positives):
        return []
    if len(align) == 1:
        row = align[0]
        return [(0, row.index(max(row)))]
    if len(align[0]) == 1:
        column = [row[0] for row in align]
        return [(column.index(max(column)), 0)]
    if max(row_positives) <= 1:
        pairs = [
            (i, next(j for j, value in enumerate(row) if value > 0.0))
            for i, row in enumerate(align)
            if row_positives[i]
        ]
        if len({j for _, j in pairs}) == len(pairs):
            return pairs
    rows, cols = assign_max(align)
    return [(i, j) for i, j in zip(rows, cols, strict=True) if align[i][j] > 0.0]


def max_matching(edges: npt.NDArray[np.float64]) -> int:
    """Size of a maximum one-to-one pairing using the positive entries of ``edges``."""
    if edges.size == 0:
        return 0
    positive = edges > 0.0
    if positive.sum(axis=1).max() <= 1 and positive.sum(axis=0).max() <= 1:
        return int(positive.sum())
    rows, cols = linear_sum_assignment(positive.astype(np.float64), maximize=True)
    return int(positive[rows, cols].sum())


Found = list[tuple[int, int, float, tuple[float, float, float] | None]]


class _Lookup(NamedTuple):
    """Outside exact mode: the similarity of every predicted × gold entity and relation, and
    where each valid predicted triplet's source, target and relation sit in those matrices."""

    entity: npt.NDArray[np.float64]
    relation: npt.NDArray[np.float64]
    source_at: list[int]
    target_at: list[int]
    relation_at: list[int]


def _assign_small(preds: list[Triplet], gold: GoldEntry, lookup: _Lookup | None) -> Found:
    """``(pred, gold, align, (sim source, target, relation) or None in exact mode)`` of the
    assigned pairs with positive ``align``, on list-of-lists matrices (no numpy per step).

    ``lookup`` is ``None`` in exact mode.
    """
    w_src, w_tgt, w_rel = ALIGN_WEIGHTS
    if lookup is None:
        # sim ∈ {0, 1}: the same products and sums as the matrix form, in the same order.
        gold_keys = [(g.norm_source, g.norm_target, g.norm_relation) for g in gold.triplets]
        align = [
            [
                w_src * (p.norm_source == gs)
                + w_tgt * (p.norm_target == gt)
                + w_rel * (p.norm_relation == gr)
                for gs, gt, gr in gold_keys
            ]
            for p in preds
        ]
        return [(i, j, align[i][j], None) for i, j in assign_pairs(align)]
    ps = np.array(lookup.source_at)[:, None]
    pt = np.array(lookup.target_at)[:, None]
    pr = np.array(lookup.relation_at)[:, None]
    src = lookup.entity[ps, gold.source_at]
    tgt = lookup.entity[pt, gold.target_at]
    rel = lookup.relation[pr, gold.relation_at]
    align = (w_src * src + w_tgt * tgt + w_rel * rel).tolist()
    src_sim, tgt_sim, rel_sim = src.tolist(), tgt.tolist(), rel.tolist()
    return [
        (i, j, align[i][j], (src_sim[i][j], tgt_sim[i][j], rel_sim[i][j])) for i, j in assign_pairs(align)
    ]


def _assign_large(preds: list[Triplet], gold: GoldEntry, lookup: _Lookup | None) -> Found:
    """`_assign_small` for entries past ``PYTHON_MAX_COLS`` triplets on a side, with the same
    pairs and values, on one float64 array built in place.

    The array is built gold × predicted when there are more predictions, so that the
    solver gets the wide matrix it would otherwise copy, and is negated in place by it: the
    peak is about one array (8 bytes a pair) instead of several list copies of the matrix
    (100 million float objects each at 10,000 × 10,000).
    """
    golds = gold.triplets
    tall = len(preds) > len(golds)
    w_src, w_tgt, w_rel = ALIGN_WEIGHTS

    def grid(values: npt.NDArray[np.float64], pred_index: Sequence[int], gold_index: Sequence[int]) -> Any:
        p_idx, g_idx = np.asarray(pred_index), np.asarray(gold_index)
        return values[p_idx[None, :], g_idx[:, None]] if tall else values[p_idx[:, None], g_idx[None, :]]

    if lookup is None:
        # Equal or not on each of source, target, relation: one of 8 values, each computed as
        # the list form computes it.
        ids: dict[str, int] = {}
        code = None
        for bit, field in enumerate(("norm_source", "norm_target", "norm_relation")):
            pk = np.fromiter(
                (ids.setdefault(getattr(t, field), len(ids)) for t in preds), np.int64, len(preds)
            )
            gk = np.fromiter(
                (ids.setdefault(getattr(t, field), len(ids)) for t in golds), np.int64, len(golds)
            )
            equal = (np.equal.outer(gk, pk) if tall else np.equal.outer(pk, gk)).view(np.uint8)
            if code is None:
                code = equal
            else:
                np.left_shift(equal, bit, out=equal)
                code |= equal
            del equal
        table = np.array([w_src * bool(c & 1) + w_tgt * bool(c & 2) + w_rel * bool(c & 4) for c in range(8)])
        align = table[code]
        del code
    else:
        align = grid(lookup.entity, lookup.source_at, gold.source_at)
        align *= w_src
        part = grid(lookup.entity, lookup.target_at, gold.target_at)
        part *= w_tgt
        align += part
        part = grid(lookup.relation, lookup.relation_at, gold.relation_at)
        part *= w_rel
        align += part
        del part

    def sims(i: int, j: int) -> tuple[float, float, float] | None:
        if lookup is None:
            return None
        return (
            float(lookup.entity[lookup.source_at[i], gold.source_at[j]]),
            float(lookup.entity[lookup.target_at[i], gold.target_at[j]]),
            float(lookup.relation[lookup.relation_at[i], gold.relation_at[j]]),
        )

    def pair(row: int, col: int) -> tuple[int, int]:
        return (col, row) if tall else (row, col)

    positive = align > 0.0
    if not positive.any():
        return []
    if align.shape[0] == 1:  # one triplet on one side: the first maximum, as the solver takes it
        i, j = pair(0, int(np.argmax(align[0])))
        return [(i, j, float(align[0, np.argmax(align[0])]), sims(i, j))]
    if positive.sum(axis=1).max() <= 1 and positive.sum(axis=0).max() <= 1:
        rows, cols = np.nonzero(positive)
        del positive
        found = [(*pair(int(r), int(c)), float(align[r, c])) for r, c in zip(rows, cols, strict=True)]
        return [(i, j, value, sims(i, j)) for i, j, value in sorted(found)]
    del positive
    col4row = solve_wide_max(align)  # negates `align` in place
    found = [(*pair(r, c), float(-align[r, c])) for r, c in enumerate(col4row)]
    return [(i, j, value, sims(i, j)) for i, j, value in sorted(found) if value > 0.0]


def entry_too_large(gold: GoldEntry, valid: Sequence[tuple[int, Triplet]], mode: MatchMode) -> str | None:
    """Why one entry is past `MAX_ENTRY_PAIRS`, or ``None`` when it is not."""
    pairs = len(valid) * len(gold.triplets)
    if pairs > MAX_ENTRY_PAIRS:
        return (
            f"{len(valid):,} valid predicted × {len(gold.triplets):,} gold triplets = {pairs:,} pairs, "
            f"more than the {MAX_ENTRY_PAIRS:,} one entry may be aligned on"
        )
    if mode is not MatchMode.EXACT:
        entities = len({name for _, t in valid for name in (t.norm_source, t.norm_target)})
        pairs = entities * len(gold.entities)
        if pairs > MAX_ENTRY_PAIRS:
            return (
                f"{entities:,} predicted × {len(gold.entities):,} gold entities = {pairs:,} pairs, "
                f"more than the {MAX_ENTRY_PAIRS:,} one entry may be compared on"
            )
    return None


def score_entry(
    gold: GoldEntry,
    prediction: Prediction,
    sim: Similarity,
    relations: frozenset[str],
    validated: Validated | None = None,
    *,
    keep_triplets: bool = False,
) -> EntryScore:
    """All axes, pairs and classifications of one entry (see the module docstring).

    ``relations`` holds normalized relation names; ``validated`` is
    ``validate_items(prediction.items)`` when the caller already has it. ``keep_triplets``
    keeps the valid predicted and the gold triplets in the score (``.triplets``, ``.gold``),
    for the details.
    """
    items = prediction.items
    valid, invalid = validated if validated is not None else validate_items(items)
    golds = gold.triplets
    n_items = len(items)
    n_valid = len(valid)

    if prediction.status == "malformed":
        schema: float | None = 0.0
    else:
        schema = n_valid / n_items if n_items else None

    pred_at: dict[str, int] = {}
    prel_at: dict[str, int] = {}
    for _, t in valid:
        pred_at.setdefault(t.norm_source, len(pred_at))
        pred_at.setdefault(t.norm_target, len(pred_at))
        prel_at.setdefault(t.norm_relation, len(prel_at))
    pred_entities = list(pred_at)
    gold_entities = gold.entities
    gold_entity_set = set(gold_entities)

    exact_mode = sim.mode is MatchMode.EXACT
    entity_sim = None if exact_mode else sim.matrix(pred_entities, gold_entities)
    if entity_sim is None:
        # Distinct strings on both sides, similarity 1 only when equal: a partial permutation.
        matches = sum(1 for e in pred_entities if e in gold_entity_set)
    else:
        matches = max_matching(entity_sim)
    entity_f1: float | None = None
    if pred_entities or gold_entities:
        precision = matches / len(pred_entities) if pred_entities else 0.0
        recall = matches / len(gold_entities) if gold_entities else 0.0
        entity_f1 = f1_score(precision, recall)

    pairs: list[Pair] = []
    accepted_count = relation_hits = 0
    weight_total = 0.0
    matched: set[int] = set()
    if valid and golds:
        preds = [t for _, t in valid]
        lookup = None
        if entity_sim is not None:
            lookup = _Lookup(
                entity_sim,
                sim.matrix(list(prel_at), gold.relations),
                [pred_at[t.norm_source] for t in preds],
                [pred_at[t.norm_target] for t in preds],
                [prel_at[t.norm_relation] for t in preds],
            )
        assign = _assign_large if max(len(preds), len(golds)) > PYTHON_MAX_COLS else _assign_small
        found = assign(preds, gold, lookup)
        for i, j, value, sims in found:
            p, g = preds[i], golds[j]
            accepted = value >= ACCEPT_THRESHOLD - _TOLERANCE
            same_source = p.norm_source == g.norm_source
            same_target = p.norm_target == g.norm_target
            same_relation = p.norm_relation == g.norm_relation
            index = valid[i][0]
            if accepted:
                accepted_count += 1
                relation_hits += same_relation
                weight_total += weight_agreement(p.weight, g.weight)
                matched.add(index)
            if sims is None:
                sims = (float(same_source), float(same_target), float(same_relation))
            exact = accepted and same_source and same_target and same_relation
            pairs.append(Pair(index, j, value, *sims, accepted, exact))

    relation_acc = relation_hits / accepted_count if accepted_count else None
    weight = weight_total / accepted_count if accepted_count else None

    prompt = gold.prompt
    grounded = {e: e in gold_entity_set or contains_words(prompt, e) for e in pred_entities}
    grounding = sum(grounded.values()) / len(pred_entities) if pred_entities else None

    unmatched: list[tuple[int, Unmatched]] = []
    for index, triplet in valid:
        if index in matched:
            continue
        kind: Unmatched
        if triplet.norm_source == triplet.norm_target:
            kind = "self_loop"
        elif triplet.norm_relation not in relations:
            kind = "invalid_relation"
        elif not (grounded[triplet.norm_source] and grounded[triplet.norm_target]):
            kind = "ungrounded"
        else:
            kind = "novel_grounded"
        unmatched.append((index, kind))

    axes = {
        "schema": schema,
        "entity_f1": entity_f1,
        "relation_acc": relation_acc,
        "weight": weight,
        "grounding": grounding,
    }
    if golds:
        composite = composite_score(axes)
        assert composite is not None  # entity_f1 applies whenever gold has triplets
    else:
        composite = 1.0 if prediction.status in ("ok", "missing") and n_items == 0 else 0.0

    return EntryScore(
        id=gold.id,
        status=prediction.status,
        predicted_items=n_items,
        valid=n_valid,
        gold_triplets=len(golds),
        schema=schema,
        entity_f1=entity_f1,
        relation_acc=relation_acc,
        weight=weight,
        grounding=grounding,
        composite=composite,
        entity_matches=matches,
        pred_entities=len(pred_entities),
        gold_entities=len(gold_entities),
        pairs=tuple(pairs),
        unmatched=tuple(unmatched),
        invalid=tuple(invalid),
        relations=tuple(relation_key(t.norm_relation) for _, t in valid),
        triplets=tuple(valid) if keep_triplets else (),
        gold=golds if keep_triplets else (),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_run(predictions: str, scores: Sequence[EntryScore]) -> RunSummary:
    """Macro means, micro P/R/F1, counts and the relation distribution of one file's scores.

    Macro: each axis averaged over the entries where it applies (``None`` if none);
    composite averaged over all entries. Micro entity: ``Σ matches / Σ |pred entities|``
    and ``Σ matches / Σ |gold entities|``. Micro triplet: ``hits / predicted items`` and
    ``hits / gold triplets`` (a hit is an accepted pair with equal source, target and
    relation). Hallucination rate: ``(invalid_relation + ungrounded) / valid triplets``.
    Denominators of 0 give 0.0 (rate: ``None``).
    """
    axes = {name: _mean([v for s in scores if (v := s.axis(name)) is not None]) for name in AXES}
    matches = sum(s.entity_matches for s in scores)
    pred_entities = sum(s.pred_entities for s in scores)
    gold_entities = sum(s.gold_entities for s in scores)
    entity_p = matches / pred_entities if pred_entities else 0.0
    entity_r = matches / gold_entities if gold_entities else 0.0
    hits = sum(s.exact_hits for s in scores)
    predicted_items = sum(s.predicted_items for s in scores)
    gold_triplets = sum(s.gold_triplets for s in scores)
    triplet_p = hits / predicted_items if predicted_items else 0.0
    triplet_r = hits / gold_triplets if gold_triplets else 0.0
    classes = Counter(kind for s in scores for _, kind in s.unmatched)
    valid = sum(s.valid for s in scores)
    hallucinations = classes["invalid_relation"] + classes["ungrounded"]
    counts = {
        "predicted_items": predicted_items,
        "gold_triplets": gold_triplets,
        "exact_hits": hits,
        "empty_predictions": sum(1 for s in scores if s.predicted_items == 0),
        "unparseable": sum(1 for s in scores if s.status == "unparseable"),
        "malformed": sum(1 for s in scores if s.status == "malformed"),
        "invalid_triplets": sum(len(s.invalid) for s in scores),
        "missing_predictions": sum(1 for s in scores if s.status == "missing"),
    }
    counts.update({kind: classes[kind] for kind in HALLUCINATION_CLASSES})
    distribution = Counter(r for s in scores for r in s.relations)
    return RunSummary(
        predictions=predictions,
        entries=len(scores),
        composite=_mean([s.composite for s in scores]),
        axes=axes,
        entity=PRF(entity_p, entity_r, f1_score(entity_p, entity_r)),
        triplet=PRF(triplet_p, triplet_r, f1_score(triplet_p, triplet_r)),
        hallucination_rate=hallucinations / valid if valid else None,
        counts=counts,
        relation_distribution=dict(sorted(distribution.items(), key=lambda kv: (-kv[1], kv[0]))),
        scores=tuple(scores),
    )


@collector_paused()
def grade_triplets(
    gold_path: Path,
    prediction_paths: Sequence[Path],
    *,
    mode: MatchMode = MatchMode.EXACT,
    gate: float | None = None,
    relations: Sequence[str] = DEFAULT_RELATIONS,
    embedding_model: str | None = None,
    allow_download: bool = False,
    embedder: Embedder | None = None,
    details: bool = False,
) -> TripletReport:
    """Grade each prediction file against the gold file (see the module docstring), with
    the cyclic garbage collector paused.

    ``details`` keeps every entry's triplets in the scores, for
    `kag.grading.triplets.report.write_details`. Without it the report holds no triplet:
    at 20,000 entries they are 450,000 objects, which the collector, once re-enabled,
    traverses in one pass (0.2 s more per run of ``benchmarks/bench_triplets.py``).

    Gold ids with no prediction are graded as empty predictions (``missing``); prediction
    ids not in gold are left out with a warning. In ``embedding`` mode every distinct
    normalized string of the run is embedded once, in one batched pass, before grading.
    Raises `kag.errors.InputError` for unreadable files, duplicate ids and invalid gold.
    """
    if gate is not None and not 0.0 <= gate <= 1.0:
        raise ValueError(f"gate {gate} is outside [0, 1]")
    gold = load_gold(gold_path)
    files = [(path, load_predictions(path)) for path in prediction_paths]
    sim = make_similarity(mode, gate, embedding_model, allow_download=allow_download, embedder=embedder)
    relation_set = frozenset(normalize_relation(r) for r in relations)
    gold_ids = {entry.id for entry in gold}

    validated_files: list[list[tuple[Prediction, Validated]]] = []
    for path, predictions in files:
        if not predictions and gold:
            log.warning("%s: no prediction entry; all %d gold entries count as missing", path, len(gold))
        extra = [entry_id for entry_id in predictions if entry_id not in gold_ids]
        if extra:
            shown = ", ".join(repr(e) for e in extra[:3]) + (", ..." if len(extra) > 3 else "")
            log.warning(
                "%s: %d prediction id(s) not in the gold file were ignored (%s)", path, len(extra), shown
            )
        rows = []
        for entry in gold:
            prediction = predictions.get(entry.id) or Prediction(entry.id, "missing", ())
            checked = validate_items(prediction.items)
            problem = entry_too_large(entry, checked[0], sim.mode)
            if problem is not None:
                raise InputError(f"{path}: entry {entry.id!r}: {problem}")
            rows.append((prediction, checked))
        validated_files.append(rows)

    if sim.mode is MatchMode.EMBEDDING:
        strings: list[str] = []
        for entry in gold:
            for t in entry.triplets:
                strings += (t.norm_source, t.norm_target, t.norm_relation)
        for rows in validated_files:
            for _, (valid, _) in rows:
                for _, t in valid:
                    strings += (t.norm_source, t.norm_target, t.norm_relation)
        sim.prepare(dict.fromkeys(strings))

    runs = []
    for (path, _), rows in zip(files, validated_files, strict=True):
        scores = [
            score_entry(entry, prediction, sim, relation_set, checked, keep_triplets=details)
            for entry, (prediction, checked) in zip(gold, rows, strict=True)
        ]
        runs.append(summarize_run(str(path), scores))
    return TripletReport(
        gold=str(gold_path),
        match_mode=mode,
        similarity_backend=sim.backend,
        gate=sim.gate,
        relations=tuple(relations),
        runs=tuple(runs),
        details=details,
    )
