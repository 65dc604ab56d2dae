"""kag.results.codec: the fast readers (grading's and search's) give exactly the verdict
and the fields of the canonical reader, on any input."""

from __future__ import annotations

import math
from collections.abc import Callable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.grading.mcq.rule import (
    DEFAULT_ABSTENTION,
    AnswerKey,
    compile_abstention,
    grade_fields,
    grade_result,
)
from kag.results.codec import (
    grading_fields,
    parse_grading_fields,
    parse_response,
    parse_result,
    result_from_json,
    result_to_json,
    simd_response,
)
from kag.results.model import (
    AugmentedGeneration,
    DatabaseStats,
    ErrorResult,
    ModelConfig,
    OkResult,
    OkStats,
    Retrieval,
    Timing,
    UnreadableResult,
    Usage,
)

# ---------------------------------------------------------------- search: parse_response

any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["ok", "error", "result", "stats", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def _response_verdict(parse: Callable[[bytes], object], data: bytes) -> object:
    try:
        parsed = parse(data)
    except UnreadableResult as exc:
        return ("unreadable", str(exc))
    return parsed.result if isinstance(parsed, OkResult) else parsed


@given(any_json)
@settings(max_examples=150)
def test_parse_response_agrees_with_parse_result(value: object) -> None:
    data = orjson.dumps(value)
    assert _response_verdict(parse_response, data) == _response_verdict(parse_result, data)


@given(st.binary(max_size=40))
def test_parse_response_agrees_on_arbitrary_bytes(data: bytes) -> None:
    assert _response_verdict(parse_response, data) == _response_verdict(parse_result, data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"ok": {"result": "B", "stats": {"time": "soon", "usage": 3}}}',
        b'{"error": "boom"}',
        b'{"ok": {"result": "B"}, "error": "both"}',
        b'{"error": null}',
        b'{"ok": {"stats": {}}}',
        b'{"ok": []}',
        b"[1]",
        b'{"ok": {"result": "B"',
        b"\xff",
        # Where simdjson (the fast path) and orjson (the rule) differ, orjson decides.
        b'\xef\xbb\xbf{"ok": {"result": "B"}}',  # a byte order mark: simdjson skips it
        b'{"ok": {"result": "A", "result": "B"}}',  # a repeated key: simdjson finds the first
        b'{"ok": {"result": "A"}, "ok": {"result": "B"}}',
        b'{"ok": {"result": 1, "result": "B"}}',
        b'{"ok": {"\\u0072esult": "A", "result": "B"}}',  # the same key, escaped
        b'{"error": "A", "error": 2}',
        b'{"ok": {"result": "B", "stats": {"n": 123456789012345678901234567890}}}',  # past 64 bits
        b'{"ok": {"result": "B", "stats": {"n": -9223372036854775809}}}',
        b'{"ok": {"result": "B", "stats": {"n": 18446744073709551615}}}',
        b'{"ok": {"result": "B", "stats": {"n": 1e400}}}',
        b'{"ok": {"result": "B", "stats": {"n": 1e-400}}}',
        b'{"ok": {"result": "B", "stats": {"s": "\xff"}}}',  # invalid UTF-8 where no one looks
        b'{"ok": {"result": "B", "stats": {"s": "\\ud800"}}}',  # a lone surrogate
        b'{"ok": {"result": "\\ud83d\\ude00 \\u0000"}}',
        b'{"ok": {"result": "B", "stats": {"s": "\x1f"}}}',
        b'{"ok": {"result": "B"}}\x00',
        b' {"ok": {"result": "B"}}\n',
        b'{"ok": {"result": "B", "stats": {"v": [0.1, -2.5e-3, 01]}}}',
        b'{"ok": {"result": "B", "stats": {"v": [1.]}}}',
        b'{"ok": {"result": "B", "stats": {"v": [NaN]}}}',
        b'{"ok": {"result": "B", "stats": [' + b"[" * 1021 + b"]" * 1021 + b"]}}",
        b'{"ok": {"result": "B", "stats": ' + b'{"a":' * 1021 + b"1" + b"}" * 1021 + b"}}",
        b'{"ok": {"result": "B", "stats": [' + b"[" * 1030 + b"]" * 1030 + b"]}}",
    ],
)
def test_parse_response_agrees_on_each_shape(data: bytes) -> None:
    assert _response_verdict(parse_response, data) == _response_verdict(parse_result, data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"ok": {"result": "B", "stats": {"v": [0.25, -1e-3], "n": 3}}}', "B"),
        (b'{"error": "boom"}', ErrorResult("boom")),
        # Left to orjson: it would read these otherwise, or reject them.
        (b'\xef\xbb\xbf{"ok": {"result": "B"}}', None),
        (b'{"ok": {"result": "A", "result": "B"}}', None),
        (b'{"ok": {"result": "B", "stats": {"n": 123456789012345678901234567890}}}', None),
        (b'{"ok": {"result": "B"}, "error": "both"}', None),
        (b'{"ok": {"result": 3}}', None),
        (b"[1]", None),
    ],
)
def test_the_simdjson_fast_path_reads_the_plain_shapes_only(data: bytes, expected: object) -> None:
    """The fast path must really serve the common files (else every search pays orjson's
    price unnoticed), and must step aside where orjson alone knows the answer."""
    assert simd_response(data) == expected
    assert simd_response(data) == expected  # the parser is reusable


