"""Gold evidence in the datasets file: entity names, or an object of entities and triples;
imported from a column and counted by ``kag datasets check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import parse_datasets
from kag.errors import InputError

_MCQ = {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}


def _doc(evidence: object) -> bytes:
    return json.dumps({"d": {"q": {"input": "?", "output": _MCQ, "evidence": evidence}}}).encode()


def test_the_list_form_still_reads_as_entity_names(tmp_path: Path):
    q = parse_datasets(_doc(["Vitamin C", "Scurvy"]), tmp_path / "x.json").get("d", "q")
    assert q is not None
    assert q.evidence == ("Vitamin C", "Scurvy")
    assert q.evidence_triples == ()


def test_the_object_form_holds_entities_and_triples(tmp_path: Path):
    doc = _doc({"entities": ["Vitamin C"], "triples": [["Scurvy", "caused by", "vitamin C deficiency"]]})
    parsed = parse_datasets(doc, tmp_path / "x.json")
    q = parsed.get("d", "q")
    assert q is not None
    assert q.evidence == ("Vitamin C",)
    assert q.evidence_triples == (("Scurvy", "caused by", "vitamin C deficiency"),)
    assert parsed.has_evidence


def test_triples_alone_are_evidence(tmp_path: Path):
    parsed = parse_datasets(_doc({"triples": [["a", "r", "b"]]}), tmp_path / "x.json")
    assert parsed.has_evidence


@pytest.mark.parametrize(
    ("evidence", "message"),
    [
        ({"entity": ["x"]}, "unknown key 'entity'"),
        ({"entities": "x"}, "'evidence.entities' must be an array"),
        ({"triples": [["a", "r"]]}, "'evidence.triples' must be an array of [subject, relation, object]"),
        ({"triples": [["a", "", "b"]]}, "'evidence.triples' must be"),
        ({"triples": "a r b"}, "'evidence.triples' must be"),
        ("Scurvy", "'evidence' must be an array of non-empty strings or an object"),
    ],
)
def test_bad_evidence_is_named(tmp_path: Path, evidence: object, message: str):
    with pytest.raises(InputError) as err:
        parse_datasets(_doc(evidence), tmp_path / "x.json")
    assert "d/q" in str(err.value)
    assert message in str(err.value)


def _import(tmp_path: Path, rows: list[dict[str, object]]) -> tuple[int, dict, str]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "datasets.json"
    result = CliRunner().invoke(
        app,
        ["datasets", "import", str(source), "-o", str(out), "--question", "q", "--answers", "a"]
        + ["--evidence-column", "ev"],
    )
    doc = json.loads(out.read_text()) if out.exists() else {}
    return result.exit_code, doc, result.stderr


def test_import_reads_semicolon_separated_names_and_json_cells(tmp_path: Path):
    code, doc, err = _import(
        tmp_path,
        [
            {"q": "one", "a": "x", "ev": "Vitamin C; Scurvy ;"},
            {"q": "two", "a": "y", "ev": '{"triples": [["Scurvy", "caused by", "deficiency"]]}'},
            {"q": "three", "a": "z", "ev": ""},
            {"q": "four", "a": "w", "ev": ["Iron"]},
        ],
    )
    assert code == 0, err
    entries = doc["in"]
    assert entries["0"]["evidence"] == ["Vitamin C", "Scurvy"]
    assert entries["1"]["evidence"] == {"triples": [["Scurvy", "caused by", "deficiency"]]}
    assert "evidence" not in entries["2"]
    assert entries["3"]["evidence"] == ["Iron"]


def test_import_refuses_a_malformed_evidence_cell_with_exit_2(tmp_path: Path):
    code, _, err = _import(tmp_path, [{"q": "one", "a": "x", "ev": '{"triples": [["a", "b"]]}'}])
    assert code == 2
    assert "evidence.triples" in err


def test_check_counts_triples_only_when_some_question_has_them(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(_doc(["Scurvy"]).decode())
    plain = CliRunner().invoke(app, ["datasets", "check", str(path), "--format", "json"])
    assert plain.exit_code == 0
    assert "evidence_triples" not in plain.stdout
    assert json.loads(plain.stdout)["total"]["evidence"] == 1
    path.write_text(_doc({"entities": ["Scurvy"], "triples": [["a", "r", "b"]]}).decode())
    with_triples = CliRunner().invoke(app, ["datasets", "check", str(path), "--format", "json"])
    assert json.loads(with_triples.stdout)["total"] == {
        "questions": 1,
        "mcq": 1,
        "with_answer": 1,
        "open": 0,
        "free_form": 0,
        "evidence": 1,
        "evidence_triples": 1,
    }
    text = CliRunner().invoke(app, ["datasets", "check", str(path)])
    assert "TRIPLES" in text.stdout
