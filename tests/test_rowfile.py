"""kag.rowfile: the rows of a CSV or JSON Lines file with their lines; every defect names
the file and the line, in the caller's words where the reader itself refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.errors import InputError
from kag.rowfile import iter_csv_rows, iter_jsonl_rows

PATH = Path("rows")


def test_csv_rows_come_with_the_line_they_end_on() -> None:
    text = 'a,b\n1,2\n\n"x\ny",3\n4\n'
    assert list(iter_csv_rows(PATH, text, invalid="bad ({})")) == [
        (2, {"a": "1", "b": "2"}),
        (5, {"a": "x\ny", "b": "3"}),
        (6, {"a": "4", "b": None}),
    ]
    assert list(iter_csv_rows(PATH, "", invalid="bad ({})")) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,a\n1,2\n", "rows:1: the header names a column twice"),
        ("a,b\n1,2\n1,2,3\n", "rows:3: more fields than the header names"),
        # Named where the reader stops (the field passes the limit on line 3), not at the
        # last good row (line 2).
        ("a,b\n1,2\n3," + "x" * 131_073 + "\n", "rows:3: bad (field larger than field limit (131072))"),
    ],
)
def test_a_csv_defect_names_its_line(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        list(iter_csv_rows(PATH, text, invalid="bad ({})"))
    assert str(caught.value) == message


def test_json_lines_read_alike_from_text_and_bytes() -> None:
    text = '{"a": 1}\n\n  \n{"a": "é"}\n'
    expected = [(1, {"a": 1}), (4, {"a": "é"})]
    assert list(iter_jsonl_rows(PATH, text, invalid="{}", not_object="no")) == expected
    assert list(iter_jsonl_rows(PATH, text.encode(), invalid="{}", not_object="no")) == expected


@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}\n{oops\n', "rows:2: not JSON: "),
        ('{"a": 1}\n\n[1]\n', "rows:3: expected an object"),
    ],
)
def test_a_json_lines_defect_names_its_line_in_the_callers_words(
    text: str, message: str, as_bytes: bool
) -> None:
    data = text.encode() if as_bytes else text
    with pytest.raises(InputError) as caught:
        list(iter_jsonl_rows(PATH, data, invalid="not JSON: {}", not_object="expected an object"))
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)
