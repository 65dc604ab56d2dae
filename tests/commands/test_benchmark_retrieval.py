"""KAG setups through the real runner and CLI (`kag graph import`, `kag benchmark`,
`kag stats`) against the loopback model server: the retrieval block of the result files,
and retrieval failures (database unusable, index missing, empty result) as `error`
results or an empty RETRIEVAL, never a crashed run."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.results import ErrorResult, OkResult, read_result
from tests.bench_helpers import bench_args, invoke, server_fixture, tree_files
from tests.conftest import REPO
from tests.fakeserver import FakeServer, fake_embedding
from tests.graph_helpers import einstein_files

pytest.importorskip("ladybug")

CONFIG = """
[providers.oa]
type = "OpenAI"
url = "{{ env('FAKE_URL') }}/v1"
key = ""

[databases.kg]
type = "Ladybug"
path = "{{ env('GRAPH_DIR') }}/kg.lbug"

[retrievers.r]
type = "Embedder"
provider = "oa"
model = "embedder-1"
top_k = 2

[retrievers.r.extra.kg]
neighborhood = NEIGHBORHOOD
index = "INDEX"
translation = { type = "FormalTriplet", property_filters = { "City" = [] } }
"""

BENCH = """
[native]
provider = "oa"
model = "chat-1"
temperature = 0.0
system_prompt = '''Q: {{ '{{' }} INPUT {{ '}}' }}'''

[kag]
provider = "oa"
model = "chat-1"
temperature = 0.0
system_prompt = '''Q: {{ '{{' }} INPUT {{ '}}' }}
Facts:
{{ '{{' }} RETRIEVAL | default('<empty>') {{ '}}' }}'''
augmented_generation = { retriever = "r", database = "kg" }
"""

QUESTIONS = {
    "kg": {
        str(i): {"input": text, "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}}
        for i, text in enumerate(["Where was Albert Einstein born?", "Who married Mileva Maric?", "Ulm"])
    }
}


server = server_fixture("a")


def project(
    root: Path,
    server: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
    neighborhood: int = 1,
    index: str = "embedding",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(
        CONFIG.replace("NEIGHBORHOOD", str(neighborhood)).replace("INDEX", index)
    )
    (root / "bench.toml").write_text(BENCH)
    (root / "datasets.json").write_bytes(orjson.dumps(QUESTIONS))
    einstein_files(root)
    monkeypatch.setenv("FAKE_URL", server.url)
    monkeypatch.setenv("GRAPH_DIR", str(root))
    server.reset()
    return root


def graph_import(root: Path) -> Any:
    return invoke(
        [
            "graph",
            "import",
            "-c",
            str(root / "config.toml"),
            "--database",
            "kg",
            "--nodes",
            str(root / "nodes.csv"),
            "--relationships",
            str(root / "rels.csv"),
            "--provider",
            "oa",
            "--model",
            "embedder-1",
        ]
    )


def benchmark(root: Path) -> Any:
    return invoke(bench_args(root))


def test_import_through_an_openai_provider_then_benchmark_then_stats(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path, server, monkeypatch)
    imported = graph_import(root)
    assert imported.exit_code == 0, imported.stderr
    assert imported.stdout.splitlines()[:4] == [
        f"database       {root / 'kg.lbug'}",
        "nodes          6 (6 embedded)",
        "relationships  6 (4 type(s))",
        "embeddings     OpenAI:embedder-1, 8 dimensions, property 'embedding'",
    ]
    embedded = [r for r in server.requests if r.path == "/v1/embeddings"]
    assert embedded and all(r.model == "embedder-1" for r in embedded)

    run = benchmark(root)
    assert run.exit_code == 0, run.stderr
    assert "6 task(s) run: 6 ok, 0 error(s)" in run.stderr
    kag = read_result(root / "out" / "kg" / "0" / "kag.json")
    native = read_result(root / "out" / "kg" / "0" / "native.json")
    assert isinstance(kag, OkResult) and isinstance(native, OkResult)
    assert native.stats.retrieval is None
    retrieval = kag.stats.retrieval
    assert retrieval is not None and retrieval.retriever == "embedder"
    assert retrieval.document == "Where was Albert Einstein born?"
    assert retrieval.vector is not None
    assert retrieval.vector == pytest.approx(fake_embedding("Where was Albert Einstein born?"), abs=1e-6)
    assert retrieval.database is not None and retrieval.database.backend == "ladybug"
    assert retrieval.database.relationships == retrieval.result.count(")-[:")
    assert retrieval.result and kag.stats.prompt is not None and retrieval.result in kag.stats.prompt

    # The raw file holds the Rust tool's retrieval layout.
    raw = orjson.loads((root / "out" / "kg" / "0" / "kag.json").read_bytes())
    stats = raw["ok"]["stats"]["retrieval"]["stats"]["embedder"]
    assert set(stats) == {"embedding", "database", "time"} and set(stats["database"]) == {"ladybug"}
    assert set(stats["database"]["ladybug"]) == {"vertices", "relationships", "properties", "time"}

    table = invoke(["stats", "-d", str(root / "datasets.json"), "-r", str(root / "out")])
    assert table.exit_code == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "RET(s)" in line)
    for column in ("RET(s)", "VERTICE", "RELATION", "PROPERTY"):
        assert column in header


def test_the_result_file_records_each_seeds_cosine_best_first(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded database scores a seed by the cosine of the question's embedding and the
    node's (the fake server embeds a node's name): the file's recorded graph keeps it."""
    root = project(tmp_path, server, monkeypatch)
    assert graph_import(root).exit_code == 0
    run = benchmark(root)
    assert run.exit_code == 0, run.stderr
    for question in ("0", "1", "2"):
        raw = orjson.loads((root / "out" / "kg" / question / "kag.json").read_bytes())
        recorded = raw["ok"]["stats"]["retrieval"]["graph"]
        names = {n["id"]: n["name"] for n in recorded["nodes"]}
        result = read_result(root / "out" / "kg" / question / "kag.json")
        assert isinstance(result, OkResult) and result.stats.retrieval is not None
        vector = result.stats.retrieval.vector
        assert vector is not None
        seeds = recorded["seeds"]
        assert len(seeds) == 2  # top_k
        for seed in seeds:
            expected = sum(a * b for a, b in zip(vector, fake_embedding(names[seed["id"]]), strict=True))
            assert seed["score"] == pytest.approx(expected, abs=1e-5), (question, seed)
        assert seeds[0]["score"] >= seeds[1]["score"]


