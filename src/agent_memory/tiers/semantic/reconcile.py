"""The semantic tier's statements for the reconciler (ADR-0051): the rows and vectors its
steps read, and the supersessions, provenance, links and linking progress they write.

Every statement is this tenant's (`tenant_id = ?` first) and names a table the semantic
tier owns (`semantic_facts`, `fact_provenance`, `memory_links`, `reconcile_state`); the
decisions — what is a duplicate, an update, a link — are the reconciler's
(`agent_memory.lifecycle.reconciler`). A loser is never deleted: it is marked superseded
with its validity closed, so as-of recall still answers what was believed before.
`note_writes` is the write cadence: after every N new facts a tenant is reconciled.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.writes import Condition, Recorder
from agent_memory.ids import run_batches
from agent_memory.tiers.episodic import EpisodicStore
from agent_memory.tiers.semantic.models import delete_own_vectors, own_vectors
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import SqlValue
from bindings.ports.vectorize import VectorIndex


class FactRow(BaseModel):
    """What the pure steps need of a `semantic_facts` row (times in epoch ms)."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    subject: str
    predicate: str
    object: str = ""
    content: str
    content_hash: str
    confidence: float
    source: str = "learn"
    created_at: int
    updated_at: int
    valid_from: int = 0
    key_entity: str = ""
    key_attribute: str = ""
    key_source: str = ""


class EpisodeRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode_id: str
    subject: str | None = None
    kind: str
    content: str
    data: dict[str, Any] = Field(default_factory=dict)
    importance: float = 0.5
    created_at: int


class Link(BaseModel):
    model_config = ConfigDict(frozen=True)

    from_fact_id: str
    to_fact_id: str
    score: float


