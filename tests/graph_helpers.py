"""Shared by the graph tests: a deterministic embedder and small CSV graphs.

`TokenEmbedder` gives every word a fixed random direction (from its SHA-256) and embeds a
text as the normalized sum of its words' directions, so a question shares most of its
vector with the node whose name it repeats: tests choose their seeds by wording.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kag.retrieval.importer import import_graph


class TokenEmbedder:
    name = "test:tokens"

    def __init__(self, dimension: int = 32) -> None:
        self.dimension = dimension
        self.calls = 0

    def vector(self, text: str) -> npt.NDArray[np.float32]:
        total = np.zeros(self.dimension, dtype=np.float64)
        for word in text.lower().replace("?", " ").replace(",", " ").split():
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
            total += np.random.default_rng(seed).normal(size=self.dimension)
        norm = np.linalg.norm(total)
        return (total / norm if norm else total).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        return (
            np.vstack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)
        )

    async def embed_fn(self, model: str, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embed(texts)]


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


# Einstein's neighbourhood with numeric keys, so that Neo4j (numeric ids) and Ladybug
# (the id column) print the same keys.
EINSTEIN_NODES = [
    ("1", "Person;Scientist", "Albert Einstein", "76", "physics;relativity", ""),
    ("2", "University", "University of Zurich", "", "", "1833"),
    ("3", "City", "Ulm", "", "", ""),
    ("4", "Prize", "Nobel Prize in Physics", "", "", ""),
    ("5", "Person", "Mileva Maric", "", "", ""),
    ("6", "City", "Novi Sad", "", "", ""),
]
EINSTEIN_RELS = [
    ("1", "2", "educatedAt", "1896"),
    ("1", "3", "bornIn", ""),
    ("1", "4", "award", "1921"),
    ("5", "1", "spouse", "1903"),
    ("5", "2", "educatedAt", "1896"),
    ("5", "6", "bornIn", ""),
]


def einstein_files(folder: Path) -> tuple[Path, Path]:
    nodes = write_csv(
        folder / "nodes.csv",
        ["id:ID", ":LABEL", "name", "age:int", "tags:string[]", "founded:long"],
        EINSTEIN_NODES,
    )
    rels = write_csv(folder / "rels.csv", [":START_ID", ":END_ID", ":TYPE", "year:int"], EINSTEIN_RELS)
    return nodes, rels


def einstein_db(folder: Path, embedder: TokenEmbedder | None = None) -> Path:
    nodes, rels = einstein_files(folder)
    path = folder / "kg.lbug"
    import_graph(path, [str(nodes)], [str(rels)], embedder or TokenEmbedder())
    return path
