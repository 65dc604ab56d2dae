"""evidence: whole-word matching under title normalization, and hand-computed summaries."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.grading.evidence import (
    EvidenceRecord,
    EvidenceSummary,
    evidence_found,
    evidence_record,
    summarize_evidence,
)
from kag.grading.mcq.evidence_blocks import summarize_setup_evidence
from kag.grading.triplets.normalize import contains_words, normalize_prompt, normalize_title

REAL = "results/pubmedqa/10135926/wekgr-qwen35-9b-ollama-neo4j-embedding-triplet-formal.json"


def test_real_kag_retrieval_text(med_kag: Path) -> None:
    text = orjson.loads((med_kag / REAL).read_bytes())["ok"]["stats"]["retrieval"]["result"]
    names = [
        "intubation",  # ("Intubation")
        "ANESTHESIA,  ENDOTRACHEAL",  # case and whitespace runs do not matter
        "Airway_Management",  # "_" is a space
        "Tracheal Extubation.",  # punctuation at the ends is stripped
        "Helicopter",  # the question's other concept: not retrieved
        "Extubat",  # only part of a word
        "Intubation Inc.",  # a title's legal suffix goes: "intubation"
        "...",  # normalizes to "": never found
    ]
    assert evidence_found(names, text) == (True, True, True, True, False, False, True, False)


@pytest.mark.parametrize(
    ("names", "text", "expected"),
    [
        (["Vitamin C"], '(1)-[name]->("vitamin c")', (True,)),
        (["Vitamin C"], '(1)-[name]->("vitamin cd")', (False,)),
        (["Vitamin C", "Scurvy"], "Scurvy is caused by a lack of VITAMIN C.", (True, True)),
        (["Café"], "CAFÉ au lait", (True,)),  # NFKC + casefold on both sides
        (["ﬁbrin"], "fibrin clot", (True,)),  # the ligature folds to "fi"
        ([], "anything", ()),
        (["x"], "", (False,)),
    ],
)
def test_evidence_found(names: list[str], text: str, expected: tuple[bool, ...]) -> None:
    assert evidence_found(names, text) == expected


def test_record_needs_names_and_a_retrieval() -> None:
    assert evidence_record([], "text", True) is None
    assert evidence_record(["x"], None, True) is None  # an error file or a setup that did not retrieve
    assert evidence_record(["x", "y"], "x z", False) == EvidenceRecord((True, False), False)


def test_hand_computed_summary() -> None:
    records = [
        EvidenceRecord((True, True), True),  # share 1, hit, correct
        EvidenceRecord((True, False, False, False), False),  # share 1/4, hit, wrong
        EvidenceRecord((False,), True),  # share 0, missed, correct
        EvidenceRecord((False, False), False),  # share 0, missed, wrong
        EvidenceRecord((False, True), True),  # share 1/2, hit, correct
    ]
    # recall = (1 + 1/4 + 0 + 0 + 1/2) / 5 = 1.75 / 5 = 0.35; hits 3 of 5, 2 of them correct;
    # misses 2, 1 correct
    assert summarize_evidence(records) == EvidenceSummary(
        questions=5, recall=0.35, hit_rate=0.6, accuracy_when_hit=2 / 3, accuracy_when_missed=0.5
    )


def test_undefined_buckets_are_none() -> None:
    assert summarize_evidence([]) is None
    all_hit = summarize_evidence([EvidenceRecord((True,), False)])
    assert all_hit == EvidenceSummary(1, 1.0, 1.0, 0.0, None)
    all_missed = summarize_evidence([EvidenceRecord((False, False), True)])
    assert all_missed == EvidenceSummary(1, 0.0, 0.0, None, 1.0)


def test_recall_is_order_independent() -> None:
    records = [EvidenceRecord((True,) + (False,) * k, k % 2 == 0) for k in range(1, 300)]
    forward = summarize_evidence(records)
    backward = summarize_evidence(reversed(records))
    assert forward == backward


def _plain_summary(records: list[EvidenceRecord]) -> EvidenceSummary | None:
    """The block by its formulas, each record's share and hit read from the record."""
    if not records:
        return None
    hits = [r for r in records if r.hit]
    missed = [r for r in records if not r.hit]
    return EvidenceSummary(
        len(records),
        math.fsum(r.share for r in records) / len(records),
        len(hits) / len(records),
        sum(r.correct for r in hits) / len(hits) if hits else None,
        sum(r.correct for r in missed) / len(missed) if missed else None,
    )


def test_the_blocks_of_a_setup_count_each_record_once_and_give_the_formulas() -> None:
    # The overall block joins the datasets' counts; every block is the plain formulas' over
    # its records, whether equal records are one object or not.
    rng = random.Random(5)
    kinds = [
        EvidenceRecord(tuple(rng.random() < 0.4 for _ in range(rng.randrange(1, 6))), rng.random() < 0.5)
        for _ in range(40)
    ]
    records: dict[tuple[str, str], dict[str, EvidenceRecord]] = {}
    for setup, dataset in (("a", "d1"), ("a", "d2"), ("b", "d2"), ("a", "d3")):
        group = records[setup, dataset] = {}
        for q in range(rng.randrange(1, 400)):
            kind = rng.choice(kinds)
            group[str(q)] = kind if q % 2 else EvidenceRecord(kind.found, kind.correct)
    blocks = summarize_setup_evidence(records)
    assert sorted(blocks) == ["a", "b"]
    for setup, block in blocks.items():
        mine = {dataset: list(group.values()) for (s, dataset), group in records.items() if s == setup}
        assert block.overall == _plain_summary([r for group in mine.values() for r in group])
        assert block.per_dataset == {dataset: _plain_summary(group) for dataset, group in mine.items()}
        assert list(block.per_dataset) == sorted(mine)
    assert summarize_setup_evidence({}) == {}


piece = st.sampled_from(
    ["Vitamin", " C", "_", "(", ")", '"', "-", "\n", " ", "x", "Ａ", "ß", "ﬁ", "Inc.", ",", "É"]
)
snippet = st.lists(piece, max_size=12).map("".join)


@given(st.lists(snippet, max_size=4), snippet)
def test_found_equals_the_plain_normalized_search(names: list[str], text: str) -> None:
    """The fast text normalization finds exactly what the triplet grader's own functions find."""
    expected = tuple(contains_words(normalize_prompt(text), normalize_title(name)) for name in names)
    assert evidence_found(names, text) == expected


def test_a_long_name_against_a_long_text_is_searched_a_bounded_number_of_times() -> None:
    # A 15 kB name that occurs at every offset of a 30 kB text, never as whole words: one
    # search from each occurrence used to cost a pass over the text per offset.
    name, text = "a" * 15_000, "a" * 30_000
    finds = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal finds
        if event == "c_call" and getattr(arg, "__name__", "") == "find":
            finds += 1

    sys.setprofile(profile)
    try:
        found = evidence_found([name], text)
    finally:
        sys.setprofile(None)
    assert found == (False,)
    assert finds <= 20
    assert evidence_found([name], text + " " + name) == (True,)
