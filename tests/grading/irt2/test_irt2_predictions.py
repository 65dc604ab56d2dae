"""Prediction files: CSV (fast and line-by-line paths), JSON Lines, gzip, and every malformed input."""

from __future__ import annotations

import gzip
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import InputError
from kag.grading.irt2.io.predictions import RowBlock, iter_prediction_blocks
from tests.grading.irt2.conftest import write as write_file

Row = tuple[int, int, list[tuple[int, float]]]


def rows_of(path: Path, block_bytes: int = 1 << 20) -> list[Row]:
    out: list[Row] = []
    for block in iter_prediction_blocks(path, block_bytes):
        assert isinstance(block, RowBlock)
        for i in range(block.rows):
            lo, hi = block.offsets[i], block.offsets[i + 1]
            pairs = list(zip(block.candidates[lo:hi].tolist(), block.scores[lo:hi].tolist()))
            out.append((int(block.entity[i]), int(block.relation[i]), pairs))
    return out


def lines_of(path: Path) -> list[int]:
    return [int(n) for block in iter_prediction_blocks(path) for n in block.lines]


def write(tmp_path: Path, text: str | bytes, name: str = "pred.csv") -> Path:
    return write_file(tmp_path, text, name)


def test_csv_rows_keep_order_and_values(tmp_path: Path) -> None:
    path = write(tmp_path, "1,2,30,0.5,31,1e-3,30,-2\n3,4,5,7\n")
    assert rows_of(path) == [(1, 2, [(30, 0.5), (31, 0.001), (30, -2.0)]), (3, 4, [(5, 7.0)])]
    assert lines_of(path) == [1, 2]


def test_csv_spellings_only_python_accepts(tmp_path: Path) -> None:
    # Not JSON numbers, so the block takes the line-by-line path; values as int()/float().
    path = write(tmp_path, " +1 ,2,\t3,.5,4,inf,5,-Infinity,6,1_0\r\n7,8,9,5.\n")
    assert rows_of(path) == [
        (1, 2, [(3, 0.5), (4, math.inf), (5, -math.inf), (6, 10.0)]),
        (7, 8, [(9, 5.0)]),
    ]


def test_empty_file_has_no_rows(tmp_path: Path) -> None:
    assert rows_of(write(tmp_path, "")) == []


def test_last_line_without_newline(tmp_path: Path) -> None:
    assert rows_of(write(tmp_path, "1,2,3,0.5\n4,5,6,0.25")) == [(1, 2, [(3, 0.5)]), (4, 5, [(6, 0.25)])]


def test_gzip_is_recognised_by_content(tmp_path: Path) -> None:
    text = b"1,2,3,0.5\n4,5,6,0.25\n"
    assert rows_of(write(tmp_path, gzip.compress(text), "pred.csv.gz")) == rows_of(write(tmp_path, text))
    assert rows_of(write(tmp_path, gzip.compress(text), "no-suffix")) == rows_of(write(tmp_path, text))


def test_truncated_gzip(tmp_path: Path) -> None:
    path = write(tmp_path, gzip.compress(b"1,2,3,0.5\n" * 1000)[:-20], "pred.csv.gz")
    with pytest.raises(InputError, match=r"pred.csv.gz: cannot decompress"):
        rows_of(path)


def test_small_blocks_keep_line_numbers(tmp_path: Path) -> None:
    text = "".join(f"{i},0,{i},0.{i}\n" for i in range(1, 60))
    path = write(tmp_path, text)
    assert rows_of(path, block_bytes=16) == rows_of(path)
    assert [n for b in iter_prediction_blocks(path, 16) for n in b.lines.tolist()] == list(range(1, 60))


def test_jsonl(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"query": [3, 0], "predictions": [[106, 2.0], [101, 3], [100, -1e-5]], "model": "x"}\n'
        '{"predictions": [[1, 0.5]], "query": [6, 1]}\n',
        "pred.jsonl",
    )
    assert rows_of(path) == [(3, 0, [(106, 2.0), (101, 3.0), (100, -1e-5)]), (6, 1, [(1, 0.5)])]