INSERT_LINK = (
    "INSERT INTO memory_links (tenant_id, from_fact_id, to_fact_id, score, created_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_INSERT_PROVENANCE = (
    "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, relation, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


class ReconcileStore:
    """One tenant's rows and vectors, as the reconciler's steps need them."""

    def __init__(
        self,
        tenant_id: str,
        *,
        db: D1Database,
        vectors: VectorIndex,
        namespace: str,
        embedding_key: str,
        clock: Clock,
    ) -> None:
        self.tenant_id = tenant_id
        self._db = db
        self._vectors = vectors
        self._namespace = namespace
        self._embedding_key = embedding_key
        self._clock = clock

    def _sql(self, sql: str, *params: SqlValue) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self._db.prepare(sql).bind(self.tenant_id, *params)

    # ------------------------------------------------------------------ reading

    async def live_facts(self, limit: int) -> list[FactRow]:
        """The newest `limit` active facts still valid now."""
        result = await self._sql(
            "SELECT fact_id, subject, predicate, object, content, content_hash, confidence, "
            "source, created_at, updated_at, valid_from, key_entity, key_attribute, "
            "key_source FROM semantic_facts "
            "WHERE tenant_id = ? AND status = 'active' AND (valid_to IS NULL OR valid_to > ?) "
            "ORDER BY created_at DESC, fact_id LIMIT ?",
            int(self._clock.now() * 1000),
            limit,
        ).all()
        return [FactRow.model_validate(row) for row in result.results]

    async def fact_vectors(self, fact_ids: Sequence[str]) -> dict[str, list[float]]:
        records = await own_vectors(self._vectors, self.tenant_id, fact_ids)
        return {r.id: list(r.values) for r in records if r.values}

    async def episodes(self, limit: int) -> list[EpisodeRow]:
        """The newest `limit` episodes."""
        rows = await EpisodicStore(self._db, self.tenant_id).recent_rows(limit)
        return [
            EpisodeRow.model_validate({**r, "data": json.loads(r["data"] or "{}")}) for r in rows
        ]

    async def summarised_episode_ids(self) -> set[str]:
        result = await self._sql(
            "SELECT source_id FROM fact_provenance WHERE tenant_id = ? "
            "AND source_kind = 'episode' AND relation = 'summarised_from'"
        ).all()
        return {str(row["source_id"]) for row in result.results}

    async def active_ids(self, fact_ids: Sequence[str]) -> set[str]:
        result = await self._sql(
            "SELECT fact_id FROM semantic_facts WHERE tenant_id = ? AND status = 'active' "
            "AND fact_id IN (SELECT value FROM json_each(?))",
            json.dumps(list(fact_ids)),
        ).all()
        return {str(row["fact_id"]) for row in result.results}

    async def neighbours(self, values: Sequence[float], top_k: int) -> list[tuple[str, float]]:
        """The tenant's nearest vectors to `values` (same namespace and embedding config)."""
        result = await self._vectors.query(
            list(values),
            top_k=top_k,
            namespace=self._namespace,
            filter={"tenant_id": self.tenant_id, "embedding": self._embedding_key},
            return_metadata="none",
        )
        return [(m.id, float(m.score)) for m in result.matches]

    async def linked_through(self) -> int:
        """The creation time (ms) up to which facts have been linked."""
        state = await self._sql(
            "SELECT linked_through_ms FROM reconcile_state WHERE tenant_id = ?"
        ).first_value("linked_through_ms")
        return int(state or 0)

    async def facts_created_after(self, since_ms: int, limit: int) -> list[tuple[str, int]]:
        """(fact_id, created_at) of active facts created after `since_ms`, oldest first."""
        result = await self._sql(
            "SELECT fact_id, created_at FROM semantic_facts WHERE tenant_id = ? "
            "AND status = 'active' AND created_at > ? ORDER BY created_at LIMIT ?",
            since_ms,
            limit,
        ).all()
        return [(str(row["fact_id"]), int(row["created_at"])) for row in result.results]

    # ------------------------------------------------------------------ writing

    async def supersede(
        self,
        loser: str,
        winner: str,
        now_ms: int,
        *,
        relation: str | None,
        valid_to_ms: int | None = None,
        link_score: float | None = None,
        record: Recorder | None = None,
    ) -> bool:
        """In one batch: mark `loser` superseded by `winner` (kept, never deleted) if it is
        still active, give the winner its provenance and, with `relation`, record the loser
        against the winner. Its validity ends at `valid_to_ms` (default now; an update
        passes the newer statement's `valid_from`, so as-of recall sees the change when it
        was stated). With `link_score`, the two are linked both ways. False when the loser
        was no longer active."""
        valid_to = now_ms if valid_to_ms is None else valid_to_ms
        statements: list[D1Statement] = [
            self._db.prepare(
                "UPDATE semantic_facts SET status = 'superseded', superseded_by = ?, "
                "valid_to = MAX(valid_from, ?), updated_at = ? "
                "WHERE tenant_id = ? AND fact_id = ? AND status = 'active'"
            ).bind(winner, valid_to, now_ms, self.tenant_id, loser),
            # The winner inherits where the loser came from.
            self._db.prepare(
                "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                "relation, created_at) SELECT tenant_id, ?, source_kind, source_id, relation, ? "
                "FROM fact_provenance WHERE tenant_id = ? AND fact_id = ? "
                "ON CONFLICT DO NOTHING"
            ).bind(winner, now_ms, self.tenant_id, loser),
        ]
        if relation is not None:
            statements.append(
                self._sql(_INSERT_PROVENANCE, winner, "fact", loser, relation, now_ms)
            )
        if link_score is not None:
            statements += [
                self._sql(INSERT_LINK, a, b, link_score, now_ms)
                for a, b in ((loser, winner), (winner, loser))
            ]
        if record is not None:  # its event, written only if this supersession happened
            state = "status = 'superseded' AND superseded_by = ? AND updated_at = ?"
            statements.append(record(self._fact_is(loser, state, winner, now_ms)))
        results = await self._db.batch(statements)
        return results[0].meta.changes != 0

    def _fact_is(self, fact_id: str, state: str, *params: SqlValue) -> Condition:
        facts = f"SELECT 1 FROM semantic_facts WHERE tenant_id = ? AND fact_id = ? AND {state}"
        return f"EXISTS ({facts})", (self.tenant_id, fact_id, *params)

    async def restore(
        self, loser: str, winner: str, now_ms: int, record: Recorder | None = None
    ) -> bool:
        """Undo `loser`'s supersession by `winner` (issue 25): it is live again once its
        vector is written (`pending_vector`; `SemanticMemory.complete_pending`), the record
        of it merged into the winner goes, and the pair is kept apart from then on
        (`kept_apart`), all in one batch, with `record`'s statement (its event) written only
        if the restore happened. False when it is not superseded by it."""
        restored_now = "status = 'pending_vector' AND superseded_by IS NULL AND updated_at = ?"
        restored = (
            "SELECT 1 FROM semantic_facts WHERE tenant_id = ?1 AND fact_id = ?2 "
            "AND status = 'pending_vector' AND superseded_by IS NULL AND updated_at = ?4"
        )
        results = await self._db.batch(
            [
                self._db.prepare(
                    "UPDATE semantic_facts SET status = 'pending_vector', superseded_by = NULL, "
                    "valid_to = NULL, updated_at = ? WHERE tenant_id = ? AND fact_id = ? "
                    "AND status = 'superseded' AND superseded_by = ?"
                ).bind(now_ms, self.tenant_id, loser, winner),
                self._sql(
                    "DELETE FROM fact_provenance WHERE tenant_id = ? AND fact_id = ? "
                    "AND source_kind = 'fact' AND source_id = ? AND relation = 'merged_from'",
                    winner,
                    loser,
                ),
                self._sql(
                    "INSERT INTO facts_kept_apart (tenant_id, fact_id, other_id, undone_at) "
                    f"SELECT ?1, ?2, ?3, ?4 WHERE EXISTS ({restored}) ON CONFLICT DO NOTHING",
                    loser,
                    winner,
                    now_ms,
                ),
                *(() if record is None else [record(self._fact_is(loser, restored_now, now_ms))]),
            ]
        )
        return results[0].meta.changes != 0

    async def kept_apart(self) -> set[tuple[str, str]]:
        """(fact, other) pairs an operator un-superseded: never merged or superseded again."""
        result = await self._sql(
            "SELECT fact_id, other_id FROM facts_kept_apart WHERE tenant_id = ?"
        ).all()
        return {(str(row["fact_id"]), str(row["other_id"])) for row in result.results}

    async def add_episode_provenance(
        self,
        fact_id: str,
        episode_ids: Sequence[str],
        relation: Literal["promoted_from", "summarised_from"],
        now_ms: int,
    ) -> None:
        statements = [
            self._sql(_INSERT_PROVENANCE, fact_id, "episode", episode_id, relation, now_ms)
            for episode_id in episode_ids
        ]
        await run_batches(self._db, statements)

    async def insert_links(self, links: Sequence[Link], now_ms: int) -> int:
        """Insert the links that are not there yet; returns how many were new."""
        statements = [
            self._sql(INSERT_LINK, link.from_fact_id, link.to_fact_id, link.score, now_ms)
            for link in links
        ]
        return sum(r.meta.changes > 0 for r in await run_batches(self._db, statements))

    async def mark_linked(self, through_ms: int, now_ms: int) -> None:
        await self._sql(
            "INSERT INTO reconcile_state (tenant_id, linked_through_ms, last_run_ms) "
            "VALUES (?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET "
            "linked_through_ms = excluded.linked_through_ms, last_run_ms = excluded.last_run_ms",
            through_ms,
            now_ms,
        ).run()

    async def drop_vectors(self, fact_ids: Sequence[str]) -> None:
        """Delete the vectors of superseded facts (only this tenant's: an id alone is never
        trusted)."""
        await delete_own_vectors(self._vectors, self.tenant_id, fact_ids)


async def note_writes(db: D1Database, tenant_id: str, created: int, every: int) -> bool:
    """Add `created` new facts to the tenant's count; True when it reached `every` and this
    call claimed the run (the count restarts at 0)."""
    if created <= 0 or every <= 0:
        return False
    results = await db.batch(
        [
            db.prepare(
                "INSERT INTO reconcile_state (tenant_id, writes_since_run) VALUES (?, ?) "
                "ON CONFLICT (tenant_id) DO UPDATE SET "
                "writes_since_run = writes_since_run + excluded.writes_since_run"
            ).bind(tenant_id, created),
            db.prepare(
                "UPDATE reconcile_state SET writes_since_run = 0 "
                "WHERE tenant_id = ? AND writes_since_run >= ?"
            ).bind(tenant_id, every),
        ]
    )
    return results[1].meta.changes > 0
