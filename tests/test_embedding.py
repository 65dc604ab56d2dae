"""kag.embedding: the bundled MiniLM offline, local folders, and load failures."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kag.embedding import (
    BUNDLED_NAME,
    TOKENIZER_FILES,
    Embedder,
    EmbeddingError,
    bundled_model_dir,
    load_embedder,
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kag-cache")


@pytest.fixture(scope="module")
def minilm(cache_dir: Path) -> Embedder:
    return load_embedder(cache_dir=cache_dir)


def test_bundled_model_loads_offline_and_embeds(minilm: Embedder) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert isinstance(minilm, Embedder)
    assert minilm.name == BUNDLED_NAME
    vectors = minilm.embed(["acme corp", "acme corporation", "paris", "london"])
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = vectors @ vectors.T
    # Figures measured in ../shared/spec/embeddings.md: 0.984 and 0.568.
    assert cosine[0, 1] == pytest.approx(0.984, abs=0.01)
    assert cosine[2, 3] == pytest.approx(0.568, abs=0.01)
    assert cosine[0, 1] > cosine[0, 2]


def test_batching_does_not_change_vectors(minilm: Embedder) -> None:
    texts = [f"entity number {i}" for i in range(70)]  # more than one batch of 64
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([text]) for text in texts[::23]])
    assert np.allclose(together[::23], alone, atol=1e-4)


def test_empty_input(minilm: Embedder) -> None:
    assert minilm.embed([]).shape == (0, 384)


def test_model_folder_is_built_once_and_rebuilt_when_stale(cache_dir: Path, minilm: Embedder) -> None:
    folder = bundled_model_dir(cache_dir)
    assert {p.name for p in folder.iterdir()} == {"model.onnx", *TOKENIZER_FILES}
    assert bundled_model_dir(cache_dir) == folder
    stamp = (folder / "tokenizer.json").stat().st_mtime_ns
    assert bundled_model_dir(cache_dir) == folder and (folder / "tokenizer.json").stat().st_mtime_ns == stamp
    # A link pointing elsewhere (the package moved) makes the folder stale.
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to(cache_dir / "gone.onnx")
    rebuilt = bundled_model_dir(cache_dir)
    assert (rebuilt / "model.onnx").resolve().is_file()


def test_local_folder_loads_like_the_bundled_model(tmp_path: Path, cache_dir: Path, minilm: Embedder) -> None:
    folder = tmp_path / "my-model"
    shutil.copytree(bundled_model_dir(cache_dir), folder, symlinks=True)
    local = load_embedder(str(folder))
    assert local.name == str(folder)
    texts = ["polonium", "marie curie"]
    assert np.allclose(local.embed(texts), minilm.embed(texts), atol=1e-5)


def test_broken_model_file_raises(tmp_path: Path, cache_dir: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    for name in TOKENIZER_FILES:
        shutil.copyfile(bundled_model_dir(cache_dir) / name, folder / name)
    (folder / "model.onnx").write_bytes(b"not an onnx model")
    with pytest.raises(EmbeddingError, match="could not be loaded"):
        load_embedder(str(folder))


def test_folder_without_model_raises(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match=r"lacks model\.onnx, tokenizer\.json"):
        load_embedder(str(tmp_path))


def test_unknown_and_uncached_models_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path))  # an empty cache, whatever this machine has
    with pytest.raises(EmbeddingError, match="neither a folder nor a fastembed model name"):
        load_embedder("no/such-model")
    # A real fastembed model that is not in the cache: offline, it fails fast and says so.
    with pytest.raises(EmbeddingError, match=r"BAAI/bge-small-en-v1\.5.*could not be loaded"):
        load_embedder("BAAI/bge-small-en-v1.5")


def test_fastembed_is_imported_lazily() -> None:
    code = "import sys, kag.cli, kag.embedding, kag.grading.triplets.score; print('fastembed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_concurrent_builders_agree(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        folders = list(pool.map(lambda _: bundled_model_dir(tmp_path), range(4)))
    assert len(set(folders)) == 1
    assert (folders[0] / "model.onnx").resolve().is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_unusable_cache_root_falls_back_to_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("KAG_CACHE_DIR", str(blocker))
    folder = bundled_model_dir()
    assert blocker not in folder.parents
    assert (folder / "tokenizer.json").is_file()
