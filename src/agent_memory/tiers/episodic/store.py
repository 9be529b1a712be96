"""Tier 2, episodic memory in D1: `agent_runs` and `memory_episodes` (migration 0001).

`EpisodicStore` is bound to one tenant at construction and every statement starts its
WHERE clause with `tenant_id = ?` (DESIGN invariant 2). Its writes are idempotent, so a
retry after a write that actually landed changes nothing:

* `start_run`      INSERT … ON CONFLICT DO NOTHING (never reverts a finished run);
* `append_episode` INSERT … ON CONFLICT DO NOTHING (episode ids are minted by the caller);
* `complete_run` / `fail_run` upsert the whole row, so they succeed even if `start_run`
  was lost, and set `finished_at`, `status`, `output`/`error` and `steps`.
"""

from __future__ import annotations

import logging
from typing import Any

from agent_memory.governance.events import EventLog
from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.policy import WriteGate, WriteProposal
from agent_memory.scope import TENANT_RE
from agent_memory.tiers.episodic.models import (
    EPISODE_LIMIT_CODE,
    MAX_PAGE_SIZE,
    RECENT_EPISODES,
    Episode,
    EpisodeLimitReached,
    RunPage,
    RunRecord,
    RunStatus,
    decode_cursor,
    encode_cursor,
    open_episodes,
    run_from_row,
    to_json,
)
from bindings.ports.d1 import D1Database, D1Error, D1Statement

log = logging.getLogger(__name__)

_EPISODE_COLUMNS = (
    "episode_id, run_id, agent_type, instance_id, kind, subject, content, data, importance, "
    "created_at"
)
_RUN_COLUMNS = (
    "run_id, agent_type, instance_id, status, input, output, error, steps, started_at, finished_at"
)


