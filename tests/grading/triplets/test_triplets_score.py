"""Scoring: hand-computed entries (tests/data/triplets/score_cases.json), run summaries,
the seed's micro arithmetic, similarity modes, and invariants."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.embedding import EmbeddingError
from kag.grading.triplets.assign import linear_sum_assignment
from kag.grading.triplets.io import load_gold
from kag.grading.triplets.model import (
    DEFAULT_RELATIONS,
    EntryScore,
    GoldEntry,
    MatchMode,
    Pair,
    Prediction,
    Triplet,
)
from kag.grading.triplets.normalize import normalize_relation
from kag.grading.triplets.report import iter_details, write_details
from kag.grading.triplets.score import (
    assign_pairs,
    composite_score,
    grade_triplets,
    score_entry,
    summarize_run,
    weight_agreement,
)
from kag.grading.triplets.similarity import (
    EmbeddingSimilarity,
    ExactSimilarity,
    LexicalSimilarity,
    fuzzy_similarity,
    make_similarity,
)
from kag.grading.triplets.validate import to_triplet
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "triplets"
CASES = json.loads((DATA / "score_cases.json").read_text())["cases"]
RELATIONS = frozenset(normalize_relation(r) for r in DEFAULT_RELATIONS)


def triplet(source: str, relation: str, target: str, weight: float) -> dict[str, Any]:
    return {
        "source": {"title": source, "type": "Thing"},
        "target": {"title": target, "type": "Thing"},
        "relation": relation,
        "weight": weight,
    }


def expand(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    return [triplet(*item) if isinstance(item, list) and len(item) == 4 else item for item in items]


def write_case(tmp_path: Path, case: dict[str, Any]) -> tuple[Path, Path]:
    gold = {"id": "e1", "prompt": case["gold"]["prompt"], "triplets": expand(case["gold"]["triplets"])}
    gold_path = tmp_path / "gold.jsonl"
    gold_path.write_bytes(orjson.dumps(gold) + b"\n")
    pred_path = tmp_path / "pred.jsonl"
    rows = []
    if case["prediction"] is not None:
        prediction = dict(case["prediction"])
        if "triplets" in prediction:
            prediction["triplets"] = expand(prediction["triplets"])
        rows.append({"id": "e1", **prediction})
    pred_path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return gold_path, pred_path


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_hand_computed_entry(tmp_path: Path, case: dict[str, Any]) -> None:
    gold_path, pred_path = write_case(tmp_path, case)
    report = grade_triplets(
        gold_path, [pred_path], mode=MatchMode(case.get("mode", "exact")), gate=case.get("gate")
    )
    (score,) = report.runs[0].scores
    expect = case["expect"]
    assert score.status == expect["status"]
    for axis in ("schema", "entity_f1", "relation_acc", "weight", "grounding", "composite"):
        if expect[axis] is None:
            assert getattr(score, axis) is None, axis
        else:
            assert getattr(score, axis) == pytest.approx(expect[axis], abs=1e-12), axis
    assert score.exact_hits == expect["exact_hits"]
    assert score.accepted == expect["accepted"]
    assert {str(index): kind for index, kind in score.unmatched} == expect["unmatched"]
    assert [index for index, _ in score.invalid] == expect["invalid"]
    if "pair_sims" in expect:
        sims = [[pair.source, pair.target, pair.relation] for pair in score.pairs]
        assert np.allclose(sims, expect["pair_sims"], rtol=0, atol=1e-12), sims


def test_invalid_reasons_are_specific(tmp_path: Path) -> None:
    case = next(c for c in CASES if c["name"] == "every hallucination class and invalid items")
    gold_path, pred_path = write_case(tmp_path, case)
    (score,) = grade_triplets(gold_path, [pred_path]).runs[0].scores
    reasons = dict(score.invalid)
    assert reasons[5] == "'target' is missing"
    assert reasons[6] == "'weight' is not a number (bool)"
    assert reasons[7] == "'weight' 1.5 is outside [0, 1]"


def test_run_summary_macro_micro_and_counts(tmp_path: Path) -> None:
    """Three entries graded together; every figure worked out by hand."""
    gold = [
        {
            "id": "a",
            "prompt": "",
            "triplets": [triplet("A", "uses", "B", 0.5), triplet("C", "uses", "D", 0.5)],
        },
        {"id": "b", "prompt": "", "triplets": [triplet("E", "part_of", "F", 0.5)]},
        {"id": "c", "prompt": "", "triplets": []},
    ]
    preds = [
        # a: one exact hit, one ungrounded unmatched triplet, one invalid item.
        {"id": "a", "triplets": [triplet("A", "uses", "B", 0.5), triplet("X", "uses", "Y", 0.5), {"bad": 1}]},
        # b: missing. c: empty list (composite 1). z: not in gold.
        {"id": "c", "triplets": []},
        {"id": "z", "triplets": []},
    ]
    gold_path, pred_path = tmp_path / "gold.json", tmp_path / "pred.json"
    gold_path.write_bytes(orjson.dumps(gold))
    pred_path.write_bytes(orjson.dumps(preds))
    run = grade_triplets(gold_path, [pred_path]).runs[0]
    # Entry a: schema 2/3; entities {a,b,x,y} vs {a,b,c,d}: P=R=1/2, F1 1/2; relation 1,
    # weight 1; grounding 2/4. composite = .3*2/3 + .25*.5 + .2 + .1 + .15*.5 = 0.7
    a, b, c = run.scores
    assert a.composite == pytest.approx(0.7)
    assert b.status == "missing" and b.composite == 0.0
    assert c.composite == 1.0
    assert run.entries == 3
    assert run.composite == pytest.approx((0.7 + 0.0 + 1.0) / 3)
    assert run.axes["schema"] == pytest.approx(2 / 3)  # only a applies
    assert run.axes["entity_f1"] == pytest.approx((0.5 + 0.0) / 2)  # a and b; c has both sets empty
    assert run.axes["relation_acc"] == 1.0 and run.axes["weight"] == 1.0
    assert run.axes["grounding"] == 0.5
    # micro entity: matches 2 / pred 4, 2 / gold (4 + 2)
    assert (run.entity.precision, run.entity.recall) == pytest.approx((0.5, 1 / 3))
    assert run.entity.f1 == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    # micro triplet: 1 hit / 3 predicted items, 1 hit / 3 gold triplets
    assert (run.triplet.precision, run.triplet.recall, run.triplet.f1) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert run.hallucination_rate == pytest.approx(1 / 2)  # one ungrounded of 2 valid
    assert run.counts == {
        "predicted_items": 3,
        "gold_triplets": 3,
        "exact_hits": 1,
        "empty_predictions": 2,
        "unparseable": 0,
        "malformed": 0,
        "invalid_triplets": 1,
        "missing_predictions": 1,
        "self_loop": 0,
        "invalid_relation": 0,
        "ungrounded": 1,
        "novel_grounded": 0,
    }
    assert run.relation_distribution == {"uses": 2}


def _fake_score(predicted: int, gold: int, hits: int) -> EntryScore:
    pair = Pair(0, 0, 1.0, 1.0, 1.0, 1.0, True, True)
    return EntryScore(
        id="x", status="ok", predicted_items=predicted, valid=predicted, gold_triplets=gold,
        schema=1.0, entity_f1=None, relation_acc=None, weight=None, grounding=None, composite=1.0,
        entity_matches=0, pred_entities=0, gold_entities=0, pairs=(pair,) * hits, unmatched=(),
        invalid=(), relations=(),
    )  # fmt: skip


def test_micro_triplet_arithmetic_of_the_seed() -> None:
    """The seed's finetuned run: 578 exact hits, 4,881 predicted items, 4,278 gold triplets."""
    run = summarize_run("pred", [_fake_score(4881, 4278, 578)])
    assert round(run.triplet.precision, 3) == 0.118  # 578 / 4881
    assert round(run.triplet.recall, 3) == 0.135  # 578 / 4278
    assert round(run.triplet.f1, 3) == 0.126  # 2·578 / (4881 + 4278)
    assert run.triplet.f1 == pytest.approx(2 * 578 / (4881 + 4278))


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [(0.5, 0.5, 1.0), (0.5, 0.6, 1.0), (0.9, 0.8, 1.0), (0.7, 0.8, 1.0), (0.3, 0.0, 0.5), (0.0, 0.5, 0.0),
     (1.0, 0.0, 0.0), (0.2, 0.0, 0.75)],
)  # fmt: skip
def test_weight_band(predicted: float, gold: float, expected: float) -> None:
    assert weight_agreement(predicted, gold) == pytest.approx(expected)


