"""Fixtures: a migrated local runtime with a pinned clock, and tenant-bound memories."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_memory.governance.writes import EventLog, MemoryEvent, loaded_payload
from agent_memory.tiers.semantic.memory import SemanticMemory
from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Database
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.semantic.fakes import SpyD1, SpyVectors

MemoryFactory = Callable[..., SemanticMemory]
NOW_MS = 1_750_000_000_000  # the pinned clock of `rt`


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(1_750_000_000.0)
    )
    await runtime.migrate()
    yield runtime
    await runtime.close()


@pytest.fixture
def clock(rt: LocalRuntime) -> FixedClock:
    assert isinstance(rt.clock, FixedClock)
    return rt.clock


@pytest.fixture
def embedder(rt: LocalRuntime) -> HashingEmbedder:
    assert isinstance(rt.embedder, HashingEmbedder)
    return rt.embedder


@pytest.fixture
def spy_db(rt: LocalRuntime) -> SpyD1:
    return SpyD1(rt.db)


@pytest.fixture
def spy_vectors(rt: LocalRuntime) -> SpyVectors:
    return SpyVectors(rt.vectors)


@pytest.fixture
def make_memory(rt: LocalRuntime, spy_db: SpyD1, spy_vectors: SpyVectors) -> MemoryFactory:
    """`make_memory(tenant="acme", **overrides)`: a SemanticMemory over the spies."""

    def make(tenant: str = "acme", **overrides: Any) -> SemanticMemory:
        kwargs: dict[str, Any] = {
            "db": spy_db,
            "vectors": spy_vectors,
            "embedder": rt.embedder,
            "clock": rt.clock,
        }
        kwargs.update(overrides)
        return SemanticMemory(tenant, **kwargs)

    return make


async def fact_rows(rt: LocalRuntime) -> list[dict[str, Any]]:
    result = await rt.db.prepare("SELECT * FROM semantic_facts ORDER BY fts_rowid").all()
    return result.results


async def vector_count(rt: LocalRuntime) -> int:
    return (await rt.vectors.describe()).vector_count


async def event_count(rt: LocalRuntime) -> int:
    """`memory_retrieved` events (writes add `memory_written` ones: the write policy's)."""
    value = await rt.db.prepare(
        "SELECT COUNT(*) AS n FROM memory_events WHERE kind = 'memory_retrieved'"
    ).first_value("n")
    return int(value)


async def retrieved_events(db: D1Database, tenant: str = "acme") -> list[MemoryEvent]:
    """The tenant's latest `memory_retrieved` events, newest first."""
    rows = await EventLog(tenant, db).rows("kind = ?", "memory_retrieved", limit=20)
    return [
        MemoryEvent.model_validate(
            row | {"payload": loaded_payload(row["payload"]), "created_at_ms": row["created_at"]}
        )
        for row in rows
    ]


async def insert_unindexed(db: D1Database, tenant: str, contents: Sequence[str]) -> None:
    """Rows without a session, index entry or vector (so only the keyword channel can find
    them by their words, once reindexed)."""
    for n, content in enumerate(contents):
        await (
            db.prepare(
                "INSERT INTO semantic_facts (tenant_id, fact_id, agent_type, subject, predicate, "
                "object, content, confidence, source, embedding_provider, embedding_model, "
                "embedding_dimensions, content_hash, status, valid_from, created_at, updated_at) "
                "VALUES (?, ?, 'default', ?, 'states', '', ?, 0.8, 'test', 'test', 'm', 384, "
                "?, 'active', ?, ?, ?)"
            )
            .bind(
                tenant,
                f"01JOLDFACT{tenant[:4].upper():0<4}{n:012d}",
                f"old-{n}",
                content,
                f"{n:024d}",
                NOW_MS - 86_400_000 * (n + 1),
                NOW_MS,
                NOW_MS,
            )
            .run()
        )


async def index_state(db: D1Database, tenant: str) -> dict[str, Any]:
    """The tenant's keyword index: postings as (content, term, tf, context_tf, length,
    context_length), df per term (terms no fact holds left out) and document statistics."""
    postings = (
        await db.prepare(
            "SELECT f.content, t.term, t.tf, t.context_tf, t.length, t.context_length "
            "FROM semantic_terms AS t JOIN semantic_facts AS f ON f.fts_rowid = t.fts_rowid "
            "WHERE t.tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = ?) "
            "ORDER BY f.content, t.term"
        )
        .bind(tenant)
        .all()
    ).results
    df = (
        await db.prepare(
            "SELECT term, df FROM semantic_term_stats WHERE tenant_id = "
            "(SELECT code FROM keyword_tenants WHERE tenant_id = ?) AND df > 0 ORDER BY term"
        )
        .bind(tenant)
        .all()
    ).results
    stats = (
        await db.prepare(
            "SELECT docs, total_length, total_context_length FROM semantic_index_stats "
            "WHERE tenant_id = ?"
        )
        .bind(tenant)
        .first()
    )
    return {
        "postings": [tuple(r.values()) for r in postings],
        "df": {r["term"]: r["df"] for r in df},
        "stats": stats,
    }
