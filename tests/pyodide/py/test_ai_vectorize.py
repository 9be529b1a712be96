"""The Workers AI embedder and the Vectorize adapter, in real Pyodide, against the JS models
of those bindings (models.mjs; neither has a local simulator). What is pinned is the
adapters' side of the boundary: arguments arrive in JS as plain objects and arrays (a Map or
a PyProxy would not serialise), results come back as plain Python values, JS errors map to
the ports' errors, and nothing needs numpy."""

from __future__ import annotations

import math
import sys
from typing import Any

import harness_js
from support import MODES

from bindings.cloudflare.ai import WorkersAIEmbedder, WorkersAIReranker
from bindings.cloudflare.vectorize import CloudflareVectorIndex
from bindings.ports.embedder import (
    EmbeddingBadRequestError,
    EmbeddingError,
    EmbeddingOverloadedError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
)
from bindings.ports.errors import BindingLimitError
from bindings.ports.reranker import RerankError
from bindings.ports.vectorize import VectorRecord


def _as(js_object: Any, mode: str) -> Any:
    """A JS binding as `self.env.<name>` gives it in `mode` (wrapped: the real SDK's)."""
    if mode == "raw":
        return js_object
    from js import Object
    from workers import _EnvWrapper

    env = Object.new()
    env.BINDING = js_object
    return _EnvWrapper(env).BINDING


async def _raises(error: type[BaseException], awaitable: Any) -> BaseException:
    try:
        await awaitable
    except error as exc:
        return exc
    raise AssertionError(f"expected {error.__name__}")


async def test_embeddings_are_normalised_plain_lists_without_numpy() -> None:
    for mode in MODES:
        ai = harness_js.newWorkersAI()
        embedder = WorkersAIEmbedder(_as(ai, mode))
        rows = await embedder.embed(["tea", "coffee", "tea"])
        assert len(rows) == 3 and all(len(row) == 384 for row in rows), mode
        assert all(type(value) is float for value in rows[0])
        assert math.isclose(math.fsum(v * v for v in rows[1]), 1.0, rel_tol=1e-9)
        assert rows[0] == rows[2]
        [call] = ai.calls.to_py()
        assert call == {
            "model": "@cf/baai/bge-small-en-v1.5",
            "inputs": {"text": ["tea", "coffee", "tea"], "pooling": "cls"},
        }, call
    assert "numpy" not in sys.modules


async def test_more_than_100_texts_are_split_in_order_and_none_means_no_call() -> None:
    ai = harness_js.newWorkersAI()
    embedder = WorkersAIEmbedder(ai)
    rows = await embedder.embed([f"text {i}" for i in range(250)])
    sizes = [len(call["inputs"]["text"]) for call in ai.calls.to_py()]
    assert sizes == [100, 100, 50] and len(rows) == 250
    assert (await embedder.embed(["text 249"]))[0] == rows[249]
    before = ai.calls.length
    assert await embedder.embed([]) == [] and ai.calls.length == before


async def test_empty_texts_are_refused_before_calling_workers_ai() -> None:
    ai = harness_js.newWorkersAI()
    embedder = WorkersAIEmbedder(ai)
    exc = await _raises(EmbeddingBadRequestError, embedder.embed(["fine", "", "also"]))
    assert "empty" in str(exc) and "[1]" in str(exc), str(exc)
    assert ai.calls.length == 0


async def test_workers_ai_errors_map_to_embedding_errors() -> None:
    cases = [
        ("3040: Capacity temporarily exceeded, please try again.", EmbeddingOverloadedError),
        ("3036: You have used up your daily free allocation.", EmbeddingRateLimitedError),
        ("3007: Request timeout", EmbeddingTimeoutError),
        ("5007: No such model @cf/nope or task", EmbeddingBadRequestError),
        ("InferenceUpstreamError: something odd", EmbeddingError),
    ]
    for mode in MODES:
        ai = harness_js.newWorkersAI()
        embedder = WorkersAIEmbedder(_as(ai, mode))
        for message, error in cases:
            ai.failNext(message)
            exc = await _raises(EmbeddingError, embedder.embed(["x"]))
            assert type(exc) is error and message in str(exc), (mode, message, exc)
        ai.replyPooling = "mean"
        exc = await _raises(EmbeddingError, embedder.embed(["x"]))
        assert "pooling" in str(exc), exc


