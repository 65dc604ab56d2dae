"""`kag stats` with retrieval evidence: the datasets file's ``evidence`` names, the
``evidence`` blocks (values computed by hand), and unchanged reports without evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.errors import InputError
from kag.results import ErrorResult, OkResult, Result, Timing, result_path, write_result
from tests.result_helpers import neo4j_retrieval, ok_result

runner = CliRunner()

MCQ = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}

# (dataset, question): evidence names, the kag setup's retrieval text and answer (None: error).
CASES: dict[tuple[str, str], tuple[list[str] | None, str, str | None]] = {
    ("d", "q1"): (["Vitamin C", "Scurvy"], '(n)-[treats]->("vitamin c")', "A"),  # 1 of 2 found; right
    ("d", "q2"): (["Scurvy"], "Scurvy is a disease.", "B"),  # found; wrong
    ("d", "q3"): (["Vitamin C"], "vitamin cd and more", "A"),  # not a whole word: missed; right
    ("d", "q4"): (None, "Iron", "A"),  # no evidence names: not counted
    ("d", "q5"): (["Iron"], "Iron", None),  # an error file: not counted
    ("e", "r1"): (["IRON"], "iron supplements", "B"),  # found (case folded); wrong
}


def datasets_file(tmp_path: Path, with_evidence: bool = True) -> Path:
    doc: dict[str, dict[str, dict]] = {}
    for (dataset, question), (names, _, _) in CASES.items():
        entry: dict[str, object] = {"input": f"question {question}", "output": MCQ}
        if names is not None and with_evidence:
            entry["evidence"] = names
        doc.setdefault(dataset, {})[question] = entry
    path = tmp_path / ("datasets.json" if with_evidence else "plain.json")
    path.write_text(json.dumps(doc))
    return path


def kag_result(text: str, answer: str | None, vertices: int = 5) -> Result:
    if answer is None:
        return ErrorResult("Failed to generate a response")
    return ok_result(answer, prompt="p", retrieval=neo4j_retrieval(text, vertices, 1, 1, time=Timing(0, 5)))


def tree(root: Path) -> Path:
    for (dataset, question), (_, text, answer) in CASES.items():
        vertices = 0 if question == "r1" else 5  # r1's retrieval came back empty
        write_result(result_path(root, dataset, question, "", "kag"), kag_result(text, answer, vertices))
        write_result(result_path(root, dataset, question, "", "native"), OkResult("A"))
    return root


def stats(datasets: Path, root: Path, fmt: str = "json"):
    out = runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(root), "--format", fmt])
    assert out.exit_code == 0, out.stderr
    # Every tree here is small: the small-sample warning is the only line allowed.
    assert [line for line in out.stderr.splitlines() if "few graded files" not in line] == []
    return out.stdout


def test_evidence_blocks_by_hand(tmp_path: Path) -> None:
    doc = {s["setup"]: s for s in json.loads(stats(datasets_file(tmp_path), tree(tmp_path / "r")))["setups"]}
    kag = doc["kag"]
    # d: shares 1/2, 1, 0 -> recall 1/2; hits q1 q2 -> 2/3; right among hits: q1 -> 1/2;
    # among misses: q3 -> 1.
    assert kag["per_dataset"]["d"]["evidence"] == {
        "questions": 3,
        "recall": 0.5,
        "hit_rate": 2 / 3,
        "accuracy_when_hit": 0.5,
        "accuracy_when_missed": 1.0,
    }
    # e: r1 found and wrong; no miss.
    assert kag["per_dataset"]["e"]["evidence"] == {
        "questions": 1,
        "recall": 1.0,
        "hit_rate": 1.0,
        "accuracy_when_hit": 0.0,
        "accuracy_when_missed": None,
    }
    # Overall: shares 1/2, 1, 0, 1 -> 5/8; hits 3 of 4; right among hits 1 of 3; misses 1 of 1.
    assert kag["overall"]["evidence"] == {
        "questions": 4,
        "recall": 0.625,
        "hit_rate": 0.75,
        "accuracy_when_hit": 1 / 3,
        "accuracy_when_missed": 1.0,
    }
    # A setup that did not retrieve has no record: the key is there, null.
    assert doc["native"]["overall"]["evidence"] is None
    assert doc["native"]["per_dataset"]["d"]["evidence"] is None


def test_without_evidence_names_the_reports_are_unchanged(tmp_path: Path) -> None:
    root = tree(tmp_path / "r")
    with_names, plain = datasets_file(tmp_path), datasets_file(tmp_path, with_evidence=False)
    assert stats(with_names, root, "text") == stats(plain, root, "text")
    # Markdown adds the retrieval-quality columns, and nothing else.
    md, plain_md = stats(with_names, root, "markdown"), stats(plain, root, "markdown")
    assert "REACHED%" not in plain_md
    header = next(line for line in md.splitlines() if line.startswith("| Setup"))
    assert header.endswith("| REACHED% | E-RECALL% | T-RECALL% |")
    cut = [line.rsplit("|", 4)[0] + "|" if line.startswith("|") else line for line in md.splitlines()]
    assert cut == plain_md.splitlines()
    doc, plain_doc = json.loads(stats(with_names, root)), json.loads(stats(plain, root))
    assert "evidence" not in json.dumps(plain_doc)
    for s in doc["setups"]:
        for block in (s["overall"], *s["per_dataset"].values()):
            del block["evidence"]
            del block["retrieval_quality"]
    assert doc == plain_doc


def test_evidence_names_are_parsed(tmp_path: Path) -> None:
    ds = load_datasets(datasets_file(tmp_path))
    assert ds.get("d", "q1").evidence == ("Vitamin C", "Scurvy")
    assert ds.get("d", "q4").evidence == ()
    assert ds.has_evidence
    assert not load_datasets(datasets_file(tmp_path, with_evidence=False)).has_evidence


# An object is the form with entities and triples (tests/test_datasets_gold_evidence.py).
@pytest.mark.parametrize("bad", ["Scurvy", [""], ["  "], [1]])
def test_bad_evidence_names_are_refused_naming_the_entry(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps({"d": {"q1": {"input": "x", "output": MCQ, "evidence": bad}}}))
    with pytest.raises(InputError, match=r"d/q1: 'evidence' must be an array of non-empty strings"):
        load_datasets(path)
    out = runner.invoke(app, ["stats", "-d", str(path), "-r", str(tmp_path)])
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.startswith("kag: error: ") and "'evidence'" in out.stderr


def test_impact_splits_its_buckets_by_evidence_hit(tmp_path: Path) -> None:
    root = tree(tmp_path / "r")
    args = ["stats", "impact", "kag", "--native", "native", "-r", str(root), "--format"]
    out = runner.invoke(app, [*args, "json", "-d", str(datasets_file(tmp_path))])
    assert out.exit_code == 0, out.stderr
    (impact,) = json.loads(out.stdout)["impacts"]
    rows = {r["label"]: r for r in impact["evidence_buckets"]}
    assert list(rows) == ["empty · hit", "1-10 · hit", "1-10 · missed"]
    # The native setup answers A (right) everywhere. r1: KAG wrong; q1 right, q2 wrong; q3 right.
    counts = {k: (r["n"], r["correct"], r["native_correct"], r["helped"], r["hurt"], r["no_change"])
              for k, r in rows.items()}  # fmt: skip
    assert counts == {
        "empty · hit": (1, 0, 1, 0, 1, 0),
        "1-10 · hit": (2, 1, 2, 0, 1, 1),
        "1-10 · missed": (1, 1, 1, 0, 0, 1),
    }
    text = runner.invoke(app, [*args, "text", "-d", str(datasets_file(tmp_path))])
    assert text.exit_code == 0 and "VERTICES · EVIDENCE" in text.stdout and "1-10 · missed" in text.stdout
    # Without evidence names the report is the one of before.
    plain = datasets_file(tmp_path, with_evidence=False)
    before = runner.invoke(app, [*args, "json", "-d", str(plain)])
    assert before.exit_code == 0 and "evidence" not in before.stdout
    del impact["evidence_buckets"]
    # The split by reached gold evidence (entity names here) comes with evidence too.
    assert [r["label"] for r in impact.pop("reached_buckets")][:1] == ["empty · missed"]
    assert json.loads(before.stdout)["impacts"] == [impact]
    plain_text = runner.invoke(app, [*args, "text", "-d", str(plain)])
    assert "EVIDENCE" not in plain_text.stdout
