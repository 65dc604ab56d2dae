"""End to end on examples/graph with Neo4j and a real model: `kag graph import` fills a real
Neo4j (tests/neo4j_server.py), `kag benchmark` runs the native and the two KAG setups
against SmolLM2-135M on llama.cpp's server (127.0.0.1) with Neo4j retrieval, then
`kag stats` (the retrieval columns), `kag stats impact` and `kag view` (the subgraph
drawn) read the tree. Slow and Neo4j: run by `make test-e2e`. Shapes and counts only,
never the model's words."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.render.view import question_context
from kag.results import OkResult, read_result
from tests.llama_server import llama_server_fixture
from tests.neo4j_server import Neo4jServer, ServerPool, versions
from tests.view.helpers import open_view

pytestmark = [pytest.mark.slow, pytest.mark.neo4j]
pytest.importorskip("neo4j")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "graph"
SETUPS = ("smollm2-native", "smollm2-kag-formal", "smollm2-kag-textual")

llama = llama_server_fixture()

NEO4J_DATABASE = """[databases.medgraph]
type = "Neo4j"
uri = "{{ env('KAG_TEST_NEO4J_URI') }}"
password = "{{ env('KAG_TEST_NEO4J_PASSWORD') }}"
"""


@pytest.fixture
def neo4j_server(neo4j_pool: ServerPool) -> Neo4jServer:
    """One Neo4j is enough here (the newest; or the one NEO4J_URI names)."""
    return neo4j_pool.get(versions()[-1])


@pytest.fixture
def project(tmp_path: Path, llama: str, neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "graph", ignore=shutil.ignore_patterns("*.lbug", "*.wal", "results"))
    config = tmp_path / "graph" / "config.toml"
    text = config.read_text(encoding="utf-8")
    ladybug = re.search(r"\[databases\.medgraph\]\n(?:[^\[\n][^\n]*\n)*", text)
    assert ladybug is not None
    # The same setups on Neo4j: the database table swapped, the retrievers' tables unchanged
    # but for their declared type, and the textual retriever given its index.
    text = text.replace(ladybug.group(0), NEO4J_DATABASE + "\n").replace('type = "Ladybug"', 'type = "Neo4j"')
    text = text.replace(
        "[retrievers.minilm-textual.extra.medgraph]\n",
        '[retrievers.minilm-textual.extra.medgraph]\nindex = "embedding"\n',
    )
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("KAG_LLAMA_URL", f"{llama}/v1")
    monkeypatch.setenv("KAG_TEST_NEO4J_URI", neo4j_server.uri)
    monkeypatch.setenv("KAG_TEST_NEO4J_PASSWORD", neo4j_server.password)
    monkeypatch.chdir(tmp_path / "graph")
    return tmp_path / "graph"


def test_import_benchmark_stats_impact_and_view_on_neo4j(project: Path, neo4j_server: Neo4jServer) -> None:
    runner = CliRunner()
    imported = runner.invoke(
        app,
        ["graph", "import", "-c", "config.toml", "--database", "medgraph", "--nodes", "nodes.csv",
         "--nodes", "drugs.csv", "--relationships", "relationships.csv", "--replace"],
    )  # fmt: skip
    assert imported.exit_code == 0, imported.stderr
    assert "nodes          541 (541 embedded)" in imported.stdout

    run = runner.invoke(
        app,
        ["benchmark", "-c", "config.toml", "-b", "benchmark.toml", "-d", "datasets.json", "-o", "results",
         "-p", "2", "--timeout", "120", "--fail-on-error"],
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    questions = load_datasets(project / "datasets.json").datasets["medgraph"]
    for question in questions:
        for setup in SETUPS[1:]:
            result = read_result(project / "results" / "medgraph" / question / f"{setup}.json")
            assert isinstance(result, OkResult), (question, setup, result)
            retrieval = result.stats.retrieval
            assert retrieval is not None and retrieval.database is not None
            assert retrieval.database.backend == "neo4j"
            assert retrieval.database.relationships and retrieval.database.vertices
            assert result.stats.prompt is not None and retrieval.result in result.stats.prompt

    table = runner.invoke(app, ["stats", "-d", "datasets.json", "-r", "results", "--format", "json"])
    assert table.exit_code == 0, table.stderr
    stats = json.loads(table.stdout)
    text = runner.invoke(app, ["stats", "-d", "datasets.json", "-r", "results"])
    header = next(line for line in text.stdout.splitlines() if "RET(s)" in line)
    assert all(column in header for column in ("RET(s)", "VERTICE", "RELATION", "PROPERTY"))
    assert stats

    impact = runner.invoke(app, ["stats", "impact", "-d", "datasets.json", "-r", "results"])
    assert impact.exit_code == 0, impact.stderr
    assert "smollm2-kag-formal" in impact.stdout and "smollm2-native" in impact.stdout

    view = open_view(project / "datasets.json", project / "results", project / "index.sqlite")
    detail = view.question("medgraph", next(iter(questions)))
    assert detail is not None
    drawn = {g["setup"]: g for g in question_context(detail, static=True)["graphs"]}
    assert set(drawn) == {"smollm2-kag-formal", "smollm2-kag-textual"}
    formal = drawn["smollm2-kag-formal"]
    # The retrieved subgraph: drawn as SVG on an exported page, and handed to the server
    # page's graph library with the nodes named by the recorded graph.
    assert formal["graph"].triplets and str(formal["svg"]).count('<g class="node"') >= 2
    assert len(formal["data"]["nodes"]) >= 2 and all(n["label"] for n in formal["data"]["nodes"])
