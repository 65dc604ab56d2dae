"""Reading inputs (JSON arrays, JSON Lines, raw model text) and validate_schema."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.errors import InputError
from kag.grading.triplets.io import (
    load_gold,
    load_predictions,
    load_relations,
    parse_model_output,
    read_records,
)
from kag.grading.triplets.validate import to_triplet, triplet_problem, validate_items
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "triplets"
PARSE = json.loads((DATA / "parse_cases.json").read_text())["cases"]
VALIDATE = json.loads((DATA / "validate_cases.json").read_text())["cases"]

TRIPLET = {
    "source": {"title": "A", "type": "T"},
    "target": {"title": "B", "type": "T"},
    "relation": "uses",
    "weight": 0.5,
}


@pytest.mark.parametrize(("text", "expected"), PARSE, ids=[case[0][:40] for case in PARSE])
def test_parse_model_output(text: str, expected: list[Any] | None) -> None:
    parsed = parse_model_output(text)
    if expected == [{"w": "NaN"}]:  # JSON cannot hold NaN: the model's NaN is parsed as a float
        assert parsed is not None and math.isnan(parsed[0]["w"])
    else:
        assert parsed == expected


@pytest.mark.parametrize(("item", "reason"), VALIDATE, ids=[str(i) for i in range(len(VALIDATE))])
def test_triplet_problem(item: Any, reason: str | None) -> None:
    assert triplet_problem(item) == reason


def test_nan_and_infinite_weights_are_invalid() -> None:
    for weight in (math.nan, math.inf, -math.inf):
        assert triplet_problem({**TRIPLET, "weight": weight}) == f"'weight' {weight!r} is outside [0, 1]"


def test_validate_items_keeps_indices() -> None:
    valid, invalid = validate_items((TRIPLET, "x", {**TRIPLET, "weight": True}))
    assert [index for index, _ in valid] == [0]
    assert valid[0][1].norm_relation == "uses" and valid[0][1].weight == 0.5
    assert invalid == [(1, "not an object (str)"), (2, "'weight' is not a number (bool)")]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_json_array_and_json_lines_read_alike(tmp_path: Path) -> None:
    rows = [{"id": 1, "triplets": [TRIPLET]}, {"id": "2", "triplets": []}]
    array = write(tmp_path / "a.json", json.dumps(rows, indent=2))
    lines = write(tmp_path / "b.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert (
        [v for _, v in read_records(array, "gold file")]
        == [v for _, v in read_records(lines, "gold file")]
        == rows
    )
    assert [w for w, _ in read_records(lines, "gold file")] == [f"{lines}:1", f"{lines}:2"]
    assert [e.id for e in load_gold(array)] == ["1", "2"]


def test_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": 1, "triplets": []}).encode())
    assert load_gold(path)[0].id == "1"


def test_predictions_statuses(tmp_path: Path) -> None:
    rows = [
        {"id": "list", "triplets": [TRIPLET]},
        {"id": "text", "output": "<think>hmm</think>```json\n[" + json.dumps(TRIPLET) + "]\n```"},
        {"id": "prose", "output": "I don't know."},
        {"id": "object", "triplets": {"source": {"title": "A", "type": "T"}}},
        {"id": "number", "output": 3},
        {"id": "output-list", "output": [TRIPLET]},
        {"id": "neither"},
        {"id": 7, "triplets": []},
    ]
    path = write(tmp_path / "p.jsonl", "\n".join(json.dumps(r) for r in rows))
    predictions = load_predictions(path)
    status = {key: (p.status, len(p.items)) for key, p in predictions.items()}
    assert status == {
        "list": ("ok", 1),
        "text": ("ok", 1),
        "prose": ("unparseable", 0),
        "object": ("malformed", 0),
        "number": ("malformed", 0),
        "output-list": ("ok", 1),
        "neither": ("malformed", 0),
        "7": ("ok", 0),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"id": 1, "triplets": []}\n{"id": "1", "triplets": []}\n',
            ":2: duplicate id '1' (first at line 1)",
        ),
        ('{"triplets": []}\n', ":1: the entry has no 'id'"),
        ('{"id": true, "triplets": []}\n', ":1: 'id' must be a string or an integer, got bool"),
        ('{"id": 1.5, "triplets": []}\n', ":1: 'id' must be a string or an integer, got float"),
        ('"just text"\n', ":1: expected an object with an 'id', got str"),
        ("[1, 2]\n", "entry 1: expected an object with an 'id', got int"),
        ('{"id": 1, "triplets": []}\n{"id": 2,\n', ":2: not valid JSON"),
        (
            '[{"id": 1, "triplets": []}, {"id": 1, "triplets": []}]',
            "entry 2: duplicate id '1' (first at entry 1)",
        ),
        ('[{"id": 1}', "not a valid JSON array"),
        ('{"id": 1}\n', ":1: 'triplets' is missing"),
        ('{"id": 1, "triplets": {}}\n', ":1: 'triplets' is a dict, not a list"),
        ('{"id": 1, "triplets": [], "prompt": 3}\n', ":1: 'prompt' is not a string"),
        (
            '{"id": 1, "triplets": [{"source": {"title": "A", "type": "T"}}]}\n',
            ":1: gold triplet 0: 'target' is missing",
        ),
        ("\n\n", "no gold entries"),
    ],
)
def test_gold_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "gold.jsonl", text)
    with pytest.raises(InputError) as caught:
        load_gold(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_prediction_duplicate_ids_are_an_input_error(tmp_path: Path) -> None:
    path = write(tmp_path / "p.jsonl", '{"id": 1, "triplets": []}\n{"id": 1, "output": "x"}\n')
    with pytest.raises(InputError, match=r"p\.jsonl:2: duplicate id '1'"):
        load_predictions(path)


def test_predictions_skip_unjoinable_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(
        tmp_path / "p.jsonl",
        '{"id": 1, "triplets": []}\n"log line"\n{"id": true}\n{"output": "x"}\n{"id": 2, "trip\n',
    )
    assert list(load_predictions(path)) == ["1"]
    assert f"{path}: 4 entries skipped (line 2: expected an object with an 'id', got str; " in caplog.text
    assert (
        "line 3: 'id' must be a string or an integer, got bool; line 4: the entry has no 'id'; and 1 more)"
        in (caplog.text)
    )


def test_missing_file_directory_and_bad_encoding(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"^{tmp_path / 'nope.jsonl'}: gold file not found$"):
        load_gold(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match=f"^{tmp_path}: predictions file is a directory$"):
        load_predictions(tmp_path)
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"id": 1}\n{"id": "\xe9"}')
    with pytest.raises(InputError, match=rf"^{bad}:2: gold file is not UTF-8 text \(byte 18\)$"):
        load_gold(bad)


def test_relations_file(tmp_path: Path) -> None:
    good = write(tmp_path / "rel.json", '["uses", "Part Of"]')
    assert load_relations(good) == ("uses", "Part Of")
    for text in ('{"uses": 1}', "[]", '["uses", ""]', '["uses", 3]', "not json"):
        path = write(tmp_path / "bad.json", text)
        with pytest.raises(InputError, match=r"bad\.json"):
            load_relations(path)
    with pytest.raises(InputError, match=f"^{tmp_path / 'missing.json'}: relations file not found$"):
        load_relations(tmp_path / "missing.json")


json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-1, 2)
    | st.sampled_from(["", " ", "A", "uses"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["title", "type"]), children)
    ),
    max_leaves=6,
)
entity_value = st.one_of(
    json_value,
    st.fixed_dictionaries({"title": json_value, "type": json_value}),
    st.just({"title": "A", "type": "T"}),
)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "source": entity_value,
            "target": entity_value,
            "relation": json_value,
            "weight": json_value,
        },
    )
)
def test_fast_path_agrees_with_the_full_check(item: dict[str, Any]) -> None:
    """validate_items' one-pass check never accepts what triplet_problem rejects, and vice versa."""
    valid, invalid = validate_items((item,))
    problem = triplet_problem(item)
    if problem is None:
        assert [t for _, t in valid] == [to_triplet(item)] and not invalid
    else:
        assert invalid == [(0, problem)] and not valid