# ---------------------------------------------------------------- grading: grading_fields


KEY = AnswerKey("b", ("a", "b", "c"))
FIELDS = [
    "ok",
    "error",
    "result",
    "stats",
    "time",
    "secs",
    "nanos",
    "prompt",
    "retrieval",
    "embedder",
    "database",
    "neo4j",
    "vertices",
    "relationships",
    "properties",
    "config",
    "embedding",
    "vec",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "provider",
    "model",
    "temperature",
    "tokens",
    "augmented_generation",
    "retriever",
    "x",
]
edge_scalars = st.sampled_from(
    [None, True, False, -1, 0, 1, 7, 2.5, -0.0, "b", " B\n", "I don't know.", "", "é", "7"]
)
scalars = (
    edge_scalars | st.integers(-3, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["c", "zz"])
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4),
    max_leaves=25,
)
timings = st.builds(Timing, st.integers(0, 10**6), st.integers(0, 999_999_999))
valid_results = st.one_of(
    st.builds(ErrorResult, st.text(max_size=5)),
    st.builds(
        OkResult,
        st.sampled_from(["b", " B\n", "I don't know.", "a", "C", "other"]),
        st.builds(
            OkStats,
            prompt=st.none() | st.text(max_size=8),
            time=st.none() | timings,
            retrieval=st.none()
            | st.builds(
                Retrieval,
                result=st.just("ctx"),
                database=st.none()
                | st.builds(
                    DatabaseStats,
                    st.just("neo4j"),
                    st.none() | st.integers(0, 99),
                    st.none() | st.integers(0, 99),
                    st.none() | st.integers(0, 99),
                ),
                time=st.none() | timings,
            ),
            config=st.none()
            | st.builds(
                ModelConfig,
                st.sampled_from(["openai", ""]),
                st.sampled_from(["m", "qwen"]),
                st.sampled_from([0.0, 0.7]),
                st.none() | st.integers(0, 99),
                st.none() | st.builds(AugmentedGeneration, st.just("embedder"), st.just("neo4j")),
            ),
            usage=st.none()
            | st.builds(Usage, st.none() | st.integers(0, 99), st.none() | st.integers(0, 99)),
        ),
    ),
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _replace(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(value[path[0]], path[1:], new)
    return copy


def _assert_fast_path_agrees(raw) -> None:
    pattern = compile_abstention(DEFAULT_ABSTENTION)
    args = {"dataset": "d", "question": "q", "setup": "s"}
    try:
        model = result_from_json(raw)
    except UnreadableResult as exc:
        with pytest.raises(UnreadableResult) as fast:
            grade_fields(grading_fields(raw), KEY, abstention=pattern, **args)
        assert str(fast.value) == str(exc)
        return
    expected = grade_result(model, KEY.answer, KEY.options, abstention=pattern, **args)
    assert grade_fields(grading_fields(raw), KEY, abstention=pattern, **args) == expected
    # The retrieval text the evidence measures read is the model's, and only read when asked.
    text = None
    if isinstance(model, OkResult) and model.stats.retrieval is not None:
        text = model.stats.retrieval.result
    assert grading_fields(raw, retrieval_text=True).retrieval_text == text
    assert grading_fields(raw).retrieval_text is None


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_grading_fields_grade_equals_the_model_on_any_json(raw):
    _assert_fast_path_agrees(raw)
    _assert_fast_path_agrees({"ok": raw})
    _assert_fast_path_agrees({"ok": {"result": "b", "stats": raw}})


@settings(max_examples=300, deadline=None)
@given(valid_results, st.data())
def test_grading_fields_grade_equals_the_model_on_mutated_result_files(result, data):
    raw = result_to_json(result)
    _assert_fast_path_agrees(raw)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(raw))))
        raw = _replace(raw, path, data.draw(edge_scalars | json_values))
        _assert_fast_path_agrees(raw)