def test_composite_renormalizes_over_applicable_axes() -> None:
    assert composite_score({"schema": 1.0, "entity_f1": 0.0}) == pytest.approx(0.30 / 0.55)
    assert composite_score({"grounding": 0.4}) == pytest.approx(0.4)
    assert composite_score({name: None for name in ("schema", "entity_f1")}) is None


def test_fuzzy_similarity_formula() -> None:
    assert fuzzy_similarity("marie curi", "marie curie") == pytest.approx(0.5 * 20 / 21 + 0.5 / 3)
    assert fuzzy_similarity("a b", "a b") == 1.0
    lexical = LexicalSimilarity(gate=0.7)
    assert lexical.sim("marie curi", "marie curie") == 0.0
    assert LexicalSimilarity(gate=0.6).sim("marie curi", "marie curie") == pytest.approx(0.642857142857)
    # No shared token: at most 0.5, under any gate above it, without running difflib.
    assert lexical.sim("paris", "london") == 0.0
    assert LexicalSimilarity(gate=0.0).sim("paris", "london") == pytest.approx(
        fuzzy_similarity("paris", "london")
    )


@given(
    st.text(alphabet="abc de", max_size=12),
    st.text(alphabet="abc de", max_size=12),
    st.floats(0.0, 1.0),
)
def test_lexical_shortcuts_change_nothing(a: str, b: str, gate: float) -> None:
    """The quick-ratio bounds only skip values that the gate would zero anyway."""
    full = fuzzy_similarity(a, b)
    expected = full if full >= gate else 0.0
    assert LexicalSimilarity(gate).sim(a, b) == pytest.approx(expected, abs=1e-12)


