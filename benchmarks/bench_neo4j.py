"""Speed of KAG retrieval on Neo4j beside LadybugDB, and of `kag graph import` into each.

    python benchmarks/bench_neo4j.py [--nodes 50000] [--relationships 150000] [--queries 30]
                                     [--versions 5.26,2026]

The graph is bench_ladybug.py's (same generator, same seed, same projection embedder
standing in for MiniLM), imported with `kag.retrieval.importer` into a new LadybugDB file
and into each Neo4j: a real server started with ``tests/neo4j/run VERSION`` (Neo4j's test
harness; Java and Maven needed), or the server ``NEO4J_URI`` names (with
``NEO4J_PASSWORD``; its database is emptied). Import times are printed per backend.

A retrieval is what one KAG task does after its question is embedded: top-5 seeds, the
expansion by 1 or 2 hops, the relationships among the reached nodes, and the
FormalTriplet rendering. Every backend (Neo4j: each query form it has) answers the same
random unit vectors, after 3 warm-up retrievals; median and p90 per backend. The seeds
of Neo4j's approximate index are compared with LadybugDB's exact ones (how many of the
top-5 agree). The machine's load average is printed: the figures are wall-clock times on
whatever else is running.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_ladybug import DIMENSION, ProjectionEmbedder, generate
from kag.retrieval.importer import import_graph
from kag.retrieval.ladybug_backend import LadybugGraph, LadybugSettings
from kag.retrieval.neo4j_backend import Neo4jGraph, Neo4jSettings
from kag.retrieval.translate import FormalTriplet
from tests.neo4j_server import Neo4jServer, start

WARM_UP = 3


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(graph: Any, vectors: list[list[float]], top_k: int, hops: int) -> tuple[list[float], list[Any]]:
    """Seconds per retrieval (fetch + rendering) after the warm-up, and the subgraphs."""
    translation = FormalTriplet()

    async def run() -> tuple[list[float], list[Any]]:
        times, subgraphs = [], []
        try:
            for i, vector in enumerate(vectors):
                began = time.perf_counter()
                subgraph = await graph.fetch(vector, top_k, hops, "embedding")
                translation.render(subgraph)
                if i >= WARM_UP:
                    times.append(time.perf_counter() - began)
                    subgraphs.append(subgraph)
        finally:
            await graph.aclose()
        return times, subgraphs

    return asyncio.run(run())


def summary(name: str, hops: int, top_k: int, times: list[float], subgraphs: list[Any]) -> str:
    median = statistics.median(times) * 1000
    p90 = sorted(times)[int(0.9 * (len(times) - 1))] * 1000
    nodes = statistics.mean(len(s.nodes) for s in subgraphs)
    rels = statistics.mean(len(s.relationships) for s in subgraphs)
    return (
        f"  {name:<22} {hops} hop(s), top-{top_k}: median {median:7.1f} ms, p90 {p90:7.1f} ms"
        f" ({len(times)} retrievals, {nodes:.0f} nodes, {rels:.0f} relationships on average)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--relationships", type=int, default=150_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--versions", default="5.26,2026", help="Neo4j versions to start (tests/neo4j/run)")
    parser.add_argument("--dir", type=Path, default=REPO / ".bench" / "neo4j")
    options = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("NEO4J_HEAP", "2g")

    print(f"load average: {load()} on {os.cpu_count()} CPU(s)")
    folder = options.dir / f"{options.nodes}-{options.relationships}"
    node_file, rel_file = generate(folder, options.nodes, options.relationships)
    print(f"graph: {options.nodes:,} nodes, {options.relationships:,} relationships ({folder})")
    embedder = ProjectionEmbedder()
    rng = np.random.default_rng(1)
    vectors = []
    for _ in range(options.queries + WARM_UP):
        vector = rng.normal(size=DIMENSION)
        vectors.append((vector / np.linalg.norm(vector)).tolist())

    db = folder / "graph.lbug"
    report = import_graph(db, [str(node_file)], [str(rel_file)], embedder, replace=True)
    print(
        f"import LadybugDB: write {report.write_seconds:.1f} s"
        f" (read+check {report.read_seconds:.1f} s, embed {report.embed_seconds:.1f} s, projection stand-in)"
    )
    ladybug: dict[int, tuple[list[float], list[Any]]] = {}
    for hops in (1, 2):
        ladybug[hops] = timed(LadybugGraph(LadybugSettings("bench", str(db))), vectors, options.top_k, hops)
        print(summary("LadybugDB", hops, options.top_k, *ladybug[hops]))

    servers: list[Neo4jServer] = []
    if os.environ.get("NEO4J_URI"):
        servers.append(
            Neo4jServer(
                "own",
                os.environ["NEO4J_URI"],
                os.environ.get("NEO4J_USER", "neo4j"),
                os.environ.get("NEO4J_PASSWORD", ""),
            )
        )
    for version in [v for v in options.versions.split(",") if v] if not servers else []:
        print(f"starting Neo4j {version} (load average {load()})")
        server = start(version)
        print(f"  started in {server.started_seconds:.1f} s: {server.uri}")
        servers.append(server)
        try:
            run_server(server, node_file, rel_file, embedder, vectors, options, ladybug)
        finally:
            server.stop()
    for server in servers if servers and servers[0].version == "own" else []:
        run_server(server, node_file, rel_file, embedder, vectors, options, ladybug)
    print(f"load average at the end: {load()}")
    return 0


def run_server(
    server: Neo4jServer,
    node_file: Path,
    rel_file: Path,
    embedder: ProjectionEmbedder,
    vectors: list[list[float]],
    options: argparse.Namespace,
    ladybug: dict[int, tuple[list[float], list[Any]]],
) -> None:
    settings = Neo4jSettings("bench", uri=server.uri, user=server.user, password=server.password)
    began = time.perf_counter()
    report = import_graph(settings, [str(node_file)], [str(rel_file)], embedder, replace=True)
    total = time.perf_counter() - began
    print(
        f"import Neo4j {server.version}: write {report.write_seconds:.1f} s (nodes, relationships, vector index"
        f" online; {total:.1f} s in all with read and embed)"
    )
    forms = ["procedure", "search"] if server.version != "5.26" else ["procedure"]
    for form in forms:
        for hops in (1, 2):
            graph = Neo4jGraph(Neo4jSettings(**{**settings.__dict__, "query": form}))
            times, subgraphs = timed(graph, vectors, options.top_k, hops)
            print(summary(f"Neo4j {server.version} {form}", hops, options.top_k, times, subgraphs))
            ids = [
                [str(s.nodes[k].properties.get("id")) if k in s.nodes else "?" for k in s.seeds]
                for s in subgraphs
            ]
            exact = [list(s.seeds) for s in ladybug[hops][1]]
            agree = sum(len(set(a) & set(b)) for a, b in zip(ids, exact, strict=True))
            print(
                f"    seeds found by both (of {options.top_k} per retrieval): {agree}/{options.top_k * len(exact)}"
            )


if __name__ == "__main__":
    sys.exit(main())
