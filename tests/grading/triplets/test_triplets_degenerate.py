"""Degenerate triplet input: deep nesting, long outputs, huge entries. No traceback, no blow-up."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.triplets import assign, score
from kag.grading.triplets.io import parse_model_output
from kag.grading.triplets.model import DEFAULT_RELATIONS, GoldEntry, MatchMode, Prediction
from kag.grading.triplets.similarity import make_similarity
from kag.grading.triplets.validate import to_triplet
from tests.conftest import REPO

runner = CliRunner()

TRIPLET = {
    "source": {"title": "A", "type": "T"},
    "target": {"title": "B", "type": "T"},
    "relation": "uses",
    "weight": 0.5,
}


def grade(tmp_path: Path, gold: list[dict[str, Any]], predictions: list[dict[str, Any]] | str) -> Any:
    gold_path = tmp_path / "gold.jsonl"
    gold_path.write_bytes(b"\n".join(orjson.dumps(entry) for entry in gold))
    pred_path = tmp_path / "pred.jsonl"
    if isinstance(predictions, str):
        pred_path.write_text(predictions)
    else:
        pred_path.write_bytes(b"\n".join(orjson.dumps(entry) for entry in predictions))
    return runner.invoke(app, ["triplets", str(gold_path), str(pred_path), "--format", "json"])


@pytest.mark.parametrize(
    "output", ["[" * 1000, "[" * 1000 + "]" * 1000, "[" * 150 + "]" * 150, "ok: " + "[1," * 1000]
)
def test_deeply_nested_output_is_an_unparseable_prediction(tmp_path: Path, output: str) -> None:
    result = grade(tmp_path, [{"id": 1, "triplets": [TRIPLET]}], [{"id": 1, "output": output}])
    assert result.exit_code == 0, result.stderr
    counts = json.loads(result.stdout)["runs"][0]["counts"]
    assert counts["unparseable"] == 1 and counts["predicted_items"] == 0


def test_a_usable_list_before_deep_nesting_is_still_taken() -> None:
    assert parse_model_output('[{"a": 1}] then ' + "[" * 5000) == [{"a": 1}]


def test_a_prediction_line_nested_past_the_json_readers_is_skipped_with_a_warning(tmp_path: Path) -> None:
    deep = '{"id": 2, "triplets": ' + "[" * 3000 + "]" * 3000 + "}"
    lines = orjson.dumps({"id": 1, "triplets": [TRIPLET]}).decode() + "\n" + deep + "\n"
    result = grade(tmp_path, [{"id": 1, "triplets": [TRIPLET]}, {"id": 2, "triplets": [TRIPLET]}], lines)
    assert result.exit_code == 0, result.stderr
    assert re.search(
        r"pred\.jsonl: 1 entry skipped \(line 2: not valid JSON \(nested too deeply\)\)", result.stderr
    )
    assert json.loads(result.stdout)["runs"][0]["counts"]["missing_predictions"] == 1


def test_a_gold_file_nested_past_the_json_readers_is_exit_2_naming_the_line(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": 1, "triplets": ' + "[" * 3000 + "]" * 3000 + "}\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("")
    result = runner.invoke(app, ["triplets", str(gold), str(pred)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"kag: error: {gold}:1: not valid JSON (nested too deeply)\n"


def _reference_parse(text: str) -> list[Any] | None:
    """The search by `json.JSONDecoder.raw_decode` at every bracket, after the same clean-up:
    quadratic, but the definition the linear scan must agree with."""
    decoder = json.JSONDecoder()
    position = 0
    while True:
        match = re.compile(r"[\[{]").search(text, position)
        if match is None:
            return None
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            position = match.start() + 1
            continue
        if isinstance(value, list):
            return value
        if isinstance(value.get("triplets"), list):
            return value["triplets"]
        position = end


FRAGMENTS = [
    "[", "]", "{", "}", ",", ":", " ", "\n", '"', "\\", '\\"', "\\u00e9", "\\x", "1", "-", "0", ".5",
    "e3", "-Infinity", "NaN", "true", "nul", "null", '"triplets"', '"a"', "x", "\x01", "é",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_the_linear_scan_finds_what_raw_decode_at_every_bracket_finds(text: str) -> None:
    expected = _reference_parse(text)
    parsed = parse_model_output(text)
    # NaN != NaN: compare the JSON spellings
    assert json.dumps(parsed) == json.dumps(expected)


CHARS = st.characters(blacklist_characters="<`")  # no reasoning tags or fences
PROSE = st.text(CHARS, max_size=10)


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(CHARS),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(CHARS), inner),
        max_leaves=30,
    ),
    st.text(max_size=10),
    st.text(max_size=10),
)
def test_any_json_value_between_prose_is_found(value: Any, before: str, after: str) -> None:
    text = before + json.dumps([value]) + after
    assert json.dumps(parse_model_output(text)) == json.dumps(_reference_parse(text))


TAGS = [
    "<think>",
    "</think>",
    "<THINKING>",
    "</thinking>",
    "<reasoning>",
    "</Reasoning>",
    "<think",
    "x",
    "[1]",
    " ",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TAGS), max_size=20).map("".join))
def test_reasoning_blocks_are_dropped_as_the_lazy_regex_drops_them(text: str) -> None:
    from kag.grading.triplets.io import _drop_reasoning

    pattern = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
    assert _drop_reasoning(text) == pattern.sub(" ", text)


def _triplet(source: str, target: str, relation: str, weight: float = 0.5) -> dict[str, Any]:
    return {
        "source": {"title": source, "type": "T"},
        "target": {"title": target, "type": "T"},
        "relation": relation,
        "weight": weight,
    }


def _random_triplets(rng: random.Random, count: int, names: int) -> list[dict[str, Any]]:
    words = [f"e{k}" for k in range(names)] + [f"e{k} x" for k in range(names // 2)]
    return [
        _triplet(rng.choice(words), rng.choice(words), rng.choice(["uses", "is a", "part of"]), rng.random())
        for _ in range(count)
    ]


@pytest.mark.parametrize("mode", [MatchMode.EXACT, MatchMode.FUZZY])
@pytest.mark.parametrize("shape", [(240, 7), (6, 250), (260, 230), (1, 300), (300, 1), (230, 230)])
@pytest.mark.parametrize("numpy_solver", [False, True])
def test_the_array_path_for_large_entries_gives_the_pairs_of_the_list_path(
    monkeypatch: pytest.MonkeyPatch, mode: MatchMode, shape: tuple[int, int], numpy_solver: bool
) -> None:
    rng = random.Random(hash(shape) + numpy_solver)
    n_pred, n_gold = shape
    names = 4 if n_pred * n_gold > 1000 else 40  # few names: ties and dense positives
    gold_items = _random_triplets(rng, n_gold, names)
    gold = GoldEntry.build("1", "gold", "", tuple(to_triplet(item) for item in gold_items))
    prediction = Prediction("1", "ok", tuple(_random_triplets(rng, n_pred, names)))
    sim = make_similarity(mode)
    relations = frozenset(DEFAULT_RELATIONS)
    if numpy_solver:
        monkeypatch.setattr(assign, "PYTHON_MAX_COLS", 0)
    monkeypatch.setattr(score, "PYTHON_MAX_COLS", 10**9)
    by_lists = score.score_entry(gold, prediction, sim, relations)
    monkeypatch.setattr(score, "PYTHON_MAX_COLS", 0)
    by_array = score.score_entry(gold, prediction, sim, relations)
    assert by_array == by_lists
    assert by_lists.pairs  # the case is not vacuous


def test_an_entry_past_the_pair_cap_is_exit_2_naming_file_and_entry(tmp_path: Path) -> None:
    gold = [{"id": "big", "triplets": [_triplet(f"g{k}", "t", "uses") for k in range(10_000)]}]
    predictions = [{"id": "big", "triplets": [_triplet(f"p{k}", "t", "uses") for k in range(10_001)]}]
    result = grade(tmp_path, gold, predictions)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"kag: error: {tmp_path / 'pred.jsonl'}: entry 'big': 10,001 valid predicted × 10,000 gold triplets"
        " = 100,010,000 pairs, more than the 100,000,000 one entry may be aligned on\n"
    )


def test_the_pair_cap_is_documented_in_help_and_docs() -> None:
    from kag.grading.triplets.model import MAX_ENTRY_PAIRS

    cap = f"at most {MAX_ENTRY_PAIRS:,} pairs"
    result = runner.invoke(app, ["triplets", "--help"], env={"COLUMNS": "200"})
    assert cap in " ".join(result.stdout.split())
    page = (REPO / "docs" / "triplets.md").read_text()
    assert cap in " ".join(page.split())