score_text = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**20), 10**20).map(str),
    st.builds(
        lambda sign, whole, frac, exp: f"{sign}{whole}.{frac}{exp}",
        st.sampled_from(["", "-"]),
        st.integers(0, 10**6),
        st.text("0123456789", min_size=1, max_size=25),
        st.sampled_from(["", "e5", "E-7", "e+300", "e-310"]),
    ),
    st.sampled_from(["1e-320", "2.4703282292062328e-324", "1e400", "0.1000000000000000055511151231257827"]),
)
# Ids up to 2**53 are read as float64 (simdjson), larger ones as Python ints (orjson).
id_text = st.one_of(st.integers(-(2**53), 2**53).map(str), st.integers(-(2**63), 2**63 - 1).map(str))


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(id_text, id_text, st.lists(st.tuples(id_text, score_text), min_size=1, max_size=6)),
        max_size=8,
    )
)
def test_csv_values_equal_python_int_and_float(rows: list[tuple[str, str, list[tuple[str, str]]]]) -> None:
    # The fast path must give exactly the ints and floats Python's int() and float() give.
    text = "".join(f"{e},{r}," + ",".join(f"{c},{s}" for c, s in pairs) + "\n" for e, r, pairs in rows)
    expected = [(int(e), int(r), [(int(c), float(s)) for c, s in pairs]) for e, r, pairs in rows]
    with tempfile.TemporaryDirectory() as tmp:
        assert rows_of(write(Path(tmp), text)) == expected


# ---------------------------------------------------------------- malformed input

MALFORMED_CSV = [
    ("1,2,3,0.5\n1,2,3\n", 2, r"odd number of fields \(3\)"),
    ("1,2,3,0.5,\n", 1, r"trailing comma"),
    ("1,2,3,0.5\n4,5\n", 2, r"row without a \(candidate, score\) pair"),
    ("1,2,3,0.5\n\n4,5,6,0.5\n", 2, r"blank line"),
    ("1,2,3,0.5\n   \n", 2, r"blank line"),
    (
        "mid,rid,vid,score\n1,2,3,0.5\n",
        1,
        r"field 1: not an integer id: 'mid' \(prediction files have no header line\)",
    ),
    ("1,2,3,0.5\n1,2,3.0,0.5\n", 2, r"field 3: not an integer id: '3.0'"),
    ("1,2,3,0.5\n1,2.5,3,0.5\n", 2, r"field 2: not an integer id: '2.5'"),
    ("1,2,3,0.5,x7,0.1\n", 1, r"field 5: not an integer id: 'x7'"),
    ("1,2,3,high\n", 1, r"field 4: score is not a number: 'high'"),
    ("1,2,3,0.5,4,nan\n", 1, r"field 6: score is NaN"),
    ("1,2,3,NaN\n", 1, r"field 4: score is NaN"),
    ("1,2,,0.5\n", 1, r"field 3 is empty"),
    ("1,2,3, \n", 1, r"trailing comma"),
    ("1,2,99999999999999999999,0.5\n", 1, r"field 3: id 99999999999999999999 is out of the 64-bit range"),
    (b"1,2,3,0.5\n1,2,\xff,0.5\n", 2, r"not UTF-8 text"),
    ('1,2,"3",0.5\n', 1, r"field 3: not an integer id: '\"3\"'"),
]


MALFORMED_JSONL = [
    (
        '{"query": [1, 2], "predictions": [[3, 0.5]]}\n{"query": [1, 2], "predictions": [[3, 0.5]\n',
        2,
        r"invalid JSON",
    ),
    ('{"query": [1, 2], "predictions": [[3, 0.5]]}\n\n', 2, r"blank line"),
    ('{"query": [1, 2]}\n', 1, r"missing key 'predictions'"),
    ('{"query": [1], "predictions": [[3, 0.5]]}\n', 1, r"'query' must be \[ent, rid\] with integer ids"),
    ('{"query": [1, true], "predictions": [[3, 0.5]]}\n', 1, r"'query' must be \[ent, rid\]"),
    ('{"query": [1, 2], "predictions": []}\n', 1, r"row without a \(candidate, score\) pair"),
    ('{"query": [1, 2], "predictions": {"3": 0.5}}\n', 1, r"'predictions' must be a list"),
    (
        '{"query": [1, 2], "predictions": [[3, 0.5], [4]]}\n',
        1,
        r"predictions\[1\]: expected a \[candidate, score\] pair",
    ),
    (
        '{"query": [1, 2], "predictions": [[3, 0.5], [4.0, 1]]}\n',
        1,
        r"predictions\[1\]: candidate is not an integer id: 4.0",
    ),
    (
        '{"query": [1, 2], "predictions": [[3, "0.5"]]}\n',
        1,
        r'predictions\[0\]: score is not a number: "0.5"',
    ),
    ('{"query": [1, 2], "predictions": [[3, NaN]]}\n', 1, r"invalid JSON"),
    ('{"query": [1, 2], "predictions": [[3, 0.5]]}\n[1, 2]\n', 2, r"expected an object"),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [("pred.csv", *case) for case in MALFORMED_CSV] + [("pred.jsonl", *case) for case in MALFORMED_JSONL],
)
def test_malformed_file_names_file_and_line(
    tmp_path: Path, name: str, text: str | bytes, line: int, message: str
) -> None:
    path = write(tmp_path, text, name)
    with pytest.raises(InputError, match=rf"^{path}:{line}: {message}"):
        rows_of(path)


