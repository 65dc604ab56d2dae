"""Degenerate triplet input: deep nesting, long outputs, huge entries. No traceback, no blow-up."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.triplets.io import parse_model_output

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


@pytest.mark.parametrize("output", ["[" * 1000, "[" * 1000 + "]" * 1000, "ok: " + "[1," * 1000])
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
    assert result.stderr == f"kag: error: {gold} line 1: not valid JSON (nested too deeply)\n"


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