class EpisodicStore:
    """Episodic reads and writes for one tenant."""

    def __init__(
        self,
        db: D1Database,
        tenant: str,
        *,
        gate: WriteGate | None = None,
        personal: PersonalData | None = None,
    ) -> None:
        if not tenant:
            raise ValueError("EpisodicStore needs a tenant")
        self._db = db
        self.tenant = tenant
        # Episodes are write proposals (ADR-0051): checked by the policy, and committed
        # together with their `memory_written` event.
        events = EventLog(tenant, db) if TENANT_RE.fullmatch(tenant) else None
        self.gate = gate or WriteGate(tenant, events=events)
        # Seals the personal fields of `data` on write and opens them on read; without one,
        # marked personal data is refused (never stored in plaintext).
        self.personal = personal or PersonalData(tenant, None, None)

    def proposal(self, episode: Episode) -> WriteProposal:
        """The write proposal of `episode` (what the policy checks and the event hashes)."""
        return WriteProposal(
            tier="episodic",
            key=episode.episode_id,
            value={
                "kind": episode.kind,
                "subject": episode.subject,
                "content": episode.content,
                "data": episode.data,
                "importance": episode.importance,
            },
            source=f"episode:{episode.kind}",
            agent_type=episode.agent_type,
            subject=episode.subject,
            run_id=episode.run_id,
        )

    # --- writes ---------------------------------------------------------------------

    async def start_run(
        self,
        *,
        run_id: str,
        agent_type: str,
        instance_id: str,
        input: dict[str, Any],
        started_at: int,
    ) -> None:
        await (
            self._db.prepare(
                "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status, "
                "input, steps, started_at) VALUES (?, ?, ?, ?, 'running', ?, 0, ?) "
                "ON CONFLICT (tenant_id, run_id) DO NOTHING"
            )
            .bind(self.tenant, run_id, agent_type, instance_id, to_json(input), started_at)
            .run()
        )

    async def append_episode(self, episode: Episode) -> None:
        """Insert the episode, then its `memory_written` event. Raises `WriteDenied`
        (policy) or `EpisodeLimitReached` (tenant full), and then nothing is written.

        Both statements are idempotent (the event id is the episode id, inserted only if
        absent), so the writer's retry after a failure between them records the event once.
        """
        proposal = self.proposal(episode)
        self.gate.check(proposal)
        # Sealed here, once: the row holds only ciphertext of the personal fields.
        data = await self.personal.seal(episode.subject, episode.episode_id, "data", episode.data)
        try:
            await self._insert_statement(episode, data).run()
        except D1Error as exc:
            if EPISODE_LIMIT_CODE in str(exc):
                raise EpisodeLimitReached(self.tenant, str(exc)) from exc
            raise
        event = self.gate.event_statement(proposal, episode.episode_id)
        if event is not None:
            await event.run()

    def _insert_statement(self, episode: Episode, data: dict[str, Any]) -> D1Statement:
        return self._db.prepare(
            "INSERT INTO memory_episodes (tenant_id, episode_id, run_id, agent_type, "
            "instance_id, kind, subject, content, data, importance, content_hash, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, episode_id) DO NOTHING"
        ).bind(
            self.tenant,
            episode.episode_id,
            episode.run_id,
            episode.agent_type,
            episode.instance_id,
            episode.kind,
            episode.subject,
            episode.content,
            to_json(data),
            episode.importance,
            episode.content_hash,
            episode.created_at,
        )

    async def finish_run(self, run: RunRecord) -> None:
        """`complete_run` / `fail_run`: upsert the finished row (status from `run`)."""
        if run.status == "running" or run.finished_at is None:
            raise ValueError("finish_run needs a finished run (status and finished_at)")
        await (
            self._db.prepare(
                "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status, "
                "input, output, error, steps, started_at, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, run_id) DO UPDATE SET status = excluded.status, "
                "output = excluded.output, error = excluded.error, steps = excluded.steps, "
                "finished_at = excluded.finished_at"
            )
            .bind(
                self.tenant,
                run.run_id,
                run.agent_type,
                run.instance_id,
                run.status,
                to_json(run.input),
                None if run.output is None else to_json(run.output),
                run.error,
                run.steps,
                run.started_at,
                run.finished_at,
            )
            .run()
        )

    # --- reads ----------------------------------------------------------------------

    async def recent_episodes(self, agent_type: str, limit: int = RECENT_EPISODES) -> list[Episode]:
        """The newest `limit` episodes of (tenant, agent_type), newest first."""
        result = await (
            self._db.prepare(
                f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes "
                "WHERE tenant_id = ? AND agent_type = ? "
                "ORDER BY created_at DESC, episode_id DESC LIMIT ?"
            )
            .bind(self.tenant, agent_type, limit)
            .all()
        )
        return await open_episodes(result.results, self.personal)

    async def episodes_for_run(self, run_id: str) -> list[Episode]:
        result = await (
            self._db.prepare(
                f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes "
                "WHERE tenant_id = ? AND run_id = ? ORDER BY created_at, episode_id"
            )
            .bind(self.tenant, run_id)
            .all()
        )
        return await open_episodes(result.results, self.personal)

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await (
            self._db.prepare(
                f"SELECT {_RUN_COLUMNS} FROM agent_runs WHERE tenant_id = ? AND run_id = ?"
            )
            .bind(self.tenant, run_id)
            .first()
        )
        return None if row is None else run_from_row(row)

    async def list_runs(
        self,
        *,
        agent_type: str | None = None,
        status: RunStatus | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> RunPage:
        """Runs newest first, `limit` per page; pass `next_cursor` back for the next page."""
        limit = max(1, min(limit, MAX_PAGE_SIZE))
        clauses = ["tenant_id = ?"]
        params: list[str | int] = [self.tenant]
        if agent_type is not None:
            clauses.append("agent_type = ?")
            params.append(agent_type)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        if cursor is not None:
            started_at, run_id = decode_cursor(cursor)
            clauses.append("(started_at < ? OR (started_at = ? AND run_id < ?))")
            params.extend([started_at, started_at, run_id])
        params.append(limit + 1)
        result = await (
            self._db.prepare(
                f"SELECT {_RUN_COLUMNS} FROM agent_runs WHERE {' AND '.join(clauses)} "
                "ORDER BY started_at DESC, run_id DESC LIMIT ?"
            )
            .bind(*params)
            .all()
        )
        runs = [run_from_row(row) for row in result.results]
        next_cursor = None
        if len(runs) > limit:
            runs = runs[:limit]
            next_cursor = encode_cursor(runs[-1].started_at, runs[-1].run_id)
        return RunPage(runs=runs, next_cursor=next_cursor)
