"""One prune batch: archive a tenant's oldest rows of one table to the cold tier, then
delete exactly those rows (`ArchiveBatchWriter`), and the tables a prune archives.

The contract (the steps are numbered as in `agent_memory.lifecycle.prune`'s docstring):
nothing is deleted that is not in an archive object first, and the delete, the archive
ledger row and the tenant's progress count commit in one D1 transaction whose CHECK fails
(`RangeChanged`, the batch is redone) if rows appeared inside the batch's key range.
Spends every statement and R2 call on the invocation's `Meter`.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent_memory.lifecycle._prune_models import Meter, PruneBudget
from agent_memory.lifecycle.cold import (
    ArchiveKind,
    archive_key,
    encode_archive,
    iso_week,
    week_bounds,
)
from agent_memory.lifecycle.retention import TenantTable
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Error, D1Statement
from bindings.ports.object_store import ObjectStore
from bindings.ports.sql import Row, SqlValue

# The public module's logger: log configuration and filters see the same names as before.
log = logging.getLogger("agent_memory.lifecycle.prune")

RANGE_RETRIES = 3


class RangeChanged(Exception):
    """Rows appeared inside a batch's key range between archive and delete."""


@dataclass(frozen=True)
class PrunedTable:
    """How one archived table is selected, keyed and deleted."""

    kind: ArchiveKind
    table: str
    time_column: str
    id_column: str
    # Extra conditions beyond `tenant_id = ? AND time < cutoff` (with their own `?`s).
    extra_sql: str = ""
    extra_params: int = 0
    progress_column: str = "episodes_deleted"


EPISODES = PrunedTable(
    kind="episodes", table="memory_episodes", time_column="created_at", id_column="episode_id"
)
RUNS = PrunedTable(
    kind="runs",
    table="agent_runs",
    time_column="started_at",
    id_column="run_id",
    # Only finished runs go, and only once they finished before the cutoff too.
    extra_sql=" AND status IN ('completed', 'failed') AND finished_at < ?",
    extra_params=1,
    progress_column="runs_deleted",
)
# The audit trail ages with the memory it describes: events past retention go the same way.
EVENTS = PrunedTable(
    kind="events",
    table="memory_events",
    time_column="created_at",
    id_column="event_id",
    progress_column="events_deleted",
)
TABLES = (EPISODES, RUNS, EVENTS)
PRUNED_TABLES: tuple[TenantTable, ...] = ("memory_episodes", "agent_runs", "memory_events")


