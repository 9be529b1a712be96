"""Per-tenant lifecycle settings (migration 0004 `tenant_lifecycle`) and the tenant list.

* Episode retention: the deployment default is `Settings.episode_retention_days` (90,
  ADR-043); a tenant may override it (1 to 36 500 days). The weekly prune deletes episodes
  and finished runs older than the tenant's retention.
* Episode limit: 100 000 episodes per tenant (ADR-043's hard limit), which a tenant may
  lower, never raise; the database refuses a new episode at the limit (the trigger
  `memory_episodes_limit`), the daily brief warns at 80 %.

Overrides are set by an operator (`PUT /admin/tenants/{tenant}/lifecycle`, or the CLI); a
NULL column means "the default".

`known_tenants` is the one query here that is not scoped to a tenant: it lists tenant ids
(nothing else) with a loose index scan, one index seek per tenant, one statement per table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.statements import distinct_tenants_sql
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
_TENANT_TABLES = get_args(TenantTable)


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
    row = (
        await db.prepare(
            "SELECT episode_retention_days, episode_limit, updated_at, updated_by "
            "FROM tenant_lifecycle WHERE tenant_id = ?"
        )
        .bind(tenant_id)
        .first()
    )
    days = row.get("episode_retention_days") if row else None
    limit = row.get("episode_limit") if row else None
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
    fields = update.model_fields_set
    days = (
        update.episode_retention_days
        if "episode_retention_days" in fields
        else (current.episode_retention_days if current.retention_overridden else None)
    )
    limit = (
        update.episode_limit
        if "episode_limit" in fields
        else (current.episode_limit if current.limit_overridden else None)
    )
    await (
        db.prepare(
            "INSERT INTO tenant_lifecycle (tenant_id, episode_retention_days, episode_limit, "
            "updated_at, updated_by) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE "
            "SET episode_retention_days = excluded.episode_retention_days, "
            "episode_limit = excluded.episode_limit, updated_at = excluded.updated_at, "
            "updated_by = excluded.updated_by"
        )
        .bind(tenant_id, days, limit, now_ms, updated_by[:256])
        .run()
    )
    return await get_lifecycle(db, tenant_id, default_days)


async def known_tenants(
    db: D1Database,
    tables: Sequence[TenantTable] = ("memory_episodes", "agent_runs"),
) -> list[str]:
    """Every tenant id that has rows in any of `tables`, sorted: one D1 query per table,
    one index seek per tenant (`statements.distinct_tenants_sql`)."""
    found: set[str] = set()
    for table in tables:
        if table not in _TENANT_TABLES:
            raise ValueError(f"not a tenant table: {table}")
        result = await db.prepare(distinct_tenants_sql(table)).all()
        found.update(str(row["tenant_id"]) for row in result.results)
    return sorted(found)
