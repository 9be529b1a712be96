"""Memory events (ADR-0051): `memory_retrieved` on every recall, `memory_written` on writes.

One row each in D1 `memory_events` (migration 0003), scoped to the tenant bound at
construction. A caller writing other rows in the same step puts `statement(event)` into its
own `db.batch([...])`, so the event and its change commit together. A `memory_retrieved`
payload: `{"query", "query_hash", "top_k", "results": [{"id", "score", "relevance",
"recency", "confidence", "density"}], "candidates": {channel: count}, "dropped": [...]}`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.ids import IDS_PER_STATEMENT, chunks, new_ulid, sha256_hex
from agent_memory.namespace import TENANT_RE
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import Row, SqlValue

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


# The daily brief's figures on this store's tables: scalar subqueries the brief joins into
# one statement per tenant (?1 tenant, ?2 now in ms; `lifecycle.brief`).
# Pairs the update adjudicator was unsure about in the last 24 hours.
BRIEF_FIGURES = (
    "(SELECT COUNT(*) FROM memory_events WHERE tenant_id = ?1 AND kind = 'memory_written' "
    "AND created_at > ?2 - 86400000 AND json_extract(payload, '$.decision') = 'unsure') "
    "AS unsure"
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

    async def rows(self, sql_where: str, *params: SqlValue, limit: int) -> list[Row]:
        """This tenant's event rows matching `sql_where` (its own clauses, `?` parameters),
        newest first, at most `limit`."""
        result = await (
            self._db.prepare(
                f"SELECT * FROM memory_events WHERE tenant_id = ? AND {sql_where} "
                "ORDER BY created_at DESC, event_id DESC LIMIT ?"
            )
            .bind(self.tenant_id, *params, limit)
            .all()
        )
        return list(result.results)

    async def written_with_hash(self, content_hash: str, limit: int) -> list[Row]:
        """The `memory_written` events of semantic writes of this content hash."""
        return await self.rows(
            "kind = 'memory_written' AND tier = 'semantic' AND content_hash = ?",
            content_hash,
            limit=limit,
        )

    async def retrieving(self, item_id: str, limit: int) -> list[Row]:
        """The `memory_retrieved` events that returned `item_id`."""
        return await self.rows(
            "kind = 'memory_retrieved' AND EXISTS (SELECT 1 FROM json_each(payload, "
            "'$.results') AS r WHERE json_extract(r.value, '$.id') = ?)",
            item_id,
            limit=limit,
        )

    async def page_after(self, after: str, limit: int) -> list[Row]:
        """Events by id after `after` (the subject erase pages through all of them)."""
        result = await (
            self._db.prepare(
                "SELECT event_id, run_id, content_hash, payload FROM memory_events "
                "WHERE tenant_id = ? AND event_id > ? ORDER BY event_id LIMIT ?"
            )
            .bind(self.tenant_id, after, limit)
            .all()
        )
        return list(result.results)

    def scrub_statement(self, event_id: str, payload: dict[str, Any]) -> D1Statement:
        """Replace an event's payload (an erase scrubbing erased ids out of it)."""
        return self._db.prepare(
            "UPDATE memory_events SET payload = ? WHERE tenant_id = ? AND event_id = ?"
        ).bind(
            json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
            self.tenant_id,
            event_id,
        )

    async def delete(self, event_ids: Sequence[str]) -> int:
        """Delete the events among `event_ids`; how many went."""
        statements = [
            self._db.prepare(
                f"DELETE FROM memory_events WHERE tenant_id = ? AND event_id IN "
                f"({', '.join('?' for _ in chunk)})"
            ).bind(self.tenant_id, *chunk)
            for chunk in chunks(list(event_ids), IDS_PER_STATEMENT)
        ]
        deleted = 0
        for start in range(0, len(statements), 50):
            deleted += sum(
                r.meta.changes for r in await self._db.batch(statements[start : start + 50])
            )
        return deleted

    # --- erasure marks (migration 0013): an erase in progress since `started_at` ------------

    async def mark_erase_start(self, now_ms: int, kept_ms: int) -> None:
        """Record that a subject erase starts now (and drop marks older than `kept_ms`)."""
        await self._db.batch(
            [
                self._db.prepare(
                    "INSERT INTO erasure_marks (tenant_id, started_at) VALUES (?, ?) "
                    "ON CONFLICT (tenant_id, started_at) DO NOTHING"
                ).bind(self.tenant_id, now_ms),
                self._db.prepare(
                    "DELETE FROM erasure_marks WHERE tenant_id = ? AND started_at < ?"
                ).bind(self.tenant_id, now_ms - kept_ms),
            ]
        )

    def redact_if_erasing_statement(self, event_id: str, since_ms: int) -> D1Statement:
        """Drop the query text of event `event_id` if an erase has started since `since_ms`
        (a recall record racing a subject erase keeps no text the erase could miss)."""
        return self._db.prepare(
            "UPDATE memory_events SET payload = json_set(json_remove(payload, '$.query'), "
            "'$.query_redacted', json('true')) "
            "WHERE tenant_id = ? AND event_id = ? AND EXISTS (SELECT 1 FROM erasure_marks "
            "WHERE tenant_id = ? AND started_at >= ?)"
        ).bind(self.tenant_id, event_id, self.tenant_id, since_ms)

    async def recent(self, kind: EventKind, limit: int = 20) -> list[MemoryEvent]:
        """This tenant's latest events of `kind`, newest first."""
        columns = ("event_id", "kind", "tier", "agent_type", "run_id", "content_hash")
        return [
            MemoryEvent(
                tenant_id=self.tenant_id,
                payload=json.loads(row["payload"]),
                created_at_ms=int(row["created_at"]),
                **{column: row[column] for column in columns},
            )
            for row in await self.rows("kind = ?", kind, limit=max(1, min(limit, 1000)))
        ]
