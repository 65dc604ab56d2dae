"""The configuration side of ``kag graph import``: which database (the configuration's
``[databases.<name>]``: a Ladybug file or a Neo4j server) and which embedding model (the
bundled MiniLM, or one of the configuration's providers) feed
`kag.retrieval.importer.import_graph`.

It lives in generation because generation owns the configuration file and the provider
clients; retrieval only receives the chosen `Embedder`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kag.embedding import Embedder, load_embedder
from kag.errors import KagError, UsageError
from kag.generation.config import Config, FastEmbedProvider, OllamaProvider, OpenAIProvider, load_config
from kag.generation.providers import open_provider
from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries
from kag.retrieval.factory import database_settings
from kag.retrieval.importer import ImportReport, import_graph
from kag.retrieval.ladybug_backend import DEFAULT_INDEX
from kag.retrieval.neo4j_backend import Neo4jSettings


class EmbeddingFailed(KagError):
    """The embedding provider failed (after its retries) during an import."""


class ProviderEmbedder:
    """An Ollama or OpenAI-compatible provider of the configuration as an `Embedder`:
    each batch is one request through the runner's provider client, with its retries."""

    def __init__(self, provider: OllamaProvider | OpenAIProvider, model: str, timeout: float = 300.0) -> None:
        self.provider = provider
        self.model = model
        self.timeout = timeout
        self.name = f"{provider.type}:{model}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray(asyncio.run(self._embed(list(texts))), dtype=np.float32)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        client = open_provider(self.provider, self.timeout, 1)
        try:
            vectors, _ = await call_with_retries(lambda: client.embed(self.model, texts), RetryPolicy())
        except ProviderError as exc:
            raise EmbeddingFailed(
                f"embedding provider {self.provider.name!r} (model {self.model!r}): {exc}"
            ) from None
        finally:
            await client.aclose()
        return vectors


def choose_embedder(config: Config, provider: str | None, model: str | None) -> Embedder:
    """The embedding model for an import: without ``provider``, FastEmbed with ``model``
    (default: the bundled MiniLM); with one, that provider of the configuration
    (FastEmbed: its ``model`` unless ``model`` is given; Ollama/OpenAI: ``model`` required)."""
    if provider is None:
        return load_embedder(model)
    if provider not in config.providers:
        known = ", ".join(sorted(config.providers)) or "none"
        raise UsageError(f"--provider {provider!r}: not defined in {config.path} (providers: {known})")
    chosen = config.providers[provider]
    if isinstance(chosen, FastEmbedProvider):
        return load_embedder(model or chosen.model)
    if not model:
        raise UsageError(
            f"--provider {provider!r} is an {chosen.type} provider: give the embedding model with --model"
        )
    return ProviderEmbedder(chosen, model)


def import_from_config(
    config_path: str | Path,
    database: str,
    node_files: Sequence[str],
    rel_files: Sequence[str],
    embed_property: str = "name",
    provider: str | None = None,
    model: str | None = None,
    index: str = DEFAULT_INDEX,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    """Import into the database ``[databases.<database>]`` of the configuration file: a
    Ladybug file (its ``path``, relative to the working directory) or a Neo4j server (its
    ``uri``, ``user``, ``password`` and ``database``; ``index`` names the vector index)."""
    config = load_config(config_path)
    settings = database_settings(str(config_path), database, config.databases)
    if not node_files:
        raise UsageError("give at least one --nodes file")
    embedder = choose_embedder(config, provider, model)
    target = settings if isinstance(settings, Neo4jSettings) else settings.path
    return import_graph(target, node_files, rel_files, embedder, embed_property, index, replace, progress)