def _full(time=None, db=None, ret_time=None) -> dict:
    return {"ok": {"result": "b", "stats": {
        "prompt": "p", "time": time or {"secs": 1, "nanos": 2},
        "retrieval": {"result": "r", "stats": {"embedder": {
            "database": {"neo4j": db or {"vertices": 1, "relationships": 2, "properties": 3}},
            "time": ret_time or {"secs": 0, "nanos": 5}}}}}}}  # fmt: skip


@pytest.mark.parametrize(
    "raw",
    [
        _full(),
        _full(time={"secs": True, "nanos": 1}),
        _full(time={"secs": 1, "nanos": -1}),
        _full(time={"secs": 1.0, "nanos": 1}),
        _full(db={"vertices": 1, "relationships": 2, "properties": -3}),
        _full(db={"vertices": False, "relationships": 2, "properties": 3}),
        _full(db={"vertices": 1, "relationships": 2.0, "properties": 3}),
        _full(ret_time={"secs": -1, "nanos": 0}),
        {
            "ok": {
                "result": "b",
                "stats": {
                    "retrieval": {"stats": {"embedder": {"database": {}, "time": {"secs": 0, "nanos": 1}}}}
                },
            }
        },
        {"ok": {"result": "b", "stats": {"retrieval": {"stats": {}}}}},
        {"ok": {"result": "b", "stats": {"prompt": ["p"], "time": [1, 2]}}},
        {"ok": {"result": "b", "stats": None}},
        {"ok": {"result": "b"}},
        {"error": ""},
        {"error": None},
    ],
)
def test_grading_fields_grade_equals_the_model_on_edge_cases(raw):
    _assert_fast_path_agrees(raw)


def test_parse_grading_fields_reports_invalid_json_like_parse_result():
    for data in (b"", b"{", b'{"ok": 1,}', b"\xff"):
        with pytest.raises(UnreadableResult) as model:
            parse_result(data)
        with pytest.raises(UnreadableResult) as fast:
            parse_grading_fields(data)
        assert str(fast.value) == str(model.value)


def test_the_records_keep_the_error_text_the_config_and_the_usage() -> None:
    """What comparisons and cost reports read later comes with the record, not from the file again."""
    pattern = compile_abstention(DEFAULT_ABSTENTION)
    args = {"dataset": "d", "question": "q", "setup": "s", "abstention": pattern}
    err = grade_fields(grading_fields({"error": "rate limited"}), KEY, **args)
    assert (err.response, err.error) == (None, "rate limited")
    raw = {
        "ok": {
            "result": "b",
            "stats": {
                "config": {
                    "augmented_generation": {"retriever": "embedder", "database": "neo4j"},
                    "provider": "openai",
                    "model": "qwen",
                    "temperature": 0.5,
                    "tokens": None,
                },
                "usage": {"prompt_tokens": 120, "completion_tokens": 3},
            },
        }
    }
    graded = grade_fields(grading_fields(raw), KEY, **args)
    assert graded.config == ModelConfig("openai", "qwen", 0.5, None, AugmentedGeneration("embedder", "neo4j"))
    assert graded.usage == Usage(120, 3) and graded.error is None


@settings(max_examples=200, deadline=None)
@given(valid_results, st.data())
def test_the_sums_only_reader_keeps_the_usage_and_drops_only_the_config(result, data):
    """`kag stats` without records (``details=False``) still sums tokens: only ``config`` is left out."""
    raw = result_to_json(result)
    for _ in range(data.draw(st.integers(0, 2))):
        path = data.draw(st.sampled_from(list(_paths(raw))))
        raw = _replace(raw, path, data.draw(edge_scalars | json_values))
    try:
        full = grading_fields(raw)
    except UnreadableResult:
        return
    assert grading_fields(raw, details=False) == full._replace(config=None)
    model = result_from_json(raw)
    assert full.usage == (model.stats.usage if isinstance(model, OkResult) else None)


