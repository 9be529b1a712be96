"""The prune job ledger: `lifecycle_prunes` (one row per job: running or complete, and how
many invocations it took) and `lifecycle_prune_progress` (one row per tenant and job).

A tenant's progress row is written the first time a job meets the tenant, with the
cutoff and retention of that moment, and is never rewritten: a retried or resumed
invocation reads it back and finishes *the same* job. The row's counts are added by the
archive batch's own transaction (`_prune_archive`); this module only creates the row,
reads it, and marks it done. Spends its statements on the invocation's `Meter`.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_memory.lifecycle._prune_archive import PRUNED_TABLES
from agent_memory.lifecycle._prune_models import Meter, TenantPruneCounts
from agent_memory.lifecycle.retention import get_lifecycle, known_tenants
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.sql import Row


class PruneJobs:
    """Reads and writes the prune jobs and their per-tenant progress."""

    def __init__(self, db: D1Database, clock: Clock, *, default_retention_days: int) -> None:
        self._db = db
        self._clock = clock
        self._default_days = default_retention_days

    async def unfinished(self) -> list[tuple[str, int]]:
        """(prune_id, scheduled_ms) of jobs that have not completed, oldest first."""
        result = await self._db.prepare(
            "SELECT prune_id, scheduled_at FROM lifecycle_prunes WHERE status = 'running' "
            "ORDER BY scheduled_at"
        ).all()
        return [(str(r["prune_id"]), int(r["scheduled_at"])) for r in result.results]

    async def start(self, prune_id: str, scheduled_ms: int, now_ms: int, meter: Meter) -> str:
        """Record the job (once) and this invocation of it; returns the job's status."""
        meter.check(2)
        results = await self._db.batch(
            [
                self._db.prepare(
                    "INSERT INTO lifecycle_prunes (prune_id, scheduled_at, status, started_at) "
                    "VALUES (?, ?, 'running', ?) ON CONFLICT (prune_id) DO NOTHING"
                ).bind(prune_id, scheduled_ms, now_ms),
                self._db.prepare(
                    "UPDATE lifecycle_prunes SET invocations = invocations + 1 "
                    "WHERE prune_id = ? RETURNING status"
                ).bind(prune_id),
            ]
        )
        meter.spend(2)
        rows = results[1].results
        return str(rows[0]["status"]) if rows else "running"

    async def finish(self, prune_id: str, now_ms: int) -> None:
        await (
            self._db.prepare(
                "UPDATE lifecycle_prunes SET status = 'complete', finished_at = ? "
                "WHERE prune_id = ?"
            )
            .bind(now_ms, prune_id)
            .run()
        )

    async def tenants(self, prune_id: str, meter: Meter) -> list[str]:
        """The tenants with rows in a pruned table or archives, and those the job already met."""
        meter.check(5)
        # Tenants with archives only still have archives that may expire (`_cold_expiry`).
        tables = (*PRUNED_TABLES, "lifecycle_archives")
        names = set(await known_tenants(self._db, tables))
        meter.spend(len(tables))
        # Tenants whose rows are all gone still appear in the job's counts.
        result = await (
            self._db.prepare(
                "SELECT tenant_id FROM lifecycle_prune_progress WHERE prune_id = ? "
                "ORDER BY tenant_id"
            )
            .bind(prune_id)
            .all()
        )
        meter.spend()
        names.update(str(r["tenant_id"]) for r in result.results)
        return sorted(names)

    async def job_counts(
        self, prune_id: str, tenants: Sequence[str], meter: Meter
    ) -> list[TenantPruneCounts]:
        """The job's totals for each of `tenants` it has met."""
        out = []
        for tenant in tenants:
            row = await self._progress_row(tenant, prune_id)
            meter.spend()
            if row is not None:
                out.append(_counts_from(tenant, row))
        return out

    async def tenant_counts(
        self, prune_id: str, tenant: str, scheduled_ms: int, meter: Meter
    ) -> TenantPruneCounts:
        """The tenant's progress in the job, first fixing its cutoff if the job is new to it."""
        meter.check(4)
        row = await self._progress_row(tenant, prune_id)
        meter.spend()
        if row is None:
            lifecycle = await get_lifecycle(self._db, tenant, self._default_days)
            cutoff = lifecycle.cutoff_ms(scheduled_ms)
            await (
                self._db.prepare(
                    "INSERT INTO lifecycle_prune_progress (tenant_id, prune_id, cutoff_ms, "
                    "retention_days, updated_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (tenant_id, prune_id) DO NOTHING"
                )
                .bind(
                    tenant,
                    prune_id,
                    cutoff,
                    lifecycle.episode_retention_days,
                    int(self._clock.now() * 1000),
                )
                .run()
            )
            meter.spend(2)
            row = await self._progress_row(tenant, prune_id)
            meter.spend()
            if row is None:
                raise RuntimeError(f"prune progress row for {tenant!r} was not written")
        return _counts_from(tenant, row)

    async def mark_done(self, prune_id: str, tenant: str, meter: Meter) -> None:
        await (
            self._db.prepare(
                "UPDATE lifecycle_prune_progress SET done = 1, updated_at = ? "
                "WHERE tenant_id = ? AND prune_id = ?"
            )
            .bind(int(self._clock.now() * 1000), tenant, prune_id)
            .run()
        )
        meter.spend()

    async def _progress_row(self, tenant: str, prune_id: str) -> Row | None:
        return await (
            self._db.prepare(
                "SELECT cutoff_ms, retention_days, episodes_deleted, runs_deleted, "
                "events_deleted, batches, done FROM lifecycle_prune_progress "
                "WHERE tenant_id = ? AND prune_id = ?"
            )
            .bind(tenant, prune_id)
            .first()
        )


def _counts_from(tenant: str, row: Row) -> TenantPruneCounts:
    return TenantPruneCounts(
        tenant_id=tenant,
        retention_days=int(row["retention_days"]),
        cutoff_ms=int(row["cutoff_ms"]),
        episodes_deleted=int(row["episodes_deleted"]),
        runs_deleted=int(row["runs_deleted"]),
        events_deleted=int(row["events_deleted"]),
        batches=int(row["batches"]),
        done=bool(row["done"]),
    )
