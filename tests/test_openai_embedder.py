"""OpenAIEmbedder against an httpx.MockTransport standing in for an OpenAI-compatible API."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from bindings.openai_embedder import OpenAIEmbedder
from bindings.ports.embedder import (
    Embedder,
    EmbeddingBadRequestError,
    EmbeddingError,
    EmbeddingOverloadedError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
)

DIMS = 4
KEY = "sk-test-secret"


def fake_vector(text: str) -> list[float]:
    """A deterministic, unnormalised vector per text (length-dependent)."""
    return [float(len(text)), 1.0, 2.0, 0.0]


class FakeAPI:
    """Records requests; answers like OpenAI, with rows shuffled to test `index` ordering."""

    def __init__(self, dims: int = DIMS) -> None:
        self.requests: list[httpx.Request] = []
        self.dims = dims

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        body = json.loads(request.content)
        rows = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t)[: self.dims]}
            for i, t in enumerate(body["input"])
        ]
        rows.reverse()
        return httpx.Response(
            200, json={"object": "list", "data": rows, "model": body["model"], "usage": {}}
        )


def make(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        base_url="https://api.example.test/v1/",
        api_key=KEY,
        model="text-embedding-3-small",
        dimensions=DIMS,
        transport=httpx.MockTransport(handler),
        **kwargs,
    )


async def test_embeds_in_input_order_normalised_float32() -> None:
    api = FakeAPI()
    embedder: Embedder = make(api)
    texts = ["a", "bbb", "cc"]
    out = await embedder.embed(texts)
    assert out.shape == (3, DIMS) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    for row, text in zip(out, texts, strict=True):
        expected = np.asarray(fake_vector(text))
        np.testing.assert_allclose(row, expected / np.linalg.norm(expected), rtol=1e-6)
    [request] = api.requests
    assert request.method == "POST"
    assert str(request.url) == "https://api.example.test/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(request.content) == {
        "model": "text-embedding-3-small",
        "input": texts,
        "encoding_format": "float",
    }


async def test_config_names_the_provider() -> None:
    config = make(FakeAPI()).config
    assert (config.provider, config.model, config.dimensions) == (
        "openai",
        "text-embedding-3-small",
        DIMS,
    )
    assert config.key == "openai:text-embedding-3-small:4"


async def test_batches_at_most_100_inputs_per_request_and_keeps_order() -> None:
    api = FakeAPI()
    texts = ["x" * (i % 7 + 1) for i in range(250)]
    out = await make(api).embed(texts)
    assert [len(json.loads(r.content)["input"]) for r in api.requests] == [100, 100, 50]
    expected = np.asarray([fake_vector(t) for t in texts], dtype=np.float64)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


async def test_empty_input_makes_no_request() -> None:
    api = FakeAPI()
    out = await make(api).embed([])
    assert out.shape == (0, DIMS)
    assert api.requests == []


async def test_no_key_sends_no_authorization() -> None:
    api = FakeAPI()
    embedder = OpenAIEmbedder(
        "http://127.0.0.1:11434/v1", None, "m", DIMS, httpx.MockTransport(api)
    )
    await embedder.embed(["hi"])
    assert "authorization" not in api.requests[0].headers


async def test_wrong_dimensions_are_refused() -> None:
    with pytest.raises(EmbeddingError, match="returned 3 dimensions, expected 4"):
        await make(FakeAPI(dims=3)).embed(["hello"])


def status(code: int, headers: dict[str, str] | None = None, body: Any = None) -> OpenAIEmbedder:
    payload = body if body is not None else {"error": {"message": f"boom {code}"}}
    return make(lambda request: httpx.Response(code, json=payload, headers=headers))


async def test_429_is_rate_limited() -> None:
    with pytest.raises(EmbeddingRateLimitedError, match="boom 429"):
        await status(429, {"Retry-After": "7"}).embed(["a"])


@pytest.mark.parametrize("code", [503, 529])
async def test_overloaded(code: int) -> None:
    with pytest.raises(EmbeddingOverloadedError, match=str(code)):
        await status(code).embed(["a"])


@pytest.mark.parametrize("code", [400, 401, 403, 404, 413, 422])
async def test_other_4xx_are_bad_requests(code: int) -> None:
    with pytest.raises(EmbeddingBadRequestError, match=f"boom {code}"):
        await status(code).embed(["a"])


async def test_other_5xx_are_embedding_errors() -> None:
    with pytest.raises(EmbeddingError, match=r"HTTP 500.*plain text failure"):
        await status(500, body="plain text failure").embed(["a"])


async def test_timeout() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(EmbeddingTimeoutError):
        await make(handler).embed(["a"])


async def test_connection_failure() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(EmbeddingError, match="could not reach"):
        await make(handler).embed(["a"])


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, content=b"<html>not json</html>"),
        httpx.Response(200, json={"nope": []}),
        httpx.Response(200, json={"data": [{"index": 0}]}),
        httpx.Response(200, json={"data": [{"index": 5, "embedding": [1, 0, 0, 0]}]}),
        httpx.Response(200, json={"data": [{"index": 0, "embedding": ["a", "b", "c", "d"]}]}),
        httpx.Response(200, json={"data": [{"index": 0, "embedding": [0, 0, 0, 0]}]}),
        httpx.Response(200, json={"data": []}),
        httpx.Response(200, json=[1, 2]),
    ],
)
async def test_malformed_bodies_are_embedding_errors(response: httpx.Response) -> None:
    with pytest.raises(EmbeddingError):
        await make(lambda request: response).embed(["a"])


async def test_error_messages_never_leak_the_api_key() -> None:
    def echo_key(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})

    with pytest.raises(EmbeddingBadRequestError) as info:
        await make(echo_key).embed(["a"])
    assert KEY not in str(info.value)
