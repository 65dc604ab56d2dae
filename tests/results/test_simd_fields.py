"""kag/results/simd_fields.py: the simdjson reader of the grading fields gives exactly what
`kag stats` reads (the fields, or the message of an unreadable file), on any input."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.results.codec import parse_grading_fields, result_to_json
from kag.results.model import UnreadableResult
from kag.results.simd_fields import SIMD_FROM, read_grading_fields, simd_grading_fields
from tests.results.test_codec import json_values, valid_results


def _verdict(read: object, data: bytes, text: bool) -> object:
    try:
        return read(data, text)  # type: ignore[operator]
    except UnreadableResult as exc:
        return ("unreadable", str(exc))


def _agree(data: bytes) -> None:
    for text in (False, True):
        expected = _verdict(lambda d, t: parse_grading_fields(d, True, t), data, text)
        assert _verdict(lambda d, t: simd_grading_fields(d, True, t), data, text) == expected
        assert _verdict(lambda d, t: read_grading_fields(d, True, t), data, text) == expected


@given(valid_results)
@settings(max_examples=300)
def test_a_result_file_reads_the_same(result: object) -> None:
    _agree(orjson.dumps(result_to_json(result)))  # type: ignore[arg-type]


@given(json_values, st.sampled_from(["doc", "ok", "stats", "retrieval", "retriever", "database"]))
@settings(max_examples=600)
def test_any_value_anywhere_reads_the_same(value: object, where: str) -> None:
    shapes = {
        "doc": value,
        "ok": {"ok": value},
        "stats": {"ok": {"result": "A", "stats": value}},
        "retrieval": {"ok": {"result": "A", "stats": {"prompt": "p", "retrieval": value}}},
        "retriever": {"ok": {"result": "A", "stats": {"retrieval": {"result": "t", "stats": {"e": value}}}}},
        "database": {"ok": {"result": "A", "stats": {"retrieval": {"stats": {"e": {"database": value}}}}}},
    }
    _agree(orjson.dumps(shapes[where]))


@pytest.mark.parametrize(
    "data",
    [
        b'\xef\xbb\xbf{"ok": {"result": "B"}}',  # a byte order mark: simdjson skips it, orjson refuses
        b'{"ok": {"result": "A", "result": "B"}}',  # repeated keys: orjson keeps the last
        b'{"ok": {"result": "A", "stats": {"time": {"secs": 1, "nanos": 2}, "time": 3}}}',
        b'{"ok": {"result": "A", "stats": {"retrieval": {"stats": {"a": 1, "a": {"time": {"secs": 1, "nanos": 0}}}}}}}',
        b'{"ok": {"result": "A", "stats": {"retrieval": {"stats": {"e": {"database": {"n": 1, "n": {"vertices": 2}}}}}}}}',
        b'{"ok": {"result": "A", "stats": {"usage": {"prompt_tokens": 1, "prompt_tokens": 9}}}}',
        b'{"ok": {"result": "A", "stats": {"config": {"tokens": 18446744073709551616}}}}',  # past 64 bits
        b'{"ok": {"result": "A", "stats": {"time": {"secs": -0, "nanos": 1e2}}}}',
        b'{"ok": {"result": "\\ud800"}}',  # a lone surrogate
        b'{"ok": {"result": "A"}} x',
        b'{"error": "down", "error": 3}',
        b'{"ok": {"result": "A"}, "error": "x"}',
        b"[" * 2000 + b"]" * 2000,
    ],
)
def test_the_documents_simdjson_reads_otherwise_go_to_orjson(data: bytes) -> None:
    _agree(data)


def test_a_kag_sized_file_goes_through_simdjson() -> None:
    from kag.results import simd_fields as fields

    data = orjson.dumps(
        {"ok": {"result": "B", "stats": {"prompt": "x" * SIMD_FROM, "time": {"secs": 1, "nanos": 5}}}}
    )
    assert fields._skeleton(data, False) is not None
    got = read_grading_fields(data, True, False)
    assert got == parse_grading_fields(data, True, False)
    assert (got.response, got.context_length, got.generation_ns) == ("B", SIMD_FROM, 1_000_000_005)