def test_the_files_of_a_setup_share_one_config_and_no_two_configs_are_mixed_up() -> None:
    base = {
        "provider": "p",
        "model": "m",
        "temperature": 0.5,
        "tokens": 7,
        "augmented_generation": {"retriever": "r", "database": "d"},
    }
    variants = [
        base,
        {**base, "provider": "q"},
        {**base, "model": "n"},
        {**base, "temperature": 0.25},
        {**base, "temperature": 2},
        {**base, "tokens": None},
        {**base, "tokens": 8},
        {**base, "augmented_generation": None},
        {**base, "augmented_generation": {"retriever": "r", "database": "e"}},
        {**base, "augmented_generation": {"retriever": "s", "database": "d"}},
    ]

    def config_of(value: dict[str, object]) -> ModelConfig | None:
        return grading_fields({"ok": {"result": "A", "stats": {"config": value}}}).config

    def spelled_out(value: dict[str, object]) -> ModelConfig:
        aug = value["augmented_generation"]
        return ModelConfig(
            value["provider"],  # type: ignore[arg-type]
            value["model"],  # type: ignore[arg-type]
            float(value["temperature"]),  # type: ignore[arg-type]
            value["tokens"],  # type: ignore[arg-type]
            AugmentedGeneration(**aug) if isinstance(aug, dict) else None,
        )

    read = [config_of(value) for value in variants]
    assert read == [spelled_out(value) for value in variants]
    assert len({(c.provider, c.model, c.temperature, c.tokens, c.augmented_generation) for c in read}) == 10  # type: ignore[union-attr]
    assert config_of(dict(base)) is read[0]  # one object for the files that say the same


def _config_spelled_out(value: object) -> ModelConfig | None:
    """The config a file's ``ok.stats.config`` reads as, by the rules written plainly: a
    string or "" (provider, model), a finite number as a float or 0.0 (temperature), an
    integer that is no bool or None (tokens), both augmentation names strings or neither."""
    if not isinstance(value, dict):
        return None

    def text(v: object) -> str:
        return v if isinstance(v, str) else ""

    t = value.get("temperature")
    finite = isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
    tokens = value.get("tokens")
    aug = value.get("augmented_generation")
    augmented = None
    if (
        isinstance(aug, dict)
        and isinstance(aug.get("retriever"), str)
        and isinstance(aug.get("database"), str)
    ):
        augmented = AugmentedGeneration(aug["retriever"], aug["database"])
    return ModelConfig(
        text(value.get("provider")),
        text(value.get("model")),
        float(t) if finite and t else 0.0,  # type: ignore[arg-type]
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        augmented,
    )


_ODD_VALUES = [
    None, True, False, 0, 1, -3, 2**70, 0.0, -0.0, 1.0, 0.5, -2.5, 1e308,
    math.inf, -math.inf, math.nan, "", "x", "0.5", [], [1], {}, {"retriever": "r"},
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    provider=st.sampled_from(_ODD_VALUES),
    model=st.sampled_from(_ODD_VALUES),
    temperature=st.sampled_from(_ODD_VALUES) | st.floats(),
    tokens=st.sampled_from(_ODD_VALUES) | st.integers(),
    retriever=st.sampled_from(_ODD_VALUES),
    database=st.sampled_from(_ODD_VALUES),
    aug_kind=st.sampled_from(["dict", "none", "absent", "list", "odd"]),
)
def test_a_config_reads_as_its_rules_written_plainly_whatever_its_values(
    provider: object,
    model: object,
    temperature: object,
    tokens: object,
    retriever: object,
    database: object,
    aug_kind: str,
) -> None:
    # The reader's checks are written out for speed (a config is read per file): each value
    # of each type, an infinity, NaN, -0.0, a bool where a number goes, gives what the rules say.
    value: dict[str, object] = {
        "provider": provider,
        "model": model,
        "temperature": temperature,
        "tokens": tokens,
    }
    if aug_kind == "dict":
        value["augmented_generation"] = {"retriever": retriever, "database": database}
    elif aug_kind == "none":
        value["augmented_generation"] = None
    elif aug_kind == "list":
        value["augmented_generation"] = [retriever, database]
    elif aug_kind == "odd":
        value["augmented_generation"] = retriever
    expected = _config_spelled_out(value)
    got = grading_fields({"ok": {"result": "A", "stats": {"config": value}}}).config
    assert got == expected
    assert got is not None and expected is not None
    assert type(got.temperature) is float
    assert got.temperature != 0.0 or math.copysign(1.0, got.temperature) == 1.0  # never -0.0
    model_config = result_from_json({"ok": {"result": "A", "stats": {"config": value}}})
    assert isinstance(model_config, OkResult) and model_config.stats.config == expected
