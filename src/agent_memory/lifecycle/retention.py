"""Per-tenant lifecycle settings (`tenant_lifecycle`; docs/lifecycle.md, "Retention and
per-tenant overrides"), the tenant list, and the AgentRuntime instances D1 knows of
(`agent_instances`). A NULL column means "the default"; the episode limit may be lowered,
never raised. A Durable Object is only reachable through itself and the crons never call one
(DESIGN invariant 3), so each reports a row about itself from its alarm (`report_instance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.ids import distinct_tenants_sql, run_batches
from bindings.ports.d1 import D1Database

DEFAULT_EPISODE_LIMIT = 100_000  # the migration's trigger default; tests keep them equal
EPISODE_WARN_FRACTION = 0.8
MAX_RETENTION_DAYS = 36_500
MS_PER_DAY = 86_400_000

TenantTable = Literal[
    "memory_episodes",
    "agent_runs",
    "semantic_facts",
    "memory_events",
    "namespace_reads",
    "lifecycle_archives",
    "agent_instances",
    "subject_data_keys",
]


class LifecycleUpdate(BaseModel):
    """Body of `PUT /admin/tenants/{tenant}/lifecycle`. Null resets a value to the default;
    a field left out is unchanged."""

    model_config = ConfigDict(extra="forbid")

    episode_retention_days: int | None = Field(default=None, ge=1, le=MAX_RETENTION_DAYS)
    episode_limit: int | None = Field(default=None, ge=1, le=DEFAULT_EPISODE_LIMIT)


class TenantLifecycle(BaseModel):
    """A tenant's effective settings, and whether each one is an override."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    episode_retention_days: int
    retention_overridden: bool
    episode_limit: int
    limit_overridden: bool
    episode_warn_at: int
    updated_at: int | None = None
    updated_by: str | None = None

    def cutoff_ms(self, now_ms: int) -> int:
        """Rows older than this (epoch ms) are past retention at `now_ms`."""
        return now_ms - self.episode_retention_days * MS_PER_DAY


def warn_threshold(limit: int) -> int:
    return int(limit * EPISODE_WARN_FRACTION)


async def get_lifecycle(db: D1Database, tenant_id: str, default_days: int) -> TenantLifecycle:
    sql = (
        "SELECT episode_retention_days, episode_limit, updated_at, updated_by "
        "FROM tenant_lifecycle WHERE tenant_id = ?"
    )
    row = await db.prepare(sql).bind(tenant_id).first() or {}
    days, limit = row.get("episode_retention_days"), row.get("episode_limit")
    effective_limit = int(limit) if limit is not None else DEFAULT_EPISODE_LIMIT
    return TenantLifecycle(
        tenant_id=tenant_id,
        episode_retention_days=int(days) if days is not None else default_days,
        retention_overridden=days is not None,
        episode_limit=effective_limit,
        limit_overridden=limit is not None,
        episode_warn_at=warn_threshold(effective_limit),
        updated_at=int(row["updated_at"]) if row else None,
        updated_by=str(row["updated_by"]) if row else None,
    )


async def set_lifecycle(
    db: D1Database,
    tenant_id: str,
    update: LifecycleUpdate,
    *,
    default_days: int,
    now_ms: int,
    updated_by: str,
) -> TenantLifecycle:
    """Apply the fields `update` sets (None = back to the default); returns the result."""
    current = await get_lifecycle(db, tenant_id, default_days)
    days = current.episode_retention_days if current.retention_overridden else None
    limit = current.episode_limit if current.limit_overridden else None
    days, limit = (
        {"episode_retention_days": days, "episode_limit": limit}
        | update.model_dump(exclude_unset=True)
    ).values()
    sql = (
        "INSERT INTO tenant_lifecycle (tenant_id, episode_retention_days, episode_limit, "
        "updated_at, updated_by) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE "
        "SET episode_retention_days = excluded.episode_retention_days, "
        "episode_limit = excluded.episode_limit, updated_at = excluded.updated_at, "
        "updated_by = excluded.updated_by"
    )
    await db.prepare(sql).bind(tenant_id, days, limit, now_ms, updated_by[:256]).run()
    return await get_lifecycle(db, tenant_id, default_days)


