"""Retrieval quality against gold evidence: each figure by hand, its edge cases, and its
invariants (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.grading.retrieval_quality import (
    QualityRecord,
    entity_recall,
    file_quality,
    is_reached,
    quality_record,
    seed_recall_at_k,
    seed_reciprocal_rank,
    similarity_for,
    triple_f1,
    triple_precision,
    triple_recall,
)
from kag.results.graph_text import graph_from_formal_text
from kag.results.model import RetrievedGraph, RetrievedNode, RetrievedRelationship, Seed

EXACT = similarity_for("exact")

TEXT = """(1)-[:CAUSED_BY]->(2)
(1)-[name]->("Scurvy")
(2)-[name]->("Vitamin C deficiency")
(4)-[:CAUSED_BY]->(5)
(4)-[name]->("Rickets")
(5)-[name]->("Vitamin D deficiency")
"""
GOLD = (
    ("Scurvy", "caused by", "Vitamin C deficiency"),
    ("Vitamin C deficiency", "deficiency of", "Vitamin C"),
)


def test_a_question_by_hand():
    r = file_quality(("Scurvy", "Vitamin C"), GOLD, TEXT, None, True, EXACT)
    assert r == QualityRecord(2, 1, 2, 1, 2, 1, None, True)
    assert entity_recall(r) == 0.5
    assert triple_recall(r) == 0.5
    assert triple_precision(r) == 0.5
    assert triple_f1(r) == pytest.approx(0.5)
    assert not is_reached(r)
    assert seed_recall_at_k(r) is None and seed_reciprocal_rank(r) is None


def test_names_and_relation_types_are_normalized():
    graph = RetrievedGraph(
        (),
        (RetrievedNode("a", (), "  SCURVY "), RetrievedNode("b", (), "vitamin_c deficiency")),
        (RetrievedRelationship("a", "CAUSED_BY", "b"),),
    )
    r = quality_record(("scurvy",), (GOLD[0],), graph, False, EXACT)
    assert (r.entities_found, r.triples_found, r.relationships_matched) == (1, 1, 1)


def test_fuzzy_matching_accepts_a_close_name_exact_does_not():
    graph = RetrievedGraph((), (RetrievedNode("a", (), "Vitamin C deficiencies"),), ())
    assert quality_record(("Vitamin C deficiency",), (), graph, True, EXACT).entities_found == 0
    assert (
        quality_record(("Vitamin C deficiency",), (), graph, True, similarity_for("fuzzy")).entities_found
        == 1
    )


def test_seed_figures_use_the_first_seed_naming_each_gold_entity():
    nodes = tuple(RetrievedNode(k, (), n) for k, n in (("5", "Vitamin D deficiency"), ("6", "Vitamin D")))
    graph = RetrievedGraph((Seed("5", 0.8), Seed("6", 0.7)), nodes, ())
    r = quality_record(("Rickets", "Vitamin D"), (), graph, True, EXACT)
    assert r.seed_ranks == (0, 2)
    assert seed_recall_at_k(r) == 0.5
    assert seed_reciprocal_rank(r) == 0.5


def test_edge_cases():
    nothing = RetrievedGraph((), (), ())
    r = quality_record((), GOLD, nothing, False, EXACT)
    assert entity_recall(r) is None  # no gold entity
    assert triple_precision(r) == 0.0  # nothing retrieved: nothing relevant
    assert triple_f1(r) == 0.0
    assert seed_recall_at_k(r) is None  # seeds, but no gold entity to rank
    # No gold, or no retrieval (an error file, a native setup): the file does not count.
    assert file_quality((), (), TEXT, None, True, EXACT) is None
    assert file_quality(("Scurvy",), (), None, None, True, EXACT) is None
    # Without triples, reached means every gold entity found.
    assert is_reached(quality_record(("Scurvy",), (), graph_from_formal_text(TEXT), True, EXACT))


names = st.sampled_from(["Scurvy", "Vitamin C", "Rickets", "Vitamin D", "Iron"])
types = st.sampled_from(["CAUSED_BY", "DEFICIENCY_OF"])
triples = st.tuples(names, types, names)


def _text(rels: list[tuple[str, str, str]]) -> str:
    """FormalTriplet text of ``rels``, nodes keyed by their name's position."""
    keys = {n: str(i) for i, n in enumerate(["Scurvy", "Vitamin C", "Rickets", "Vitamin D", "Iron"])}
    lines = []
    for s, t, o in rels:
        lines.append(f"({keys[s]})-[:{t}]->({keys[o]})")
        lines += [f'({keys[s]})-[name]->("{s}")', f'({keys[o]})-[name]->("{o}")']
    return "\n".join(lines)


