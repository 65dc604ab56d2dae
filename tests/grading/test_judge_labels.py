"""kag.grading.judge_labels: CSV and JSON Lines read alike; every defect an error naming the
file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.errors import InputError
from kag.grading.judge_labels import Label, read_labels


def test_csv_and_jsonl_read_alike(tmp_path: Path) -> None:
    csv = tmp_path / "l.csv"
    csv.write_text(
        "\ufeffdataset,question,setup,label,annotator\r\ngeo,1,s1,Correct,ann\r\ngeo,2,s1,incorrect,\r\n"
    )
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text(
        '{"dataset": "geo", "question": "1", "setup": "s1", "label": "CORRECT", "annotator": "ann"}\n\n'
        '{"dataset": "geo", "question": 2, "setup": "s1", "label": "incorrect"}\n'
    )
    expected = (Label("geo", "1", "s1", True, "ann"), Label("geo", "2", "s1", False, ""))
    assert read_labels(csv) == expected
    assert read_labels(jsonl) == expected


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("l.txt", "x", "a labels file is .csv or .jsonl"),
        ("l.csv", "dataset,question,setup,label\ngeo,1,s1,maybe\n", "l.csv:2: key 'label' is 'maybe'"),
        ("l.csv", "dataset,question,label\ngeo,1,correct\n", "l.csv:2: key 'setup' is missing or empty"),
        (
            "l.csv",
            "dataset,question,setup,label\ngeo,1,s1,correct,extra\n",
            "l.csv:2: more fields than the header",
        ),
        ("l.csv", "dataset,question,setup,label,label\n", "l.csv:1: the header names a column twice"),
        # The field that passes the CSV reader's limit ends on line 3, after the good row of line 2.
        (
            "l.csv",
            "dataset,question,setup,label\ngeo,1,s1,correct\ngeo,2,s1," + "x" * 131_073 + "\n",
            "l.csv:3: not valid CSV (field larger than field limit (131072))",
        ),
        ("l.jsonl", '{"dataset": "g"}\n[1]\n', "l.jsonl:1: key 'question' is missing"),
        ("l.jsonl", "[1]\n", "l.jsonl:1: expected an object"),
        ("l.jsonl", "{nope\n", "l.jsonl:1: not valid JSON"),
        (
            "l.jsonl",
            '{"dataset": "g", "question": "1", "setup": "s", "label": true}\n',
            "key 'label' must be text",
        ),
        (
            "l.csv",
            "dataset,question,setup,label\ngeo,1,s1,correct\ngeo,1,s1,incorrect\n",
            "l.csv:3: geo/1/s1 labelled again (first at line 2)",
        ),
    ],
)
def test_defects_name_the_line_and_key(tmp_path: Path, name: str, body: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        read_labels(path)


def test_a_missing_or_binary_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.csv"):
        read_labels(tmp_path / "nope.csv")
    bad = tmp_path / "b.csv"
    bad.write_bytes(b"dataset\n\xff\n")
    with pytest.raises(InputError, match="not UTF-8"):
        read_labels(bad)
