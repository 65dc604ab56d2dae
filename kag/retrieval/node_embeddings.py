"""One embedding per node for ``kag graph import`` (see `kag.retrieval.importer`): the
text of one property, embedded in batches by any `kag.embedding.Embedder`, stored as
float32 little-endian bytes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kag.embedding import Embedder
from kag.errors import InputError, UsageError
from kag.retrieval.graph_csv import NodeRow

EMBED_BATCH = 512


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def embed_nodes(
    nodes: Sequence[NodeRow],
    embedder: Embedder,
    prop: str,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[bytes | None], int]:
    """One float32 little-endian blob per node (None without ``prop``) and the dimension."""
    todo = [
        (i, _text(row.properties[prop]))
        for i, row in enumerate(nodes)
        if row.properties.get(prop) not in (None, "")
    ]
    if not todo:
        raise UsageError(f"no node has the property {prop!r} to embed (choose another with --embed-property)")
    blobs: list[bytes | None] = [None] * len(nodes)
    dimension = 0
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        vectors = np.asarray(embedder.embed([text for _, text in batch]), dtype="<f4")
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            raise InputError(
                f"embedding model {embedder.name}: expected {len(batch)} vectors, got shape {vectors.shape}"
            )
        if dimension and vectors.shape[1] != dimension:
            raise InputError(
                f"embedding model {embedder.name}: vectors changed size ({dimension} then {vectors.shape[1]})"
            )
        dimension = int(vectors.shape[1])
        if not np.all(np.isfinite(vectors)):
            raise InputError(f"embedding model {embedder.name}: returned NaN or infinite values")
        for (i, _), vector in zip(batch, vectors, strict=True):
            blobs[i] = vector.tobytes()
        if progress is not None:
            progress(min(start + EMBED_BATCH, len(todo)), len(todo))
    return blobs, dimension