@given(st.lists(names, max_size=4), st.lists(triples, max_size=4), st.lists(triples, max_size=6))
def test_recall_and_precision_stay_in_0_1(entities, gold, retrieved):
    r = file_quality(entities, gold, _text(retrieved), None, True, EXACT)
    if r is None:
        assert not (entities or gold)
        return
    for figure in (entity_recall(r), triple_recall(r), triple_precision(r), triple_f1(r)):
        assert figure is None or 0.0 <= figure <= 1.0


@given(st.lists(triples, min_size=1, max_size=4), st.lists(triples, max_size=4))
def test_a_retrieval_holding_the_gold_has_recall_1(gold, noise):
    entities = [n for s, _, o in gold for n in (s, o)]
    r = file_quality(entities, gold, _text([*noise, *gold]), None, True, EXACT)
    assert r is not None
    assert triple_recall(r) == 1.0
    assert entity_recall(r) == 1.0
    assert is_reached(r)


@given(st.lists(triples, min_size=1, max_size=5, unique=True), st.data())
def test_removing_a_gold_triple_from_the_text_lowers_triple_recall_by_one_over_t(gold, data):
    removed = data.draw(st.sampled_from(gold))
    full = file_quality((), gold, _text(gold), None, True, EXACT)
    rest = [t for t in gold if t != removed]
    fewer = file_quality((), gold, _text(rest), None, True, EXACT)
    assert full is not None and fewer is not None
    # recall = found / T: one gold triple fewer found lowers it by exactly 1 / T.
    assert triple_recall(full) == 1.0
    assert triple_recall(fewer) == pytest.approx(1.0 - 1 / len(gold))
    assert fewer.triples_found == full.triples_found - 1


@given(st.lists(names, max_size=3), st.lists(triples, max_size=3), st.lists(triples, max_size=6))
def test_the_exact_fast_path_agrees_with_the_similarity_matrices(entities, gold, retrieved):
    from kag.grading.retrieval_quality import _similar
    from kag.grading.triplets.normalize import normalize_title
    from kag.results.graph_text import formal_parts

    nodes, rels = formal_parts(_text(retrieved))
    normalized = {k: normalize_title(v) if v else "" for k, v in nodes.items()}
    fast = file_quality(entities, gold, _text(retrieved), None, True, EXACT)
    slow = _similar([normalize_title(e) for e in entities], gold, normalized, rels, None, True, EXACT)
    if fast is not None:
        assert fast == slow


@given(st.lists(names, max_size=3), st.lists(triples, max_size=3), st.lists(triples, max_size=6))
def test_the_files_own_relationship_count_gives_the_record_of_the_lines(entities, gold, retrieved):
    from kag.results.graph_text import formal_parts

    text = _text(retrieved)
    count = len(formal_parts(text)[1])
    with_count = file_quality(entities, gold, text, None, True, EXACT, relationships=count)
    assert with_count == file_quality(entities, gold, text, None, True, EXACT)


def test_open_questions_cross_reached_with_the_exact_match(tmp_path):
    """An open question's retrieval quality counts too, its outcome by exact match."""
    import json as _json

    from typer.testing import CliRunner

    from kag.cli import app
    from kag.results import OkResult, OkStats, Retrieval, result_path, write_result

    gold = {"entities": ["Scurvy"], "triples": [["Scurvy", "caused by", "Vitamin C deficiency"]]}
    doc = {
        "d": {
            "q1": {"input": "?", "output": {"type": "Open", "answers": ["vitamin c"]}, "evidence": gold},
            "q2": {"input": "?", "output": {"type": "Open", "answers": ["iron"]}, "evidence": gold},
        }
    }
    datasets = tmp_path / "datasets.json"
    datasets.write_text(_json.dumps(doc))
    root = tmp_path / "r"
    for question, answer, text in (("q1", "vitamin C", TEXT), ("q2", "zinc", '(1)-[name]->("Scurvy")\n')):
        path = result_path(root, "d", question, "", "kag")
        write_result(path, OkResult(answer, OkStats(retrieval=Retrieval(result=text))))
    out = CliRunner().invoke(app, ["stats", "-d", str(datasets), "-r", str(root), "--format", "json"])
    assert out.exit_code == 0, out.stderr
    block = _json.loads(out.stdout)["setups"][0]["overall"]["retrieval_quality"]
    assert block["questions"] == 2
    assert block["outcomes"] == {"reached_right": 1, "reached_wrong": 0, "missed_right": 0, "missed_wrong": 1}
