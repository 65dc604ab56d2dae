"""End to end on examples/graph with a real model: `kag graph import` builds the embedded
database (bundled MiniLM), `kag benchmark` runs a native and two KAG setups against
SmolLM2-135M on llama.cpp's server (127.0.0.1), and `kag stats` shows the retrieval
columns. Slow: run by `make test-e2e` and `.ci/run`. Shapes and counts only, never the
model's words (temperature 0 is not bit-stable on a first request)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.results import OkResult, read_result
from kag.results.graph_text import graph_from_formal_text
from tests.llama_server import llama_server_fixture

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "graph"
SETUPS = ("smollm2-native", "smollm2-kag-formal", "smollm2-kag-textual")

llama = llama_server_fixture()


@pytest.fixture
def project(tmp_path: Path, llama: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("ladybug")
    shutil.copytree(EXAMPLE, tmp_path / "graph", ignore=shutil.ignore_patterns("*.lbug", "*.wal", "results"))
    monkeypatch.setenv("KAG_LLAMA_URL", f"{llama}/v1")
    monkeypatch.delenv("KAG_GRAPH_DB", raising=False)
    monkeypatch.chdir(tmp_path / "graph")
    return tmp_path / "graph"


def test_import_then_benchmark_then_stats(project: Path) -> None:
    runner = CliRunner()
    imported = runner.invoke(
        app,
        [
            "graph",
            "import",
            "-c",
            "config.toml",
            "--database",
            "medgraph",
            "--nodes",
            "nodes.csv",
            "--nodes",
            "drugs.csv",
            "--relationships",
            "relationships.csv",
        ],
    )
    assert imported.exit_code == 0, imported.stderr
    assert "nodes          541 (541 embedded)" in imported.stdout
    assert "relationships  835 (12 type(s))" in imported.stdout
    assert (project / "medgraph.lbug").is_file()

    run = runner.invoke(
        app,
        [
            "benchmark",
            "-c",
            "config.toml",
            "-b",
            "benchmark.toml",
            "-d",
            "datasets.json",
            "-o",
            "results",
            "-p",
            "2",
            "--timeout",
            "120",
            "--fail-on-error",
        ],
    )
    assert run.exit_code == 0, run.stderr
    datasets = load_datasets(project / "datasets.json")
    questions = datasets.datasets["medgraph"]
    for question in questions:
        for setup in SETUPS:
            result = read_result(project / "results" / "medgraph" / question / f"{setup}.json")
            assert isinstance(result, OkResult), (question, setup, result)
            retrieval = result.stats.retrieval
            if setup == "smollm2-native":
                assert retrieval is None
                continue
            assert retrieval is not None and retrieval.database is not None
            assert retrieval.database.backend == "ladybug"
            assert retrieval.database.relationships and retrieval.database.relationships > 0
            assert retrieval.database.vertices and retrieval.database.vertices > 0
            assert retrieval.vector is not None and len(retrieval.vector) == 384
            assert result.stats.prompt is not None and retrieval.result in result.stats.prompt
            # The retrieved subgraph is recorded beside the text, the seeds first.
            graph = retrieval.graph
            assert graph is not None and graph.seeds and graph.nodes
            assert len(graph.relationships) == retrieval.database.relationships
            if setup == "smollm2-kag-formal":
                assert retrieval.result.splitlines()[0].startswith("(") and ")-[:" in retrieval.result
                # The text reads back as the graph kag recorded.
                assert graph_from_formal_text(retrieval.result).relationships == graph.relationships
            else:
                assert ")-[:" not in retrieval.result and retrieval.result.endswith(".\n")

    table = runner.invoke(app, ["stats", "-d", "datasets.json", "-r", "results"])
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    header = next(line for line in lines if "RET(s)" in line)
    for column in ("RET(s)", "VERTICE", "RELATION", "PROPERTY"):
        assert column in header
    for setup in SETUPS:
        assert any(setup in line for line in lines), setup