async def test_the_reranker_scores_every_passage_in_request_order() -> None:
    for mode in MODES:
        ai = harness_js.newWorkersAI()
        reranker = WorkersAIReranker(_as(ai, mode))
        passages = ["we ate pasta", "my favourite tea is green tea", "tea at noon"]
        scores = await reranker.rerank("which tea is my favourite", passages)
        assert len(scores) == 3 and all(type(score) is float for score in scores)
        # The model answers best first, by index: the adapter puts them back in order.
        assert scores[1] > scores[2] > scores[0], scores
        [call] = ai.calls.to_py()
        assert call == {
            "model": "@cf/baai/bge-reranker-base",
            "inputs": {
                "query": "which tea is my favourite",
                "contexts": [{"text": text} for text in passages],
                "top_k": 3,
            },
        }, call
        assert await reranker.rerank("tea", []) == [] and ai.calls.length == 1
    assert "numpy" not in sys.modules


async def test_reranker_failures_are_rerank_errors() -> None:
    ai = harness_js.newWorkersAI()
    reranker = WorkersAIReranker(ai)
    ai.failNext("3040: Capacity temporarily exceeded, please try again.")
    exc = await _raises(RerankError, reranker.rerank("tea", ["green tea"]))
    assert "3040" in str(exc), exc
    await _raises(RerankError, reranker.rerank("tea", ["green tea", " "]))
    assert ai.calls.length == 0  # an empty passage is refused before the call


def _record(vid: str, values: list[float], tenant: str, **metadata: Any) -> VectorRecord:
    return VectorRecord(
        id=vid, values=values, namespace=tenant, metadata={"tenant_id": tenant, **metadata}
    )


async def _seeded(mode: str) -> tuple[Any, CloudflareVectorIndex]:
    js_index = harness_js.newVectorize(4)
    index = CloudflareVectorIndex(_as(js_index, mode))
    await index.upsert(
        [
            _record("f1", [1, 0, 0, 0], "t1", kind="fact", year=2024),
            _record("f2", [0.9, 0.1, 0, 0], "t1", kind="episode", year=2025),
            _record("f3", [1, 0, 0, 0], "t2", kind="fact", year=2025),
        ]
    )
    return js_index, index


async def test_vectorize_queries_carry_namespace_filter_and_options_as_js_objects() -> None:
    for mode in MODES:
        _js, index = await _seeded(mode)
        result = await index.query(
            [1.0, 0.0, 0.0, 0.0],
            top_k=5,
            namespace="t1",
            filter={"tenant_id": "t1", "year": {"$gte": 2024}},
            return_metadata="all",
        )
        assert [m.id for m in result.matches] == ["f1", "f2"] and result.count == 2, mode
        assert math.isclose(result.matches[0].score, 1.0)
        assert result.matches[0].metadata == {"tenant_id": "t1", "kind": "fact", "year": 2024}
        assert result.matches[0].namespace == "t1"
        facts = await index.query([1, 0, 0, 0], namespace="t1", filter={"kind": {"$in": ["fact"]}})
        assert [m.id for m in facts.matches] == ["f1"] and facts.matches[0].metadata is None


async def test_vectorize_upsert_replaces_and_delete_removes() -> None:
    for mode in MODES:
        js_index, index = await _seeded(mode)
        await index.upsert([_record("f1", [0, 0, 0, 1], "t1", kind="changed")])
        [stored] = await index.get_by_ids(["f1"])
        assert stored.values == [0, 0, 0, 1] and stored.metadata["kind"] == "changed"
        assert stored.namespace == "t1"
        await index.delete_by_ids(["f1", "f2"])
        assert js_index.vectors.size == 1, mode
        assert await index.get_by_ids(["f1"]) == []


async def test_vectorize_describe_gives_the_vector_count_the_brief_reports() -> None:
    for mode in MODES:
        js_index, index = await _seeded(mode)
        info = await index.describe()
        assert (info.vector_count, info.dimensions) == (js_index.vectors.size, 4), mode
        assert info.vector_count > 0


async def test_vectorize_limits_and_input_errors_are_binding_limit_errors() -> None:
    js_index, index = await _seeded("raw")
    bad_queries: list[dict[str, Any]] = [
        {"top_k": 101},
        {"top_k": 21, "return_metadata": "all"},
        {"top_k": 0},
        {"namespace": "n" * 65},
        {"filter": {"tenant_id": "x" * 2100}},
    ]
    for options in bad_queries:
        await _raises(BindingLimitError, index.query([1, 0, 0, 0], **options))
    exc = await _raises(BindingLimitError, index.upsert([_record("bad", [1, 0], "t1")]))
    assert "40012" in str(exc), exc
    await _raises(BindingLimitError, index.upsert([_record("x" * 65, [1, 0, 0, 0], "t1")]))
    assert js_index.vectors.size == 3
