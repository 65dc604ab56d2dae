"""Speed of KAG retrieval on the embedded Ladybug backend, and of `kag graph import`.

    python benchmarks/bench_ladybug.py [--nodes 50000] [--relationships 150000] [--queries 30] [--rebuild]

Anchor: the issue's target, a median retrieval of at most 150 ms at 2 hops on a
50,000-node / 150,000-relationship graph; the script prints median / 150 ms.

The graph is generated (seeded, so every run sees the same one): nodes named
``concept <i> <word> <word>`` with one or two of four labels and an integer property;
relationships between uniformly random nodes (average degree 6), five types, an integer
property on each. It is written as Neo4j-admin CSV files under ``.bench/ladybug/`` and
imported with `kag.retrieval.importer.import_graph` exactly as ``kag graph import``
does, except for the embedding model: a fixed random projection of hashed words (384
dimensions, about 40,000 names/s) stands in for MiniLM so that the database's own work
is what is timed; the bundled MiniLM's throughput is measured on a 1,000-name sample and
printed, so its share of a real import can be computed.

A retrieval is what one KAG task does after its question is embedded: exact top-5 over
all node embeddings (numpy), expansion by hops, the reached nodes, the relationships
among them, and the FormalTriplet rendering. Query vectors are random unit vectors. The
first retrieval also loads the embedding matrix (once per run) and is reported apart.
The alternative expansion query (one variable-length pattern, ``[*1..N]``) is timed on
the same seeds for comparison (and checked to reach the same nodes). The machine's load
average is printed: the figures are wall-clock times on whatever else is running.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kag.retrieval.importer import import_graph
from kag.retrieval.ladybug_backend import LadybugGraph, LadybugSettings
from kag.retrieval.translate import FormalTriplet

TARGET_MS = 150.0
DIMENSION = 384
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kinase",
    "receptor",
    "syndrome",
    "protein",
    "acid",
    "cell",
    "virus",
    "enzyme",
    "tissue",
    "factor",
    "gene",
    "therapy",
    "muscle",
    "nerve",
    "blood",
    "bone",
]
LABELS = ["Concept", "Concept;Drug", "Concept;Disease", "Gene"]
TYPES = ["RELATED_TO", "TREATS", "CAUSES", "PART_OF", "INTERACTS_WITH"]


class ProjectionEmbedder:
    """Hashed words through a fixed random projection: deterministic and fast."""

    name = "bench:projection-384"

    def __init__(self) -> None:
        self.table = np.random.default_rng(7).normal(size=(4096, DIMENSION)).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSION), np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i] += self.table[int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little") % 4096]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


def generate(folder: Path, nodes: int, relationships: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(42)
    folder.mkdir(parents=True, exist_ok=True)
    node_file, rel_file = folder / "nodes.csv", folder / "relationships.csv"
    with open(node_file, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id:ID", ":LABEL", "name", "rank:int"])
        for i in range(nodes):
            w1, w2 = rng.integers(0, len(WORDS), 2)
            writer.writerow(
                [f"c{i}", LABELS[i % len(LABELS)], f"concept {i} {WORDS[w1]} {WORDS[w2]}", i % 1000]
            )
    starts = rng.integers(0, nodes, relationships)
    ends = rng.integers(0, nodes, relationships)
    types = rng.integers(0, len(TYPES), relationships)
    with open(rel_file, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([":START_ID", ":END_ID", ":TYPE", "weight:int"])
        for s, e, t in zip(starts, ends, types, strict=True):
            writer.writerow([f"c{s}", f"c{e}", TYPES[t], int(s + e) % 100])
    return node_file, rel_file


def minilm_rate(names: list[str]) -> float | None:
    try:
        from kag.embedding import load_embedder

        embedder = load_embedder(None)
        embedder.embed(names[:32])  # warm-up
        began = time.perf_counter()
        embedder.embed(names)
        return len(names) / (time.perf_counter() - began)
    except Exception as exc:  # noqa: BLE001 - the bundled model is optional for this measurement
        print(f"  (MiniLM throughput not measured: {exc})")
        return None


def expansion_times(graph: LadybugGraph, seeds: list[str], hops: int) -> tuple[float, float]:
    """(kag's hop-by-hop expansion, one variable-length query) for the same seeds."""
    began = time.perf_counter()
    ours = graph._expand(seeds, hops)
    middle = time.perf_counter()
    rows = graph._conn.execute(
        f"MATCH (a:Node)-[*1..{hops}]-(b:Node) WHERE a.id IN $ids RETURN DISTINCT b.id", {"ids": seeds}
    ).get_all()
    end = time.perf_counter()
    assert {graph._key_of[o] for o in ours} == {r[0] for r in rows} | set(seeds)
    return middle - began, end - middle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--relationships", type=int, default=150_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=REPO / ".bench" / "ladybug")
    parser.add_argument(
        "--rebuild", action="store_true", help="regenerate and re-import even if the database exists"
    )
    options = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPU(s)")
    folder = options.dir / f"{options.nodes}-{options.relationships}"
    db = folder / "graph.lbug"
    print(f"graph: {options.nodes:,} nodes, {options.relationships:,} relationships ({folder})")
    if options.rebuild or not db.exists():
        began = time.perf_counter()
        node_file, rel_file = generate(folder, options.nodes, options.relationships)
        print(f"  CSV generated in {time.perf_counter() - began:.1f} s")
        stamps: dict[str, float] = {}

        def progress(stage: str, done: int, total: int) -> None:
            stamps[stage] = time.perf_counter()

        report = import_graph(
            db, [str(node_file)], [str(rel_file)], ProjectionEmbedder(), replace=True, progress=progress
        )
        total = report.read_seconds + report.embed_seconds + report.write_seconds
        print(
            f"import: {total:.1f} s = read+check {report.read_seconds:.1f} s + embed {report.embed_seconds:.1f} s"
            f" (projection stand-in) + write {report.write_seconds:.1f} s"
        )
        node_seconds = stamps["nodes"] - stamps["embeddings"]
        rel_seconds = stamps["relationships"] - stamps["nodes"]
        print(
            f"  write: nodes {node_seconds:.1f} s ({report.nodes / node_seconds:,.0f}/s, batched CREATE),"
            f" relationships {rel_seconds:.1f} s ({report.relationships / rel_seconds:,.0f}/s, COPY FROM CSV)"
        )
        names = [f"concept {i} {WORDS[i % 20]} {WORDS[(i * 7) % 20]}" for i in range(1000)]
        rate = minilm_rate(names)
        if rate:
            print(
                f"  bundled MiniLM: {rate:,.0f} names/s here, so embedding {report.nodes:,} names with it would"
                f" add about {report.nodes / rate:.0f} s"
            )
    else:
        print("  (database reused; --rebuild to time the import)")

    rng = np.random.default_rng(1)
    graph = LadybugGraph(LadybugSettings("bench", str(db)))
    translation = FormalTriplet()
    try:
        began = time.perf_counter()
        first = rng.normal(size=DIMENSION)
        graph.fetch_sync(first.tolist(), options.top_k, 1, "embedding")
        print(
            f"first retrieval (opens the database, loads {options.nodes:,} embeddings): {time.perf_counter() - began:.2f} s"
        )
        medians = {}
        for hops in (1, 2):
            times, sizes, variable = [], [], []
            for i in range(options.queries + 3):
                vector = rng.normal(size=DIMENSION)
                began = time.perf_counter()
                subgraph = graph.fetch_sync(vector.tolist(), options.top_k, hops, "embedding")
                rendered = translation.render(subgraph)
                elapsed = time.perf_counter() - began
                if i >= 3:  # warm-up
                    times.append(elapsed)
                    sizes.append((len(subgraph.nodes), rendered.relationships, len(rendered.text)))
                    if i < 3 + min(10, options.queries):
                        variable.append(expansion_times(graph, list(subgraph.seeds), hops))
            median = statistics.median(times) * 1000
            medians[hops] = median
            p90 = sorted(times)[int(0.9 * (len(times) - 1))] * 1000
            nodes = statistics.mean(s[0] for s in sizes)
            rels = statistics.mean(s[1] for s in sizes)
            chars = statistics.mean(s[2] for s in sizes)
            print(
                f"{hops} hop(s), top-{options.top_k}: median {median:.1f} ms, p90 {p90:.1f} ms over {len(times)} retrievals;"
                f" {nodes:.0f} nodes, {rels:.0f} relationships, {chars:,.0f} characters rendered on average"
            )
            print(
                f"  expansion alone: hop by hop (kag) median {statistics.median(v[0] for v in variable) * 1000:.1f} ms,"
                f" one [*1..{hops}] query {statistics.median(v[1] for v in variable) * 1000:.1f} ms (same nodes)"
            )
    finally:
        graph.close()
    ratio = medians[2] / TARGET_MS
    print(
        f"anchor: target {TARGET_MS:.0f} ms at 2 hops; median / target = {ratio:.2f} ({'met' if ratio <= 1 else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
