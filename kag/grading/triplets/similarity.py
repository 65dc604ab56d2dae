"""sim(a, b) on normalized strings, in three modes, as matrices over lists of strings.

``sim(a, b) = 1.0`` when ``a == b``; otherwise, by mode:

- ``exact``: 0.0.
- ``fuzzy`` (backend ``lexical``): ``0.5 · SequenceMatcher(None, a, b).ratio() +
  0.5 · |tokens(a) ∩ tokens(b)| / |tokens(a) ∪ tokens(b)|`` (tokens = whitespace-split;
  Jaccard of two empty sets is 0).
- ``embedding`` (backend = the model's name): cosine of the two sentence embeddings,
  clipped to [0, 1]. Every distinct string is embedded once per run: `prepare` embeds
  all strings of the run in batches before grading, and anything met later is embedded
  then and cached.

In ``fuzzy`` and ``embedding`` a value below the gate counts as 0.0. Fuzzy values are
only computed in full when they can reach the gate: ``ratio() ≤ quick_ratio() ≤
real_quick_ratio()`` are upper bounds, so skipping on them changes no result.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kag.embedding import Embedder, EmbeddingError, load_embedder_chain
from kag.errors import KagError
from kag.grading.triplets.model import DEFAULT_GATES, MatchMode

log = logging.getLogger(__name__)

FloatMatrix = npt.NDArray[np.float64]


class Similarity(Protocol):
    """A similarity mode: ``matrix(a, b)[i, j] = sim(a[i], b[j])``, gated."""

    mode: MatchMode
    backend: str
    gate: float | None

    def prepare(self, strings: Iterable[str]) -> None:
        """Precompute what the run will need (embeddings); no-op for string modes."""

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> FloatMatrix: ...


def _equality(left: Sequence[str], right: Sequence[str]) -> FloatMatrix:
    out = np.zeros((len(left), len(right)))
    if not left or not right:
        return out
    positions: dict[str, list[int]] = {}
    for j, text in enumerate(right):
        positions.setdefault(text, []).append(j)
    for i, text in enumerate(left):
        for j in positions.get(text, ()):
            out[i, j] = 1.0
    return out


class ExactSimilarity:
    """1.0 for equal normalized strings, else 0.0."""

    mode = MatchMode.EXACT
    backend = "exact"
    gate: float | None = None

    def prepare(self, strings: Iterable[str]) -> None:
        return None

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> FloatMatrix:
        return _equality(left, right)


def fuzzy_similarity(a: str, b: str) -> float:
    """The ungated lexical similarity (see the module docstring)."""
    if a == b:
        return 1.0
    tokens_a, tokens_b = set(a.split()), set(b.split())
    union = len(tokens_a | tokens_b)
    jaccard = len(tokens_a & tokens_b) / union if union else 0.0
    return 0.5 * difflib.SequenceMatcher(None, a, b).ratio() + 0.5 * jaccard


class LexicalSimilarity:
    """The ``fuzzy`` mode: difflib ratio and token Jaccard, half each, gated."""

    mode = MatchMode.FUZZY
    backend = "lexical"

    def __init__(self, gate: float = DEFAULT_GATES[MatchMode.FUZZY]) -> None:
        self.gate: float | None = gate
        self._cache: dict[tuple[str, str], float] = {}
        self._tokens: dict[str, frozenset[str]] = {}

    def prepare(self, strings: Iterable[str]) -> None:
        return None

    def _token_set(self, text: str) -> frozenset[str]:
        tokens = self._tokens.get(text)
        if tokens is None:
            tokens = self._tokens[text] = frozenset(text.split())
        return tokens

    def sim(self, a: str, b: str) -> float:
        """Gated similarity of two normalized strings."""
        if a == b:
            return 1.0
        key = (a, b)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        gate = self.gate or 0.0
        tokens_a, tokens_b = self._token_set(a), self._token_set(b)
        union = len(tokens_a | tokens_b)
        half_jaccard = 0.5 * (len(tokens_a & tokens_b) / union if union else 0.0)
        value = 0.0
        if half_jaccard + 0.5 >= gate:
            matcher = difflib.SequenceMatcher(None, a, b)
            if (
                half_jaccard + 0.5 * matcher.real_quick_ratio() >= gate
                and half_jaccard + 0.5 * matcher.quick_ratio() >= gate
            ):
                full = half_jaccard + 0.5 * matcher.ratio()
                value = full if full >= gate else 0.0
        if len(self._cache) > 1_000_000:
            self._cache.clear()
        self._cache[key] = value
        return value

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> FloatMatrix:
        sim = self.sim
        out = np.empty((len(left), len(right)))
        for i, a in enumerate(left):
            for j, b in enumerate(right):
                out[i, j] = sim(a, b)
        return out


class EmbeddingSimilarity:
    """The ``embedding`` mode: gated cosine of cached, L2-normalized embeddings."""

    mode = MatchMode.EMBEDDING

    def __init__(self, embedder: Embedder, gate: float = DEFAULT_GATES[MatchMode.EMBEDDING]) -> None:
        self.embedder = embedder
        self.backend: str = embedder.name
        self.gate: float | None = gate
        self._index: dict[str, int] = {}
        self._vectors: list[FloatMatrix] = []
        self._stacked: FloatMatrix | None = None

    def prepare(self, strings: Iterable[str]) -> None:
        """Embed every string not seen yet, in one batched call."""
        fresh = list(dict.fromkeys(text for text in strings if text not in self._index))
        if not fresh:
            return
        vectors = np.asarray(self.embedder.embed(fresh), dtype=np.float64)
        if vectors.shape[0] != len(fresh):
            raise KagError(
                f"embedding model {self.backend} returned {vectors.shape[0]} vectors for {len(fresh)} texts"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0.0, 1.0, norms)
        base = len(self._index)
        for offset, text in enumerate(fresh):
            self._index[text] = base + offset
        self._vectors.append(vectors)
        self._stacked = None

    def _rows(self, texts: Sequence[str]) -> FloatMatrix:
        self.prepare(texts)
        if self._stacked is None:
            self._stacked = np.concatenate(self._vectors) if self._vectors else np.zeros((0, 0))
        index = self._index
        return self._stacked[[index[text] for text in texts]]

    def matrix(self, left: Sequence[str], right: Sequence[str]) -> FloatMatrix:
        if not left or not right:
            return np.zeros((len(left), len(right)))
        cosine = np.clip(self._rows(left) @ self._rows(right).T, 0.0, 1.0)
        gate = self.gate or 0.0
        cosine[cosine < gate] = 0.0
        equal = _equality(left, right)
        return np.where(equal == 1.0, 1.0, cosine)


def make_similarity(
    mode: MatchMode,
    gate: float | None = None,
    embedding_model: str | None = None,
    *,
    allow_download: bool = False,
    embedder: Embedder | None = None,
) -> Similarity:
    """The similarity for a mode; ``gate=None`` takes the mode's default.

    ``embedding`` uses ``embedder`` if given, else loads ``embedding_model`` (default the
    bundled MiniLM) through `kag.embedding.load_embedder_chain`: fastembed, then
    sentence-transformers when it is installed. A model named explicitly that neither loads
    raises `EmbeddingError`. Only the default model falls back further, to lexical
    similarity: a warning is logged and the ``fuzzy`` similarity returned (with the fuzzy
    default gate unless a gate was given); ``.backend`` then says ``lexical``.
    """
    if mode is MatchMode.EXACT:
        return ExactSimilarity()
    if mode is MatchMode.FUZZY:
        return LexicalSimilarity(DEFAULT_GATES[MatchMode.FUZZY] if gate is None else gate)
    if embedder is None:
        try:
            embedder = load_embedder_chain(embedding_model, allow_download=allow_download)
        except EmbeddingError as exc:
            if embedding_model is not None:
                raise  # a model the user named must not be silently replaced
            log.warning("%s; falling back to --match fuzzy (lexical similarity)", exc)
            return LexicalSimilarity(DEFAULT_GATES[MatchMode.FUZZY] if gate is None else gate)
    return EmbeddingSimilarity(embedder, DEFAULT_GATES[MatchMode.EMBEDDING] if gate is None else gate)