class ArchiveBatchWriter:
    """Archives and deletes a prune's batches over a D1 database and a cold-tier bucket."""

    def __init__(
        self, db: D1Database, cold: ObjectStore | None, clock: Clock, budget: PruneBudget
    ) -> None:
        self._db = db
        self._cold = cold
        self._clock = clock
        # The pruner's budget object, read per batch (`batch_rows`), as the pruner does.
        self._budget = budget

    def _where(self, table: PrunedTable) -> str:
        return f"tenant_id = ? AND {table.time_column} < ?{table.extra_sql}"

    def _where_params(self, table: PrunedTable, tenant: str, cutoff: int) -> list[SqlValue]:
        params: list[SqlValue] = [tenant, cutoff]
        return params + [cutoff] * table.extra_params

    def _range_sql(self, table: PrunedTable) -> str:
        t, i = table.time_column, table.id_column
        return f" AND ({t}, {i}) >= (?, ?) AND ({t}, {i}) <= (?, ?)"

    def _index_statements(
        self,
        table: PrunedTable,
        tenant: str,
        key: str,
        where: str,
        params: list[SqlValue],
        now_ms: int,
    ) -> list[D1Statement]:
        """For episodes: index every archived row by its item key (`cold_items`), in the
        transaction that deletes them, so the cold tier can serve each one by key. For runs:
        register their agent instances (`agent_instances`, as `lifecycle.instances` does),
        so the subject eraser still reaches an instance whose runs rows are all pruned
        before its Durable Object ever reported from its alarm."""
        if table is RUNS:
            return [
                self._db.prepare(
                    "INSERT INTO agent_instances (tenant_id, agent_type, instance_id, "
                    "reported_at) SELECT DISTINCT tenant_id, agent_type, instance_id, ? "
                    f"FROM agent_runs WHERE {where} "
                    "ON CONFLICT (tenant_id, agent_type, instance_id) DO NOTHING"
                ).bind(now_ms, *params)
            ]
        if table is not EPISODES:
            return []
        return [
            self._db.prepare(
                "INSERT INTO cold_items (tenant_id, namespace_key, kind, entity_id, "
                "archive_key, subject, created_at, archived_at) "
                "SELECT tenant_id, namespace_key, 'episode', episode_id, ?, subject, "
                f"created_at, ? FROM memory_episodes WHERE {where} "
                "ON CONFLICT (tenant_id, namespace_key, kind, entity_id) DO UPDATE SET "
                "archive_key = excluded.archive_key, archived_at = excluded.archived_at"
            ).bind(key, now_ms, *params)
        ]

    async def count_due(self, table: PrunedTable, tenant: str, cutoff: int) -> int:
        """The rows of `table` a prune with this cutoff would archive and delete now."""
        value = (
            await self._db.prepare(
                f"SELECT COUNT(*) AS n FROM {table.table} WHERE {self._where(table)}"
            )
            .bind(*self._where_params(table, tenant, cutoff))
            .first_value("n")
        )
        return int(value or 0)

    async def archive_batch(
        self,
        prune_id: str,
        tenant: str,
        table: PrunedTable,
        cutoff_ms: int,
        meter: Meter,
    ) -> tuple[str, int] | None:
        """Archive then delete the next batch; (archive key, rows) or None when none is left."""
        for _attempt in range(RANGE_RETRIES):
            rows = await self._select_batch(table, tenant, cutoff_ms)
            meter.spend()
            if not rows:
                return None
            try:
                return await self._archive_and_delete(
                    prune_id, tenant, table, rows, cutoff_ms, meter
                )
            except RangeChanged:
                log.warning(
                    "prune %s: tenant %s %s range changed while archiving; redoing the batch",
                    prune_id,
                    tenant,
                    table.kind,
                )
        raise RuntimeError(
            f"{table.kind} of tenant {tenant} kept changing under the prune; try again later"
        )

    async def _select_batch(self, table: PrunedTable, tenant: str, cutoff: int) -> list[Row]:
        t, i = table.time_column, table.id_column
        result = await (
            self._db.prepare(
                f"SELECT * FROM {table.table} WHERE {self._where(table)} ORDER BY {t}, {i} LIMIT ?"
            )
            .bind(*self._where_params(table, tenant, cutoff), self._budget.batch_rows)
            .all()
        )
        rows = result.results
        if not rows:
            return []
        # An archive object holds one ISO week: cut the batch at the first row's week end.
        _, week_end = week_bounds(int(rows[0][t]))
        return [row for row in rows if int(row[t]) < week_end]

    async def _archive_and_delete(
        self,
        prune_id: str,
        tenant: str,
        table: PrunedTable,
        rows: list[Row],
        cutoff_ms: int,
        meter: Meter,
    ) -> tuple[str, int]:
        assert self._cold is not None
        t, i = table.time_column, table.id_column
        first, last = rows[0], rows[-1]
        first_ms, last_ms = int(first[t]), int(last[t])
        key = archive_key(tenant, table.kind, first_ms, str(first[i]))
        body = encode_archive(rows, table.kind)
        # 1. Archive first: nothing is deleted that is not in the cold tier.
        await self._cold.put(
            key,
            body,
            custom_metadata={
                "tenant": tenant,
                "kind": table.kind,
                "rows": str(len(rows)),
                "first": f"{first_ms}/{first[i]}",
                "last": f"{last_ms}/{last[i]}",
                "prune_id": prune_id,
            },
        )
        meter.spend()
        # 2. Then, in one transaction: the ledger row (its CHECK fails unless the range
        #    holds exactly the archived rows), the delete of that range, the counts.
        where = self._where(table) + self._range_sql(table)
        params = [
            *self._where_params(table, tenant, cutoff_ms),
            first_ms,
            str(first[i]),
            last_ms,
            str(last[i]),
        ]
        now_ms = int(self._clock.now() * 1000)
        statements: list[D1Statement] = [
            self._db.prepare(
                "INSERT INTO lifecycle_archives (tenant_id, archive_key, kind, iso_week, rows, "
                "matched, first_key, last_key, bytes, prune_id, created_at) "
                f"VALUES (?, ?, ?, ?, ?, (SELECT COUNT(*) FROM {table.table} WHERE {where}), "
                "?, ?, ?, ?, ?) ON CONFLICT (tenant_id, archive_key) DO UPDATE SET "
                "rows = excluded.rows, matched = excluded.matched, "
                "last_key = excluded.last_key, bytes = excluded.bytes, "
                "prune_id = excluded.prune_id, created_at = excluded.created_at"
            ).bind(
                tenant,
                key,
                table.kind,
                iso_week(first_ms),
                len(rows),
                *params,
                f"{first_ms}/{first[i]}",
                f"{last_ms}/{last[i]}",
                len(body),
                prune_id,
                now_ms,
            ),
            *self._index_statements(table, tenant, key, where, params, now_ms),
            self._db.prepare(f"DELETE FROM {table.table} WHERE {where}").bind(*params),
            self._db.prepare(
                f"UPDATE lifecycle_prune_progress SET {table.progress_column} = "
                f"{table.progress_column} + ?, batches = batches + 1, updated_at = ? "
                "WHERE tenant_id = ? AND prune_id = ?"
            ).bind(len(rows), now_ms, tenant, prune_id),
        ]
        try:
            await self._db.batch(statements)
        except D1Error as exc:
            if "CHECK constraint failed" in str(exc):
                raise RangeChanged(str(exc)) from exc
            raise
        finally:
            meter.spend(len(statements))
        # The CHECK guarantees the DELETE removed exactly len(rows) rows. (Its
        # `meta.changes` is not used: it may also count the episode counter's trigger.)
        return key, len(rows)
