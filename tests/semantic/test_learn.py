"""learn / learn_many: the pending D1 row and the vector together, then active; idempotent;
failures leave a retryable pending row and never a half-visible fact; bad input writes
nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import (
    MAX_CONTENT_CHARS,
    MemoryInputError,
    embedding_tag,
    namespace_for_tenant,
)
from bindings.ports.d1 import D1Error
from bindings.ports.embedder import EmbeddingConfig, EmbeddingOverloadedError
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.semantic.conftest import MemoryFactory, fact_rows, vector_count
from tests.semantic.fakes import FailingEmbedder, SpyD1, SpyVectors

ROI_FACT: dict[str, Any] = {
    "content": "Contact 123456 responded positively to direct ROI framing",
    "subject": "contact:hubspot_id:123456",
    "predicate": "responded_positively_to",
    "object": "direct_roi_framing",
    "confidence": 0.82,
    "learned_from_run_id": "01J0000000000000000000RUN1",
}


async def test_learn_writes_an_active_row_and_its_vector(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory(agent_type="sdr")
    result = await memory.learn(ROI_FACT)
    assert result.created and result.status == "active" and result.error is None

    [row] = await fact_rows(rt)
    assert row["tenant_id"] == "acme" and row["fact_id"] == result.fact_id
    assert row["status"] == "active" and row["agent_type"] == "sdr"
    assert (row["subject"], row["predicate"], row["object"]) == (
        "contact:hubspot_id:123456",
        "responded_positively_to",
        "direct_roi_framing",
    )
    assert row["embedding_provider"] == "test" and row["embedding_dimensions"] == 384
    assert row["learned_from_run_id"] == ROI_FACT["learned_from_run_id"]
    assert row["recall_count"] == 0 and row["last_recalled_at"] is None

    [vector] = await rt.vectors.get_by_ids([result.fact_id])
    assert vector.namespace == "agent_memory_semantic:acme"
    assert vector.metadata["tenant_id"] == "acme"
    assert vector.metadata["agent_type"] == "sdr"
    assert vector.metadata["fact_id"] == result.fact_id
    assert vector.metadata["embedding"] == "test:hashing-bow:384"


async def test_the_same_content_for_the_same_subject_is_one_fact_embedded_once(
    rt: LocalRuntime, make_memory: MemoryFactory, embedder: HashingEmbedder
) -> None:
    memory = make_memory()
    first = await memory.learn(ROI_FACT)
    # Case and spacing do not make a new fact (content hash of the normalised text).
    again = await memory.learn(
        {**ROI_FACT, "content": "  contact 123456   RESPONDED positively to direct ROI framing"}
    )
    assert again.fact_id == first.fact_id and not again.created
    assert len(embedder.calls) == 1
    assert len(await fact_rows(rt)) == 1 and await vector_count(rt) == 1

    other_subject = await memory.learn({**ROI_FACT, "subject": "contact:hubspot_id:999"})
    assert other_subject.fact_id != first.fact_id and other_subject.created
    assert len(await fact_rows(rt)) == 2


async def test_learn_many_batches_the_embedding_and_dedupes(
    rt: LocalRuntime, make_memory: MemoryFactory, embedder: HashingEmbedder
) -> None:
    memory = make_memory()
    facts = [{"content": f"fact number {i} about the pricing page"} for i in range(230)]
    facts.append({"content": "fact number 7 about the pricing page"})  # duplicate of #7
    results = await memory.learn_many(facts)
    assert len(results) == 231
    assert results[230].fact_id == results[7].fact_id and not results[230].created
    assert all(r.status == "active" for r in results)
    assert [len(call) for call in embedder.calls] == [100, 100, 30]
    assert len(await fact_rows(rt)) == 230 and await vector_count(rt) == 230
    # Learning them all again embeds nothing.
    await memory.learn_many(facts)
    assert len(embedder.calls) == 3


async def test_vector_failure_leaves_a_pending_row_that_recall_ignores_until_completed(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_vectors: SpyVectors
) -> None:
    memory = make_memory()
    spy_vectors.fail_upserts = True
    result = await memory.learn(ROI_FACT)
    assert result.status == "pending_vector" and "vector write failed" in (result.error or "")
    [row] = await fact_rows(rt)
    assert row["status"] == "pending_vector"
    assert await vector_count(rt) == 0
    # Not half-visible: the keyword channel could match the row, but recall skips it.
    assert (await memory.recall("responded positively to direct ROI framing")).results == []

    spy_vectors.fail_upserts = False
    assert await memory.complete_pending() == 1
    [row] = await fact_rows(rt)
    assert row["status"] == "active" and await vector_count(rt) == 1
    found = await memory.recall("responded positively to direct ROI framing")
    assert found.fact_ids == [result.fact_id]


async def test_learning_a_pending_fact_again_completes_it(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_vectors: SpyVectors
) -> None:
    memory = make_memory()
    spy_vectors.fail_upserts = True
    pending = await memory.learn(ROI_FACT)
    spy_vectors.fail_upserts = False
    retried = await memory.learn(ROI_FACT)
    assert retried.fact_id == pending.fact_id and retried.status == "active"
    assert not retried.created
    assert await vector_count(rt) == 1


async def test_the_next_successful_write_completes_earlier_pending_facts(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_vectors: SpyVectors
) -> None:
    memory = make_memory()
    spy_vectors.fail_upserts = True
    pending = await memory.learn(ROI_FACT)
    spy_vectors.fail_upserts = False
    await memory.learn({"content": "an unrelated fact learned later"})
    fact = await memory.get(pending.fact_id)
    assert fact is not None and fact.status == "active"
    assert await vector_count(rt) == 2
    assert (await memory.recall("direct ROI framing", 1)).fact_ids == [pending.fact_id]


async def test_activation_failure_keeps_the_fact_invisible_until_completed(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    memory = make_memory()
    spy_db.fail_pattern = r"SET status = 'active'"
    result = await memory.learn(ROI_FACT)
    assert result.status == "pending_vector" and "activation failed" in (result.error or "")
    assert await vector_count(rt) == 1  # the vector exists, its row is still pending
    found = await memory.recall("responded positively to direct ROI framing")
    assert found.results == []
    # A pending row is not a stray: its vector is kept for the retry.
    assert await vector_count(rt) == 1
    spy_db.fail_pattern = None
    assert await memory.complete_pending() == 1
    found = await memory.recall("responded positively to direct ROI framing")
    assert found.fact_ids == [result.fact_id]


async def test_a_failed_row_insert_leaves_no_vector_behind(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    # Rows and vectors are written together (one round trip): when the rows fail, the
    # vectors just written go too — an erase finds vectors only through their rows.
    memory = make_memory()
    spy_db.fail_pattern = r"INSERT INTO semantic_facts"
    with pytest.raises(D1Error):
        await memory.learn(ROI_FACT)
    assert await fact_rows(rt) == [] and await vector_count(rt) == 0


async def test_embedding_failure_writes_nothing(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory(embedder=FailingEmbedder())
    with pytest.raises(EmbeddingOverloadedError):
        await memory.learn(ROI_FACT)
    assert await fact_rows(rt) == [] and await vector_count(rt) == 0


@pytest.mark.parametrize(
    ("fact", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "x" * (MAX_CONTENT_CHARS + 1)}, "content"),
        ({"content": "ok", "metadata": ["not", "an", "object"]}, "metadata"),
        ({"content": "ok", "metadata": "{}"}, "metadata"),
        ({"content": "ok", "metadata": {"blob": "x" * (10 * 1024)}}, "metadata"),
        ({"content": "ok", "confidence": 1.5}, "confidence"),
        ({"content": "ok", "subject": ""}, "subject"),
        ({"content": "ok", "agent_type": "Not Valid"}, "agent_type"),
        ({"content": "ok", "valid_from": 2_000_000_000, "valid_to": 1_000_000_000}, "(input)"),
        ({"content": "ok", "surprise": 1}, "surprise"),
    ],
)
async def test_bad_facts_are_rejected_with_the_field_and_nothing_is_written(
    rt: LocalRuntime,
    make_memory: MemoryFactory,
    embedder: HashingEmbedder,
    fact: dict[str, Any],
    field: str,
) -> None:
    memory = make_memory()
    with pytest.raises(MemoryInputError) as caught:
        await memory.learn(fact)
    error = caught.value.to_dict()["error"]
    assert error["code"] == "validation_error"
    assert [p["field"] for p in error["details"]["problems"]] == [field]
    json.dumps(error)  # a clear JSON error
    assert await fact_rows(rt) == [] and await vector_count(rt) == 0
    assert embedder.calls == []


async def test_one_bad_fact_in_a_batch_writes_none_of_them(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory()
    with pytest.raises(MemoryInputError) as caught:
        await memory.learn_many([{"content": "fine"}, {"content": ""}, {"content": "fine too"}])
    assert caught.value.problems[0]["field"] == "[1].content"
    assert await fact_rows(rt) == [] and await vector_count(rt) == 0


async def test_metadata_of_exactly_10_kib_is_accepted(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    overhead = len(json.dumps({"blob": ""}, separators=(",", ":")))
    metadata = {"blob": "x" * (10 * 1024 - overhead)}
    result = await make_memory().learn({"content": "big metadata", "metadata": metadata})
    fact = await make_memory().get(result.fact_id)
    assert fact is not None and fact.metadata == metadata


def test_embedding_tag_stays_within_the_indexed_64_bytes() -> None:
    short = EmbeddingConfig(
        provider="workers-ai", model="@cf/baai/bge-small-en-v1.5", dimensions=384
    )
    assert embedding_tag(short) == short.key
    long_a = EmbeddingConfig(provider="p", model="m" * 80 + "-a", dimensions=384)
    long_b = EmbeddingConfig(provider="p", model="m" * 80 + "-b", dimensions=384)
    tags = {embedding_tag(long_a), embedding_tag(long_b)}
    assert len(tags) == 2 and all(len(tag.encode()) <= 64 for tag in tags)


def test_namespace_is_per_tenant_and_hashed_when_too_long() -> None:
    assert namespace_for_tenant("acme") == "agent_memory_semantic:acme"
    long_tenant = "t" * 63
    hashed = namespace_for_tenant(long_tenant)
    assert len(hashed.encode()) <= 64 and hashed.startswith("agent_memory_semantic:~")
    assert namespace_for_tenant(long_tenant) == hashed  # stable
    assert namespace_for_tenant("t" * 62) != hashed


async def test_a_long_tenant_id_gets_a_hashed_namespace_that_works(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    tenant = "a-very-long-tenant-identifier-that-goes-on-and-on-for-ever-x"
    memory = make_memory(tenant)
    result = await memory.learn(ROI_FACT)
    [vector] = await rt.vectors.get_by_ids([result.fact_id])
    assert vector.namespace == namespace_for_tenant(tenant)
    assert (await memory.recall("direct ROI framing")).fact_ids == [result.fact_id]


@pytest.mark.parametrize("tenant", ["", "Acme", "a:b", "x" * 64, "bad tenant"])
def test_a_memory_cannot_be_built_for_an_invalid_tenant(
    rt: LocalRuntime, spy_db: SpyD1, spy_vectors: SpyVectors, tenant: str
) -> None:
    with pytest.raises(ValueError):
        SemanticMemory(tenant, db=spy_db, vectors=spy_vectors, embedder=None, clock=rt.clock)