class CountingEmbedder:
    """A deterministic fake model: a bag of character trigrams, hashed into 64 buckets."""

    name = "fake-trigram"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text} "
            for k in range(len(padded) - 2):
                out[row, sum(map(ord, padded[k : k + 3])) % 64] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def test_embedding_mode_embeds_each_string_once_in_one_batch(tmp_path: Path) -> None:
    gold = [{"id": i, "prompt": "", "triplets": [triplet("Alpha", "uses", "Beta", 0.5)]} for i in range(3)]
    pred1 = [{"id": i, "triplets": [triplet("Alpha", "uses", "Betas", 0.5)]} for i in range(3)]
    pred2 = [{"id": i, "triplets": [triplet("alpha", "USES", "Gamma", 0.5)]} for i in range(3)]
    paths = []
    for name, rows in (("gold", gold), ("p1", pred1), ("p2", pred2)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_bytes(orjson.dumps(rows))
    embedder = CountingEmbedder()
    report = grade_triplets(paths[0], paths[1:], mode=MatchMode.EMBEDDING, embedder=embedder)
    assert len(embedder.calls) == 1
    assert sorted(embedder.calls[0]) == ["alpha", "beta", "betas", "gamma", "uses"]
    assert report.similarity_backend == "fake-trigram"
    assert report.gate == 0.85
    pair = report.runs[0].scores[0].pairs[0]
    vectors = CountingEmbedder().embed(["beta", "betas"])
    cosine = float(vectors[0] @ vectors[1])
    assert pair.target == (pytest.approx(cosine, abs=1e-6) if cosine >= 0.85 else 0.0)


def test_embedding_similarity_gates_and_keeps_equal_strings_at_one() -> None:
    sim = EmbeddingSimilarity(CountingEmbedder(), gate=0.99)
    matrix = sim.matrix(["alpha", "beta"], ["alpha", "alphas"])
    assert matrix[0, 0] == 1.0
    assert matrix[1, 0] == 0.0  # far below the gate
    assert sim.matrix([], ["x"]).shape == (0, 1)


def test_a_named_embedding_model_that_cannot_load_raises(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(EmbeddingError, match="no/such-model"):
        make_similarity(MatchMode.EMBEDDING, None, "no/such-model")
    assert "falling back" not in caplog.text


def test_assign_pairs_shortcuts_match_the_solver() -> None:
    """Each shortcut returns exactly the solver's positive pairs, and the optimum is kept."""
    rng = np.random.default_rng(11)
    values = np.array([0.0, 0.0, 0.0, 0.1, 0.45, 0.55, 0.9, 1.0])
    shortcut_seen = 0
    for _ in range(600):
        shape = (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        align = rng.choice(values, shape)
        pairs = assign_pairs(align.tolist())
        solver_rows, solver_cols = linear_sum_assignment(align, maximize=True)
        solver_pairs = [
            (i, j) for i, j in zip(solver_rows.tolist(), solver_cols.tolist(), strict=True) if align[i, j] > 0
        ]
        assert sum(align[i, j] for i, j in pairs) == pytest.approx(align[solver_rows, solver_cols].sum())
        positive = align > 0
        if min(shape) == 1 or (positive.sum(0).max() <= 1 and positive.sum(1).max() <= 1):
            shortcut_seen += 1
            assert sorted(pairs) == sorted(solver_pairs)
        else:
            assert pairs == solver_pairs
    assert shortcut_seen > 50


def test_score_entry_without_validated_argument() -> None:
    gold = GoldEntry.build("1", "g", "", (to_triplet(triplet("A", "uses", "B", 0.5)),))
    prediction = Prediction("1", "ok", (triplet("A", "uses", "B", 0.5),))
    score = score_entry(gold, prediction, ExactSimilarity(), RELATIONS)
    assert score.composite == 1.0 and score.exact_hits == 1


entity = st.sampled_from(["Alpha", "Beta", "Gamma", "Delta Corp", "alpha", "Epsilon_X"])
relation = st.sampled_from(["uses", "part_of", "Part Of", "invented", "related_to"])
weight = st.one_of(st.floats(0, 1), st.just(True), st.floats(1.01, 3), st.just(float("nan")))
item = st.one_of(
    st.builds(triplet, entity, relation, entity, weight),
    st.just({"source": {"title": "Alpha", "type": "T"}}),
    st.integers(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gold_items=st.lists(st.builds(triplet, entity, relation, entity, st.floats(0, 1)), max_size=6),
    pred_items=st.lists(item, max_size=8),
    mode=st.sampled_from([MatchMode.EXACT, MatchMode.FUZZY]),
    prompt=st.sampled_from(["", "Alpha met Gamma", "delta and epsilon x"]),
)
def test_scores_stay_in_unit_interval(
    gold_items: list[dict[str, Any]], pred_items: list[Any], mode: MatchMode, prompt: str
) -> None:
    gold = GoldEntry.build("1", "g", prompt, tuple(to_triplet(t) for t in gold_items))
    prediction = Prediction("1", "ok", tuple(pred_items))
    sim = make_similarity(mode)
    score = score_entry(gold, prediction, sim, RELATIONS)
    for axis in ("schema", "entity_f1", "relation_acc", "weight", "grounding", "composite"):
        value = getattr(score, axis)
        assert value is None or 0.0 <= value <= 1.0, (axis, value)
    assert score.valid + len(score.invalid) == score.predicted_items
    assert score.exact_hits <= score.accepted <= min(score.valid, score.gold_triplets)
    # every valid prediction is either in an accepted pair or classified exactly once
    classified = {index for index, _ in score.unmatched}
    accepted = {pair.pred for pair in score.pairs if pair.accepted}
    assert not classified & accepted
    assert len(classified | accepted) == score.valid
    # a prediction identical to gold is matched in full
    if gold_items:
        same = score_entry(gold, Prediction("1", "ok", tuple(gold_items)), sim, RELATIONS)
        assert same.entity_f1 == 1.0 and same.relation_acc == 1.0
        assert same.exact_hits == len(gold_items)


def test_garbage_collector_state_is_restored(tmp_path: Path) -> None:
    import gc

    case = CASES[0]
    gold_path, pred_path = write_case(tmp_path, case)
    assert gc.isenabled()
    grade_triplets(gold_path, [pred_path])
    assert gc.isenabled()
    with pytest.raises(Exception, match="gold file not found"):
        grade_triplets(tmp_path / "missing.jsonl", [pred_path])
    assert gc.isenabled()
    gc.disable()
    try:
        grade_triplets(gold_path, [pred_path])
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()


def _tracked_triplets(root: object) -> int:
    """How many `Triplet` objects the collector would traverse from ``root``."""
    import gc

    seen: set[int] = set()
    stack, count = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or not gc.is_tracked(obj):
            continue
        seen.add(id(obj))
        count += isinstance(obj, Triplet)
        stack.extend(gc.get_referents(obj))
    return count


def test_triplets_are_kept_only_for_details(tmp_path: Path) -> None:
    case = next(c for c in CASES if c["name"] == "every hallucination class and invalid items")
    gold_path, pred_path = write_case(tmp_path, case)
    plain = grade_triplets(gold_path, [pred_path])
    # Without details the report holds no triplet for the collector to walk (at 20,000
    # entries they were 450,000 objects, 0.2 s of collector time a run).
    assert not plain.details and _tracked_triplets(plain) == 0
    detailed = grade_triplets(gold_path, [pred_path], details=True)
    (score,) = detailed.runs[0].scores
    (entry,) = load_gold(gold_path)
    assert detailed.details and score.gold == entry.triplets
    assert [index for index, _ in score.triplets] == [0, 1, 2, 3, 4]  # the valid items
    assert _tracked_triplets(detailed) == len(score.triplets) + len(score.gold)
    # Everything else is graded alike.
    assert dataclasses.replace(score, triplets=(), gold=()) == plain.runs[0].scores[0]


def test_details_of_a_report_graded_without_them_are_refused(tmp_path: Path) -> None:
    gold_path, pred_path = write_case(tmp_path, CASES[0])
    report = grade_triplets(gold_path, [pred_path])
    target = tmp_path / "details.jsonl"
    with pytest.raises(ValueError, match="graded without details=True"):
        write_details(target, report)
    assert not target.exists()
    with pytest.raises(ValueError, match="graded without details=True"):
        iter_details(report)
    assert write_details(target, grade_triplets(gold_path, [pred_path], details=True)) == 1