def test_rows_before_a_malformed_line_are_handed_out_first(tmp_path: Path) -> None:
    path = write(tmp_path, "1,2,3,0.5\n4,5,6,0.25\n7,8,9\n")
    blocks = iter_prediction_blocks(path)
    first = next(blocks)
    assert first.lines.tolist() == [1, 2]
    with pytest.raises(InputError, match=r":3: odd number of fields"):
        next(blocks)


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope.csv: predictions file not found$"):
        rows_of(tmp_path / "nope.csv")
    with pytest.raises(InputError, match=rf"^{tmp_path}: predictions file is a directory$"):
        rows_of(tmp_path)


def test_block_arrays_are_typed(tmp_path: Path) -> None:
    block = next(iter_prediction_blocks(write(tmp_path, "1,2,3,0.5\n")))
    assert block.candidates.dtype == np.int64 and block.scores.dtype == np.float64
    assert block.offsets.tolist() == [0, 1]


FAST_BLOCKS = [
    # float64 ids (all within 2**53), scores with and without a dot, exponents, spaces
    b"1,2,30,0.5,31,1e-3,30,-2\n3,4,5,7,-6,0.1000000000000000055511151231257827\n-0,0, 9 ,1E+2\r\n",
    b"9007199254740992,-9007199254740992,1,2.5e-300,2,-0.0\n",
    # an id past 2**53: every id of the block as a Python int
    b"1,2,30,0.5\n-9223372036854775808,0,9223372036854775807,1E+2\n",
]


@pytest.mark.parametrize("block", FAST_BLOCKS)
@pytest.mark.parametrize("simd_max", [None, 8])  # 8: every block is "too large" for simdjson
def test_fast_and_line_by_line_paths_agree(
    block: bytes, simd_max: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kag.grading.irt2.io import predictions

    if simd_max is not None:
        monkeypatch.setattr(predictions, "SIMD_MAX_BYTES", simd_max)
    fast = predictions._csv_fast(block, 10)
    slow, error = predictions._csv_slow(block, 10, Path("x.csv"))
    assert fast is not None and error is None
    for name in ("lines", "entity", "relation", "offsets", "candidates", "scores"):
        assert getattr(fast, name).tolist() == getattr(slow, name).tolist(), name
        assert getattr(fast, name).dtype == getattr(slow, name).dtype, name
    assert fast.lines.tolist() == list(range(10, 10 + block.count(b"\n")))


DECLINED_BLOCKS = [
    b"1,2,3,0.5\n\n",
    b"1,2,3,0.5,\n",
    b"1,2,3\n",
    b"1,2,+3,0.5\n",
    # integral doubles that int() refuses, in each kind of id field
    b"1,2,3.0,0.5\n",
    b"1,2,3.0,5\n",  # as many dots as scores, the dot in the wrong field
    b"1,2,3,0.5,4.0,1\n",
    b"1,2,1e3,0.5\n",
    b"1,2,30E-1,0.5\n",
    b"1.0,2,3,0.5\n",
    b"1,2.0,3,0.5\n",
    b"1,2e0,3,0.5\n",
    # JSON that is not a number
    b"1,2,3,true\n",
    b"1,2,3,null\n",
    b'1,2,"3",0.5\n',
    b"1,2,3,0.5,[4],0.5\n",
    b"1,2,3,0.5,[4,0.5]\n",
    b"1,2,3,{}\n",
    # outside what a float64 or an int64 holds
    b"1,2,3,1e400\n",
    b"1,2,9223372036854775808,0.5\n",
]


@pytest.mark.parametrize("block", DECLINED_BLOCKS)
@pytest.mark.parametrize("simd_max", [None, 8])
def test_fast_path_declines_what_it_cannot_judge(
    block: bytes, simd_max: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kag.grading.irt2.io import predictions

    if simd_max is not None:
        monkeypatch.setattr(predictions, "SIMD_MAX_BYTES", simd_max)
    assert predictions._csv_fast(block, 1) is None
