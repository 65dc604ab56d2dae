"""`kag benchmark` with Neo4j retrieval when the server stops in the middle of the run
(a real Neo4j 5.26 of its own, tests/neo4j_server.py; the model is the loopback
FakeServer): the tasks after the stop are `error` results naming the database and what to
do, and `--retry-errors` (a `--continue` that also runs error files) heals them once a server
is back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kag.results import ErrorResult, OkResult, read_result
from kag.retrieval.base import RETRIEVAL_FAILED
from tests.bench_helpers import bench_args, invoke, make_project, setup_toml
from tests.fakeserver import FakeServer
from tests.graph_helpers import einstein_files
from tests.neo4j_server import Neo4jServer, skip_or_fail, start, unavailable

pytestmark = pytest.mark.neo4j
pytest.importorskip("neo4j")

CONFIG = """
[providers.oa]
type = "OpenAI"
url = "{{ env('FAKE_URL') }}/v1"
key = ""

[providers.minilm]
type = "FastEmbed"

[databases.kg]
type = "Neo4j"
uri = "{{ env('KAG_TEST_NEO4J_URI') }}"
password = "{{ env('KAG_TEST_NEO4J_PASSWORD') }}"

[retrievers.near]
type = "Embedder"
provider = "minilm"
top_k = 2

[retrievers.near.extra.kg]
index = "embedding"
neighborhood = 1
"""


@pytest.fixture
def own_server() -> Iterator[list[Neo4jServer]]:
    """Servers of this test alone (it stops one): started by the test, stopped at its end."""
    reason = unavailable()
    if reason is not None:
        skip_or_fail(reason)
    servers: list[Neo4jServer] = []
    yield servers
    for server in servers:
        server.stop()


def _serve(servers: list[Neo4jServer], root: Path, monkeypatch: pytest.MonkeyPatch) -> Neo4jServer:
    """A new 5.26 server holding the Einstein graph (imported with `kag graph import`)."""
    server = start("5.26")
    servers.append(server)
    monkeypatch.setenv("KAG_TEST_NEO4J_URI", server.uri)
    monkeypatch.setenv("KAG_TEST_NEO4J_PASSWORD", server.password)
    nodes, rels = einstein_files(root)
    imported = invoke(
        ["graph", "import", "-c", str(root / "config.toml"), "--database", "kg", "--nodes", str(nodes),
         "--relationships", str(rels)]
    )  # fmt: skip
    assert imported.exit_code == 0, imported.stderr
    return server


def test_a_server_stopped_mid_run_gives_error_results_that_retry_errors_heals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_server: list[Neo4jServer]
) -> None:
    root = make_project(tmp_path / "project", n=3)
    (root / "config.toml").write_text(CONFIG)
    (root / "bench.toml").write_text(
        setup_toml("kag", "oa", "m1").replace(
            "system_prompt", 'augmented_generation = { retriever = "near", database = "kg" }\nsystem_prompt'
        )
    )
    with FakeServer(reply="a") as model:
        monkeypatch.setenv("FAKE_URL", model.url)
        first = _serve(own_server, root, monkeypatch)
        respond = model._handler.respond
        stopped: list[str] = []

        async def stop_on_first_chat(method: str, target: str, *args: Any) -> Any:
            # The first model request comes after the first task's retrieval: stop Neo4j
            # there, so the later tasks' retrievals meet a stopped server.
            if "chat" in target and not stopped:
                await asyncio.to_thread(first.stop)
                stopped.append(target)
            return await respond(method, target, *args)

        model._handler.respond = stop_on_first_chat  # type: ignore[method-assign]
        run = invoke(bench_args(root, "-p", "1"))
        assert stopped and run.exit_code == 0, run.stderr
        results = {p.parent.name: read_result(p) for p in sorted((root / "out" / "mcq").glob("*/kag.json"))}
        ok = [q for q, r in results.items() if isinstance(r, OkResult)]
        failed = {q: r for q, r in results.items() if isinstance(r, ErrorResult)}
        assert len(results) == 3 and len(ok) == 1 and len(failed) == 2
        for result in failed.values():
            message = result.error
            assert message.startswith(f"{RETRIEVAL_FAILED} 'kg': Neo4j at {first.uri} (database 'neo4j'")
            assert "is the server running and reachable at this URI?" in message
            assert first.password not in message and "\n" not in message.strip()

        _serve(own_server, root, monkeypatch)  # back, at another port
        healed = invoke(bench_args(root, "-p", "1", "--retry-errors"))
        assert healed.exit_code == 0, healed.stderr
    after = {p.parent.name: read_result(p) for p in sorted((root / "out" / "mcq").glob("*/kag.json"))}
    assert all(isinstance(r, OkResult) for r in after.values()), after
    assert all(r.stats.retrieval is not None and r.stats.retrieval.result for r in after.values())  # type: ignore[union-attr]