def test_an_unusable_database_gives_error_results_and_the_run_goes_on(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path, server, monkeypatch)
    assert graph_import(root).exit_code == 0
    (root / "kg.lbug").write_bytes(b"this is no longer a database")
    run = benchmark(root)
    assert run.exit_code == 0, run.stderr
    assert "6 task(s) run: 3 ok, 3 error(s)" in run.stderr
    for question in ("0", "1", "2"):
        assert isinstance(read_result(root / "out" / "kg" / question / "native.json"), OkResult)
        failed = read_result(root / "out" / "kg" / question / "kag.json")
        assert isinstance(failed, ErrorResult)
        assert failed.error.startswith("Failed during the knowledge retrieval phase (KAG) on database 'kg': ")
        assert "not a valid Lbug database file" in failed.error
    assert "Traceback" not in run.stderr


def test_a_missing_index_gives_error_results(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path, server, monkeypatch)
    assert graph_import(root).exit_code == 0
    (root / "config.toml").write_text((root / "config.toml").read_text().replace('"embedding"', '"vectors"'))
    run = benchmark(root)
    assert run.exit_code == 0, run.stderr
    failed = read_result(root / "out" / "kg" / "0" / "kag.json")
    assert isinstance(failed, ErrorResult) and "index 'vectors' is not a node property" in failed.error


def test_an_empty_retrieval_leaves_retrieval_undefined_in_the_prompt(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path, server, monkeypatch, neighborhood=0)
    (root / "rels.csv").write_text(":START_ID,:END_ID,:TYPE\n")  # no relationship at all
    assert graph_import(root).exit_code == 0
    run = benchmark(root)
    assert run.exit_code == 0, run.stderr
    result = read_result(root / "out" / "kg" / "1" / "kag.json")
    assert isinstance(result, OkResult) and result.stats.retrieval is not None
    assert result.stats.retrieval.result == ""
    assert result.stats.prompt == "Q: Who married Mileva Maric?\nFacts:\n<empty>"


def test_a_missing_database_file_stops_before_any_request(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path, server, monkeypatch)
    run = benchmark(root)
    assert run.exit_code == 2
    assert (
        "databases.kg:" in run.stderr
        and "kg.lbug: no such database (build it with `kag graph import" in run.stderr
    )
    assert server.requests == []
    assert not (root / "out").exists() or not any(tree_files(root / "out", "*.json"))


def test_the_example_configuration_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/graph/config.toml and benchmark.toml load (the database file is faked:
    validation only checks that it exists)."""
    from kag.generation.config import load_benchmark, load_config

    example = REPO / "examples" / "graph"
    shutil.copytree(example, tmp_path / "graph", ignore=shutil.ignore_patterns("*.lbug", "results"))
    monkeypatch.chdir(tmp_path / "graph")
    (tmp_path / "graph" / "medgraph.lbug").write_bytes(b"")
    config = load_config("config.toml")
    bench = load_benchmark("benchmark.toml", config)
    assert set(bench.setups) == {"smollm2-native", "smollm2-kag-formal", "smollm2-kag-textual"}
