"""`WorkersAIEmbedder` against the fake Workers AI binding, in raw and wrapped mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bindings.ports.embedder import (
    EmbeddingBadRequestError,
    EmbeddingError,
    EmbeddingOverloadedError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
)
from tests.fakes.js_runtime import FakeAi, FakeJsRuntime, JSValue, fake_embedding


@pytest.fixture
def fake_ai(js_runtime: FakeJsRuntime) -> FakeAi:
    return js_runtime.ai()


@pytest.fixture
def embedder(fake_ai: FakeAi, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.ai import WorkersAIEmbedder

    return WorkersAIEmbedder(bind(fake_ai))


async def test_embeddings_are_normalised_rows_from_data_with_cls_pooling(
    embedder: Any, fake_ai: FakeAi
) -> None:
    vectors = await embedder.embed(["tea", "coffee", "tea"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.allclose(vectors[0], vectors[2])
    expected = np.asarray(fake_embedding("coffee", "cls", 384), dtype=np.float32)
    assert np.allclose(vectors[1], expected / np.linalg.norm(expected), atol=1e-6)
    assert fake_ai.calls == [
        {"model": "@cf/baai/bge-small-en-v1.5", "texts": ["tea", "coffee", "tea"], "pooling": "cls"}
    ]


def test_config_names_the_pooling_so_cls_and_mean_never_mix(embedder: Any) -> None:
    from bindings.cloudflare.ai import WorkersAIEmbedder

    config = embedder.config
    assert (config.provider, config.dimensions) == ("workers-ai", 384)
    assert config.model == "@cf/baai/bge-small-en-v1.5#pooling=cls"
    mean = WorkersAIEmbedder(None, pooling="mean").config
    assert mean.key != config.key


async def test_more_than_100_texts_are_split_in_order(embedder: Any, fake_ai: FakeAi) -> None:
    texts = [f"text {i}" for i in range(250)]
    vectors = await embedder.embed(texts)
    assert [len(call["texts"]) for call in fake_ai.calls] == [100, 100, 50]
    assert vectors.shape == (250, 384)
    single = await embedder.embed(["text 249"])
    assert np.allclose(vectors[249], single[0])


async def test_no_texts_means_no_call(embedder: Any, fake_ai: FakeAi) -> None:
    assert (await embedder.embed([])).shape == (0, 384)
    assert fake_ai.calls == []


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("3040: Capacity temporarily exceeded, please try again.", EmbeddingOverloadedError),
        (
            "3036: You have used up your daily free allocation of 10,000 neurons.",
            EmbeddingRateLimitedError,
        ),
        ("3007: Request timeout", EmbeddingTimeoutError),
        ("5007: No such model @cf/nope or task", EmbeddingBadRequestError),
        ("InferenceUpstreamError: something odd", EmbeddingError),
    ],
)
async def test_ai_errors_map_to_embedding_errors(
    embedder: Any, fake_ai: FakeAi, message: str, error: type[EmbeddingError]
) -> None:
    fake_ai.fail_next(message)
    with pytest.raises(error) as caught:
        await embedder.embed(["x"])
    assert type(caught.value) is error


async def test_a_reply_with_another_pooling_is_refused(embedder: Any, fake_ai: FakeAi) -> None:
    fake_ai.reply_pooling = "mean"
    with pytest.raises(EmbeddingError, match="pooling"):
        await embedder.embed(["x"])


def test_dimensions_must_match_the_model(js_runtime: FakeJsRuntime) -> None:
    from bindings.cloudflare.ai import WorkersAIEmbedder

    with pytest.raises(ValueError, match="384"):
        WorkersAIEmbedder(None, dimensions=768)
    base = WorkersAIEmbedder(None, model="@cf/baai/bge-base-en-v1.5", dimensions=768)
    assert base.config.dimensions == 768
