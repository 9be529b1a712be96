"""Memory events (ADR-0051): `memory_retrieved` on every recall, `memory_written` on writes.

Events live in D1 `memory_events` (migration 0003), one row each, scoped to a tenant bound
at construction like every memory store. A caller that writes other rows in the same step
takes `statement(event)` and puts it into its own `db.batch([...])`, so the event and the
change it describes commit together or not at all; `record(event)` writes it alone.

Payloads are JSON objects; for `memory_retrieved` it is
`{"query", "query_hash", "top_k", "results": [{"id", "score", "relevance", "recency",
"confidence", "density"}], "candidates": {channel: count}, "dropped": [...]}`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.ids import new_ulid, sha256_hex
from agent_memory.scope import TENANT_RE
from bindings.ports.d1 import D1Database, D1Statement

EventKind = Literal["memory_retrieved", "memory_written"]
EventTier = Literal["working", "episodic", "semantic", "procedural"]
QUERY_PREVIEW_CHARS = 1_000


class MemoryEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    event_id: str = Field(min_length=26, max_length=26)
    tenant_id: str
    kind: EventKind
    tier: EventTier
    agent_type: str | None = None
    run_id: str | None = None
    content_hash: str | None = Field(default=None, min_length=64, max_length=64)
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at_ms: int = Field(gt=0)


class RetrievedItem(BaseModel):
    """One result as the `memory_retrieved` event lists it."""

    id: str
    score: float
    relevance: float
    recency: float
    confidence: float
    density: float


def memory_retrieved(
    *,
    tenant_id: str,
    tier: EventTier,
    now: float,
    query: str,
    top_k: int,
    results: list[RetrievedItem],
    candidates: dict[str, int],
    dropped: list[str] | None = None,
    agent_type: str | None = None,
    run_id: str | None = None,
) -> MemoryEvent:
    """The event one recall emits: which ids it returned, with their scores."""
    return MemoryEvent(
        event_id=new_ulid(now),
        tenant_id=tenant_id,
        kind="memory_retrieved",
        tier=tier,
        agent_type=agent_type,
        run_id=run_id,
        payload={
            "query": query[:QUERY_PREVIEW_CHARS],
            "query_hash": sha256_hex(query),
            "top_k": top_k,
            "results": [item.model_dump() for item in results],
            "candidates": candidates,
            "dropped": dropped or [],
        },
        created_at_ms=int(now * 1000),
    )


def memory_written(
    *,
    tenant_id: str,
    tier: EventTier,
    now: float,
    content_hash: str,
    payload: dict[str, Any],
    agent_type: str | None = None,
    run_id: str | None = None,
) -> MemoryEvent:
    """The event a committed write emits, carrying the content hash (ADR-0051)."""
    return MemoryEvent(
        event_id=new_ulid(now),
        tenant_id=tenant_id,
        kind="memory_written",
        tier=tier,
        agent_type=agent_type,
        run_id=run_id,
        content_hash=content_hash,
        payload=payload,
        created_at_ms=int(now * 1000),
    )


class EventLog:
    """Reads and writes `memory_events` for one tenant."""

    def __init__(self, tenant_id: str, db: D1Database) -> None:
        if not TENANT_RE.fullmatch(tenant_id):
            raise ValueError(f"invalid tenant id {tenant_id!r}")
        self.tenant_id = tenant_id
        self._db = db

    def statement(self, event: MemoryEvent, *, if_absent: bool = False) -> D1Statement:
        """The INSERT for `event`, to run alone or inside the caller's batch. `if_absent`:
        do nothing when the event id is taken (a retried write recording its event again)."""
        if event.tenant_id != self.tenant_id:
            raise ValueError("event belongs to another tenant")
        conflict = " ON CONFLICT (tenant_id, event_id) DO NOTHING" if if_absent else ""
        return self._db.prepare(
            "INSERT INTO memory_events (tenant_id, event_id, kind, tier, agent_type, run_id, "
            f"content_hash, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?){conflict}"
        ).bind(
            self.tenant_id,
            event.event_id,
            event.kind,
            event.tier,
            event.agent_type,
            event.run_id,
            event.content_hash,
            json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False),
            event.created_at_ms,
        )

    async def record(self, event: MemoryEvent) -> None:
        await self.statement(event).run()

    async def record_many(self, events: Sequence[MemoryEvent], *, if_absent: bool = False) -> None:
        """Write `events` in D1 batches (each batch one transaction)."""
        statements = [self.statement(e, if_absent=if_absent) for e in events]
        for start in range(0, len(statements), 50):
            await self._db.batch(statements[start : start + 50])

    async def recent(self, kind: EventKind, limit: int = 20) -> list[MemoryEvent]:
        """This tenant's latest events of `kind`, newest first."""
        result = (
            await self._db.prepare(
                "SELECT event_id, kind, tier, agent_type, run_id, content_hash, payload, "
                "created_at FROM memory_events WHERE tenant_id = ? AND kind = ? "
                "ORDER BY created_at DESC, event_id DESC LIMIT ?"
            )
            .bind(self.tenant_id, kind, max(1, min(limit, 1000)))
            .all()
        )
        return [
            MemoryEvent(
                event_id=row["event_id"],
                tenant_id=self.tenant_id,
                kind=row["kind"],
                tier=row["tier"],
                agent_type=row["agent_type"],
                run_id=row["run_id"],
                content_hash=row["content_hash"],
                payload=json.loads(row["payload"]),
                created_at_ms=int(row["created_at"]),
            )
            for row in result.results
        ]
