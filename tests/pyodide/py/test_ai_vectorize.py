"""The Workers AI embedder and the Vectorize adapter, in real Pyodide, against the JS models
of those bindings (models.mjs; neither has a local simulator). What is pinned is the
adapters' side of the boundary: arguments arrive in JS as plain objects and arrays, results
come back as plain Python lists, and nothing needs numpy."""

from __future__ import annotations

import math
import sys

import harness_js
from support import MODES

from bindings.cloudflare.ai import WorkersAIEmbedder
from bindings.cloudflare.vectorize import CloudflareVectorIndex
from bindings.ports.embedder import EmbeddingBadRequestError
from bindings.ports.vectorize import VectorRecord


def _wrapped(js_object: object, mode: str) -> object:
    if mode == "raw":
        return js_object
    from js import Object
    from workers import _EnvWrapper

    env = Object.new()
    env.BINDING = js_object
    return _EnvWrapper(env).BINDING


async def test_embeddings_are_normalised_plain_lists_without_numpy() -> None:
    for mode in MODES:
        ai = harness_js.newWorkersAI()
        embedder = WorkersAIEmbedder(_wrapped(ai, mode))
        rows = await embedder.embed_rows(["hello", "world"])
        assert len(rows) == 2 and all(len(row) == 384 for row in rows), mode
        assert all(type(value) is float for value in rows[0])
        assert math.isclose(math.fsum(v * v for v in rows[0]), 1.0, rel_tol=1e-9)
        [call] = ai.calls.to_py()
        # The inputs reached JS as a plain object with an array (not a Map or a PyProxy).
        assert call["inputs"] == {"text": ["hello", "world"], "pooling": "cls"}, call
    assert "numpy" not in sys.modules


async def test_empty_texts_are_refused_before_calling_workers_ai() -> None:
    ai = harness_js.newWorkersAI()
    embedder = WorkersAIEmbedder(ai)
    try:
        await embedder.embed_rows(["fine", "", "also fine"])
    except EmbeddingBadRequestError as exc:
        assert "empty" in str(exc) and "[1]" in str(exc), str(exc)
    else:
        raise AssertionError("an empty text was sent to Workers AI")
    assert ai.calls.length == 0


async def test_vectorize_upsert_and_query_cross_as_plain_objects() -> None:
    for mode in MODES:
        index = CloudflareVectorIndex(_wrapped(harness_js.newVectorize(2), mode))
        mutation = await index.upsert(
            [
                VectorRecord(id="a", values=[1.0, 0.0], namespace="t1", metadata={"k": "x"}),
                VectorRecord(id="b", values=[0.0, 1.0], namespace="t1", metadata={"k": "y"}),
            ]
        )
        assert mutation.mutation_id, mode
        result = await index.query(
            [1.0, 0.1], top_k=2, namespace="t1", filter={"k": "x"}, return_metadata="all"
        )
        assert [match.id for match in result.matches] == ["a"], (mode, result)
        assert result.matches[0].metadata == {"k": "x"}
        assert (await index.describe()).vector_count == 2
        [record] = await index.get_by_ids(["b"])
        assert record.values == [0.0, 1.0] and record.namespace == "t1", record