async def known_tenants(
    db: D1Database,
    tables: Sequence[TenantTable] = ("memory_episodes", "agent_runs"),
) -> list[str]:
    """Every tenant id that has rows in any of `tables`, sorted: the one query not scoped to
    a tenant; one per table, one index seek per tenant (`ids.distinct_tenants_sql`)."""
    found: set[str] = set()
    for table in tables:
        result = await db.prepare(distinct_tenants_sql(table)).all()
        found.update(str(row["tenant_id"]) for row in result.results)
    return sorted(found)


@dataclass(frozen=True, slots=True)
class InstanceReport:
    """What one object reports about itself (sizes in bytes, times in epoch ms)."""

    tenant_id: str
    agent_type: str
    instance_id: str
    storage_bytes: int
    run_log_rows: int
    run_log_bytes: int
    pending_writes: int
    failed_writes: int
    failed_oldest_at: int | None
    last_activity_at: int | None
    cleared_at: int | None
    reported_at: int


async def report_instance(db: D1Database, report: InstanceReport) -> None:
    """Insert or replace the object's row (the newest report wins)."""
    columns = [f.name for f in fields(report)]  # the fields are named as the columns
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns[3:])
    sql = (
        f"INSERT INTO agent_instances ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)}) "
        f"ON CONFLICT (tenant_id, agent_type, instance_id) DO UPDATE SET {updates}"
    )
    await db.prepare(sql).bind(*astuple(report)).run()


async def register_instances(
    db: D1Database, tenant: str, instances: list[tuple[str, str]], now_ms: int
) -> None:
    """Make sure each (agent type, instance id) has a row (zeros until it reports), so it
    stays findable after the runs rows that named it are erased or pruned."""
    sql = (
        "INSERT INTO agent_instances (tenant_id, agent_type, instance_id, reported_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, agent_type, instance_id) DO NOTHING"
    )
    await _each_instance(db, sql, tenant, instances, now_ms)


async def forget_instances(db: D1Database, tenant: str, instances: list[tuple[str, str]]) -> None:
    """Delete the rows of instances that are gone (wiped by a subject erase)."""
    sql = "DELETE FROM agent_instances WHERE tenant_id = ? AND agent_type = ? AND instance_id = ?"
    await _each_instance(db, sql, tenant, instances)


async def _each_instance(
    db: D1Database, sql: str, tenant: str, instances: list[tuple[str, str]], *more: int
) -> None:
    statements = [db.prepare(sql).bind(tenant, *instance, *more) for instance in instances]
    await run_batches(db, statements)


async def tenant_instances(db: D1Database, tenant: str) -> list[tuple[str, str]]:
    """Every (agent type, instance id) of the tenant that D1 knows of, sorted."""
    sql = (
        "SELECT agent_type, instance_id FROM agent_runs WHERE tenant_id = ?1 "
        "UNION SELECT agent_type, instance_id FROM agent_instances WHERE tenant_id = ?1 "
        "ORDER BY agent_type, instance_id"
    )
    result = await db.prepare(sql).bind(tenant).all()
    return [(str(row["agent_type"]), str(row["instance_id"])) for row in result.results]


# The brief's figures from `tenant_lifecycle` (?1 tenant, ?3 the deployment's default
# retention); `RETENTION_DAYS` is the tenant's retention as an SQL expression.
RETENTION_DAYS = (
    "COALESCE((SELECT episode_retention_days FROM tenant_lifecycle WHERE tenant_id = ?1), ?3)"
)
BRIEF_FIGURES = (
    f"{RETENTION_DAYS} AS days, "
    "(SELECT episode_limit FROM tenant_lifecycle WHERE tenant_id = ?1) AS episode_limit"
)


# The tenant's AgentRuntime objects for the brief, named as its `TenantBrief` fields.
INSTANCES_SQL = (
    "SELECT COUNT(*) AS agent_instances, "
    "COALESCE(SUM(storage_bytes), 0) AS agent_storage_bytes_total, "
    "COALESCE(MAX(storage_bytes), 0) AS agent_storage_bytes_max, "
    "COALESCE(MAX(run_log_rows), 0) AS agent_run_log_rows_max, "
    "COALESCE(SUM(pending_writes), 0) AS agent_pending_writes, "
    "COALESCE(SUM(failed_writes), 0) AS agent_failed_writes, "
    "MIN(failed_oldest_at) AS failed_oldest FROM agent_instances WHERE tenant_id = ?"
)
