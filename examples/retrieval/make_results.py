"""Rebuild ``examples/retrieval/results/``: retrieval against gold evidence, by hand.

    python examples/retrieval/make_results.py

Three setups answer the four questions of ``datasets.json`` (see docs/retrieval.md, where
the expected ``retrieval_quality`` blocks are worked out):

- ``rust-kag``: a KAG setup in the Rust tool's format, the retrieved subgraph as
  ``FormalTriplet`` text only (no seeds);
- ``kag-graph``: a KAG setup as kag writes it, with the structured subgraph (seeds and
  their scores, nodes, relationships) beside the text;
- ``native``: no retrieval.

Deterministic: rerunning rewrites the same bytes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from kag.results import (  # noqa: E402
    DatabaseStats,
    ErrorResult,
    OkResult,
    OkStats,
    Result,
    Retrieval,
    Timing,
    result_path,
    write_result,
)
from kag.retrieval.subgraph import Node, Relationship, Subgraph, retrieved_graph  # noqa: E402
from kag.retrieval.translate import FormalTriplet  # noqa: E402

NAMES = {
    "1": "Scurvy",
    "2": "Vitamin C deficiency",
    "3": "Vitamin C",
    "4": "Rickets",
    "5": "Vitamin D deficiency",
    "6": "Vitamin D",
    "7": "Iron deficiency anemia",
    "8": "Iron",
    "9": "Goitre",
    "10": "Iodine deficiency",
}
LABELS = {"1": "Disease", "4": "Disease", "7": "Disease", "9": "Disease"}


def subgraph(
    seeds: list[tuple[str, float]], rels: list[tuple[str, str, str]], extra: tuple[str, ...] = ()
) -> Subgraph:
    keys = {k for s, _, e in rels for k in (s, e)} | {k for k, _ in seeds} | set(extra)
    return Subgraph(
        seeds=tuple(k for k, _ in seeds),
        nodes={k: Node(k, frozenset({LABELS.get(k, "Concept")}), {"name": NAMES[k]}) for k in keys},
        relationships=tuple(Relationship(f"r{i}", t, s, e) for i, (s, t, e) in enumerate(rels)),
        seed_scores=tuple(score for _, score in seeds),
    )


# setup -> question -> (answer, retrieved subgraph) or an error message.
RUNS: dict[str, dict[str, tuple[str, Subgraph | None] | str]] = {
    "rust-kag": {
        "scurvy": ("A", subgraph([], [("1", "CAUSED_BY", "2"), ("4", "CAUSED_BY", "5")])),
        "rickets": ("A", subgraph([], [("4", "CAUSED_BY", "5"), ("5", "DEFICIENCY_OF", "6")])),
        "anemia": ("A", subgraph([], [("7", "CAUSED_BY", "8")])),
        "goitre": ("B", subgraph([], [("9", "CAUSED_BY", "10")])),
    },
    "kag-graph": {
        "scurvy": (
            "A",
            subgraph(
                [("1", 0.91), ("4", 0.62)],
                [("1", "CAUSED_BY", "2"), ("2", "DEFICIENCY_OF", "3"), ("4", "CAUSED_BY", "5")],
            ),
        ),
        "rickets": ("A", subgraph([("5", 0.84), ("6", 0.8)], [("5", "DEFICIENCY_OF", "6")])),
        "anemia": "Failed during the knowledge retrieval phase (KAG) on database 'vitamins': connection refused",
        "goitre": ("B", subgraph([("9", 0.88)], [("9", "CAUSED_BY", "10")])),
    },
    "native": {"scurvy": ("A", None), "rickets": ("B", None), "anemia": ("B", None), "goitre": ("B", None)},
}


def build(setup: str, run: tuple[str, Subgraph | None] | str) -> Result:
    if isinstance(run, str):
        return ErrorResult(run)
    answer, graph = run
    retrieval = None
    if graph is not None:
        rendered = FormalTriplet().render(graph)
        retrieval = Retrieval(
            result=rendered.text,
            document="question",
            database=DatabaseStats(
                "neo4j", rendered.vertices, rendered.relationships, rendered.properties, Timing(0, 5_000_000)
            ),
            time=Timing(0, 20_000_000),
            # The Rust tool's files hold the text only.
            graph=retrieved_graph(graph) if setup == "kag-graph" else None,
        )
    return OkResult(answer, OkStats(prompt="question", retrieval=retrieval, time=Timing(1, 0)))


def main() -> None:
    root = HERE / "results"
    shutil.rmtree(root, ignore_errors=True)
    for setup, questions in RUNS.items():
        for question, run in questions.items():
            path = result_path(root, "vitamins", question, "", setup)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_result(path, build(setup, run))


if __name__ == "__main__":
    main()
