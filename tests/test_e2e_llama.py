"""End to end with a real model: llama.cpp's server (the `server` extra) serving
SmolLM2-135M-Instruct on 127.0.0.1, the examples' configuration, benchmark file and
datasets, then `kag stats` grading the tree. Slow: run by `make test-e2e` and `.ci/run`.

Temperature 0 is not bit-stable on a model's first request, so these tests check shapes and
counts, never the model's words.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.results import OkResult, read_result
from tests.bench_helpers import tree_files
from tests.llama_server import llama_server_fixture

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

llama = llama_server_fixture()


@pytest.fixture
def project(tmp_path: Path, llama: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(EXAMPLES / "benchmark", tmp_path / "benchmark")
    shutil.copy(EXAMPLES / "dataset" / "datasets.json", tmp_path / "datasets.json")
    monkeypatch.setenv("KAG_LLAMA_URL", f"{llama}/v1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_benchmark_two_setups_then_stats_grades_the_tree(project: Path) -> None:
    runner = CliRunner()
    argv = [
        "benchmark",
        "-c",
        "benchmark/config.toml",
        "-b",
        "benchmark/benchmark.toml",
        "-d",
        "datasets.json",
        "-o",
        "results",
        "-p",
        "2",
        "--timeout",
        "120",
        "--fail-on-error",
    ]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.stderr
    datasets = load_datasets(project / "datasets.json")
    expected = {
        (q.dataset, q.id, setup)
        for q in datasets.iter_questions()
        for setup in ("smollm2-135m-native", "smollm2-135m-terse")
        if setup == "smollm2-135m-native" or q.dataset == "mcq-form"
    }
    found = {(p.parent.parent.name, p.parent.name, p.stem) for p in tree_files(project / "results", "*.json")}
    assert found == expected and len(found) == 10
    for dataset, question, setup in found:
        file = read_result(project / "results" / dataset / question / f"{setup}.json")
        assert isinstance(file, OkResult), file
        stats = file.stats
        assert stats.usage is not None and (stats.usage.prompt_tokens or 0) > 0
        assert stats.usage.completion_tokens is not None and 0 < stats.usage.completion_tokens <= 8
        assert stats.attempts == 1 and stats.fingerprint is not None
        assert stats.time is not None and stats.generation_time is not None
        assert stats.prompt is not None and datasets.get(dataset, question).input in stats.prompt  # type: ignore[union-attr]
        assert stats.config is not None and stats.config.provider == "local"

    # A second run with --continue has nothing left to do.
    again = runner.invoke(app, [*argv, "--continue"])
    assert again.exit_code == 0 and "0 task(s) run" in again.stderr and "10 skipped" in again.stderr

    graded = runner.invoke(app, ["stats", "-d", "datasets.json", "-r", "results", "--format", "json"])
    assert graded.exit_code == 0, graded.stderr
    report = orjson.loads(graded.stdout)
    rows = {row["setup"]: row for row in report["setups"]}
    assert set(rows) == {"smollm2-135m-native", "smollm2-135m-terse"}
    # Scorable: the MCQ questions with an answer (mcq-form 0 and 1, both pubmedqa ones).
    native, terse = rows["smollm2-135m-native"]["overall"], rows["smollm2-135m-terse"]["overall"]
    assert native["total"] == 4 and terse["total"] == 2
    for block in (native, terse):
        assert block["errors"] == 0
        assert block["correct"] + block["incorrect"] == block["total"]
        assert block["avg_generation_secs"] is not None and block["avg_generation_secs"] > 0


def test_generation_against_the_real_model(project: Path) -> None:
    runner = CliRunner()
    base = [
        "generation",
        "-c",
        "benchmark/config.toml",
        "-p",
        "local",
        "-m",
        "smollm2-135m",
        "-t",
        "0",
        "-n",
        "16",
    ]
    text = runner.invoke(app, [*base, "What is the capital of France?"])
    assert text.exit_code == 0, text.stderr
    assert text.stdout.strip() != ""
    as_json = runner.invoke(
        app, [*base, "-s", "benchmark/prompts/mcq.md", "--format", "json", "Name a primary colour."]
    )
    assert as_json.exit_code == 0, as_json.stderr
    data = orjson.loads(as_json.stdout)["ok"]
    assert data["stats"]["prompt"].startswith("Answer the following question.\n\nName a primary colour.")
    assert data["stats"]["usage"]["completion_tokens"] <= 16
    assert data["stats"]["config"] == {
        "augmented_generation": None,
        "provider": "local",
        "model": "smollm2-135m",
        "temperature": 0.0,
        "tokens": 16,
    }


def test_init_then_benchmark_against_the_real_model(
    tmp_path: Path, llama: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    folder = tmp_path / "first-run"
    init = runner.invoke(app, ["init", str(folder), "--provider", "llama-cpp", "--url", f"{llama}/v1"])
    assert init.exit_code == 0, init.output
    monkeypatch.chdir(folder)
    run = runner.invoke(
        app,
        [
            "benchmark",
            "-d",
            "datasets.json",
            "-b",
            "benchmark.toml",
            "-o",
            "results",
            "--timeout",
            "120",
            "--fail-on-error",
        ],
    )
    assert run.exit_code == 0, run.output
    files = sorted((folder / "results" / "starter").glob("*/local-native.json"))
    assert len(files) == 5
    assert all(isinstance(read_result(f), OkResult) for f in files)
    graded = runner.invoke(
        app, ["stats", "-d", "datasets.json", "-r", "results", "--extract", "letter", "--format", "json"]
    )
    assert graded.exit_code == 0, graded.output
    overall = orjson.loads(graded.stdout)["setups"][0]["overall"]
    assert overall["total"] == 5
    assert (
        overall["extracted"]["correct"]
        + overall["extracted"]["incorrect"]
        + overall["extracted"]["not_extracted"]
        == 5
    )
