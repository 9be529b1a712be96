"""What the reconciler reads and writes of one tenant's memory: D1 rows (`semantic_facts`,
`memory_episodes`, `fact_provenance`, `memory_links`, `reconcile_state`) and the vectors of
its facts.

`ReconcileStore` is bound to one tenant; every statement is `tenant_id = ?` first, and a
vector is only used or deleted when its namespace and `tenant_id` metadata are the
tenant's (ids are unique per index, not per namespace). It decides nothing: the
`Reconciler` chooses what to write and checks it with the write policy first.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from agent_memory.lifecycle._reconcile_models import EpisodeRow, FactRow, Link
from agent_memory.statements import IDS_PER_STATEMENT, STATEMENTS_PER_BATCH, chunks
from agent_memory.tiers.semantic.models import delete_own_vectors
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.vectorize import VectorIndex

VECTOR_IDS_PER_CALL = 100


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

    # ------------------------------------------------------------------ reading

    async def live_facts(self, limit: int) -> list[FactRow]:
        """The newest `limit` active facts still valid now."""
        result = await (
            self._db.prepare(
                "SELECT fact_id, subject, predicate, object, content, content_hash, confidence, "
                "source, created_at, updated_at, valid_from, key_entity, key_attribute, "
                "key_source FROM semantic_facts "
                "WHERE tenant_id = ? AND status = 'active' AND (valid_to IS NULL OR valid_to > ?) "
                "ORDER BY created_at DESC, fact_id LIMIT ?"
            )
            .bind(self.tenant_id, int(self._clock.now() * 1000), limit)
            .all()
        )
        return [FactRow.from_row(row) for row in result.results]

    async def fact_vectors(self, fact_ids: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for chunk in chunks(list(fact_ids), VECTOR_IDS_PER_CALL):
            for record in await self._vectors.get_by_ids(list(chunk)):
                if (
                    record.namespace == self._namespace
                    and record.metadata.get("tenant_id") == self.tenant_id
                    and record.values
                ):
                    found[record.id] = list(record.values)
        return found

    async def episodes(self, limit: int) -> list[EpisodeRow]:
        """The newest `limit` episodes."""
        result = await (
            self._db.prepare(
                "SELECT episode_id, subject, kind, content, data, importance, created_at "
                "FROM memory_episodes WHERE tenant_id = ? ORDER BY created_at DESC LIMIT ?"
            )
            .bind(self.tenant_id, limit)
            .all()
        )
        return [EpisodeRow.from_row(row) for row in result.results]

    async def summarised_episode_ids(self) -> set[str]:
        result = await (
            self._db.prepare(
                "SELECT source_id FROM fact_provenance WHERE tenant_id = ? "
                "AND source_kind = 'episode' AND relation = 'summarised_from'"
            )
            .bind(self.tenant_id)
            .all()
        )
        return {str(row["source_id"]) for row in result.results}

    async def active_ids(self, fact_ids: Sequence[str]) -> set[str]:
        live: set[str] = set()
        for chunk in chunks(list(fact_ids), IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = await (
                self._db.prepare(
                    f"SELECT fact_id FROM semantic_facts WHERE tenant_id = ? "
                    f"AND fact_id IN ({marks}) AND status = 'active'"
                )
                .bind(self.tenant_id, *chunk)
                .all()
            )
            live.update(str(row["fact_id"]) for row in result.results)
        return live

    async def neighbours(self, values: Sequence[float], top_k: int) -> list[tuple[str, float]]:
        """The tenant's nearest vectors to `values` (same namespace and embedding config)."""
        result = await self._vectors.query(
            list(values),
            top_k=top_k,
            namespace=self._namespace,
            filter=self._vector_filter(),
            return_metadata="none",
        )
        return [(m.id, float(m.score)) for m in result.matches]

    def _vector_filter(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "embedding": self._embedding_key}

    async def linked_through(self) -> int:
        """The creation time (ms) up to which facts have been linked."""
        state = await (
            self._db.prepare("SELECT linked_through_ms FROM reconcile_state WHERE tenant_id = ?")
            .bind(self.tenant_id)
            .first_value("linked_through_ms")
        )
        return int(state or 0)

    async def facts_created_after(self, since_ms: int, limit: int) -> list[tuple[str, int]]:
        """(fact_id, created_at) of active facts created after `since_ms`, oldest first."""
        result = await (
            self._db.prepare(
                "SELECT fact_id, created_at FROM semantic_facts WHERE tenant_id = ? "
                "AND status = 'active' AND created_at > ? ORDER BY created_at LIMIT ?"
            )
            .bind(self.tenant_id, since_ms, limit)
            .all()
        )
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
                self._db.prepare(
                    "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                    "relation, created_at) VALUES (?, ?, 'fact', ?, ?, ?) "
                    "ON CONFLICT DO NOTHING"
                ).bind(self.tenant_id, winner, loser, relation, now_ms)
            )
        if link_score is not None:
            for a, b in ((loser, winner), (winner, loser)):
                statements.append(
                    self._db.prepare(
                        "INSERT INTO memory_links (tenant_id, from_fact_id, to_fact_id, score, "
                        "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
                    ).bind(self.tenant_id, a, b, link_score, now_ms)
                )
        results = await self._db.batch(statements)
        return results[0].meta.changes != 0

    async def add_episode_provenance(
        self,
        fact_id: str,
        episode_ids: Sequence[str],
        relation: Literal["promoted_from", "summarised_from"],
        now_ms: int,
    ) -> None:
        statements = [
            self._db.prepare(
                "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                "relation, created_at) VALUES (?, ?, 'episode', ?, ?, ?) ON CONFLICT DO NOTHING"
            ).bind(self.tenant_id, fact_id, episode_id, relation, now_ms)
            for episode_id in episode_ids
        ]
        for start in range(0, len(statements), STATEMENTS_PER_BATCH):
            await self._db.batch(statements[start : start + STATEMENTS_PER_BATCH])

    async def insert_links(self, links: Sequence[Link], now_ms: int) -> int:
        """Insert the links that are not there yet; returns how many were new."""
        statements = [
            self._db.prepare(
                "INSERT INTO memory_links (tenant_id, from_fact_id, to_fact_id, score, "
                "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ).bind(self.tenant_id, link.from_fact_id, link.to_fact_id, link.score, now_ms)
            for link in links
        ]
        added = 0
        for start in range(0, len(statements), STATEMENTS_PER_BATCH):
            results = await self._db.batch(statements[start : start + STATEMENTS_PER_BATCH])
            added += sum(r.meta.changes > 0 for r in results)
        return added

    async def mark_linked(self, through_ms: int, now_ms: int) -> None:
        await (
            self._db.prepare(
                "INSERT INTO reconcile_state (tenant_id, linked_through_ms, last_run_ms) "
                "VALUES (?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET "
                "linked_through_ms = excluded.linked_through_ms, last_run_ms = excluded.last_run_ms"
            )
            .bind(self.tenant_id, through_ms, now_ms)
            .run()
        )

    async def drop_vectors(self, fact_ids: Sequence[str]) -> None:
        """Delete the vectors of superseded facts (only this tenant's: an id alone is never
        trusted)."""
        await delete_own_vectors(self._vectors, self.tenant_id, fact_ids)
