"""`kag stats judge` end to end with a real model as the judge: llama.cpp's server serving
SmolLM2-135M-Instruct on 127.0.0.1 (see tests/llama_server.py). Slow: `make test-e2e`.

A 135M model is a poor judge and not bit-stable on its first request: the test checks the
shape of the report and the cache, never the verdicts themselves."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.judge import CACHE_FOLDER
from tests.judge_helpers import make_tree
from tests.llama_server import llama_server_fixture

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent

llama = llama_server_fixture()


def test_the_real_model_judges_every_answer_once(
    tmp_path: Path, llama: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(tmp_path / "results")
    shutil.copy(REPO / "examples" / "benchmark" / "config.toml", tmp_path / "config.toml")
    monkeypatch.setenv("KAG_LLAMA_URL", f"{llama}/v1")
    monkeypatch.chdir(tmp_path)
    argv = ["stats", "judge", "-c", "config.toml", "-p", "local", "-m", "smollm2-135m", "-d", "datasets.json",
            "-r", "results", "--mcq", "-j", "2", "--timeout", "120", "--format", "json"]  # fmt: skip
    first = CliRunner().invoke(app, argv)
    assert first.exit_code == 0, first.stderr
    report = orjson.loads(first.stdout)
    assert report["judge"]["provider"] == "local" and report["judge"]["model"] == "smollm2-135m"
    assert len(report["judge"]["prompt_sha256"]) == 64
    setups = {row["setup"]: row for row in report["setups"]}
    # s1: three open answers and one MCQ answer; s2: two open answers (one error file) and one MCQ.
    assert {name: row["judged"] for name, row in setups.items()} == {"s1": 4, "s2": 3}
    for row in setups.values():
        assert row["correct"] + row["incorrect"] + row["unusable"] == row["judged"]
        usable = row["correct"] + row["incorrect"]
        # An unusable verdict is no verdict: left out of the accuracy.
        assert row["accuracy"] == (pytest.approx(row["correct"] / usable) if usable else None)
        agreement = row["agreement_with_exact_match"]
        assert (agreement is None) == (usable == 0)
        assert agreement is None or 0.0 <= agreement <= 1.0
    assert "7 request(s) sent, 0 failed" in first.stderr
    cached = [p for p in (tmp_path / "results" / CACHE_FOLDER).rglob("*") if p.is_file()]
    assert len(cached) == 7 and all(p.suffix == ".verdict" for p in cached)

    again = CliRunner().invoke(app, argv)
    assert again.exit_code == 0, again.stderr
    assert "7 verdict(s) from the cache, 0 request(s) sent" in again.stderr
    assert again.stdout == first.stdout
