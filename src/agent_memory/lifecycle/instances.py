"""AgentRuntime instances as D1 sees them: the `agent_instances` rows (migration 0012).

A Durable Object's storage is only reachable through the object, and the crons never call
one (DESIGN invariant 3). So each object reports a small row about itself when its alarm
runs (`agent_runtime_do.lifecycle`): `report_instance` upserts it. From those rows

* the daily brief shows per-object storage and the episodic writes objects still hold
  (`tenant_instance_figures`);
* the subject eraser finds every instance of a tenant (`tenant_instances`), together with
  the instances named by the tenant's `agent_runs` rows (an instance that ran but has not
  reported yet).

Every statement is `tenant_id = ?` first. Rows hold ids, counts and times only.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_memory.statements import STATEMENTS_PER_BATCH, chunks
from bindings.ports.d1 import D1Database


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


@dataclass(frozen=True, slots=True)
class InstanceFigures:
    """A tenant's instances, summed for the brief."""

    instances: int = 0
    storage_bytes_total: int = 0
    storage_bytes_max: int = 0
    run_log_rows_max: int = 0
    pending_writes: int = 0
    failed_writes: int = 0
    failed_oldest_at: int | None = None


async def report_instance(db: D1Database, report: InstanceReport) -> None:
    """Insert or replace the object's row (the newest report wins)."""
    await (
        db.prepare(
            "INSERT INTO agent_instances (tenant_id, agent_type, instance_id, storage_bytes, "
            "run_log_rows, run_log_bytes, pending_writes, failed_writes, failed_oldest_at, "
            "last_activity_at, cleared_at, reported_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, agent_type, instance_id) DO UPDATE SET "
            "storage_bytes = excluded.storage_bytes, run_log_rows = excluded.run_log_rows, "
            "run_log_bytes = excluded.run_log_bytes, pending_writes = excluded.pending_writes, "
            "failed_writes = excluded.failed_writes, "
            "failed_oldest_at = excluded.failed_oldest_at, "
            "last_activity_at = excluded.last_activity_at, cleared_at = excluded.cleared_at, "
            "reported_at = excluded.reported_at"
        )
        .bind(
            report.tenant_id,
            report.agent_type,
            report.instance_id,
            report.storage_bytes,
            report.run_log_rows,
            report.run_log_bytes,
            report.pending_writes,
            report.failed_writes,
            report.failed_oldest_at,
            report.last_activity_at,
            report.cleared_at,
            report.reported_at,
        )
        .run()
    )


async def register_instances(
    db: D1Database, tenant: str, instances: list[tuple[str, str]], now_ms: int
) -> None:
    """Make sure each (agent type, instance id) has a row (zeros until it reports), so it
    stays findable after the runs rows that named it are erased or pruned."""
    statements = [
        db.prepare(
            "INSERT INTO agent_instances (tenant_id, agent_type, instance_id, reported_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, agent_type, instance_id) DO NOTHING"
        ).bind(tenant, agent_type, instance_id, now_ms)
        for agent_type, instance_id in instances
    ]
    for batch in chunks(statements, STATEMENTS_PER_BATCH):
        await db.batch(list(batch))


async def tenant_instances(db: D1Database, tenant: str) -> list[tuple[str, str]]:
    """Every (agent type, instance id) of the tenant that D1 knows of, sorted."""
    result = await (
        db.prepare(
            "SELECT agent_type, instance_id FROM agent_runs WHERE tenant_id = ?1 "
            "UNION SELECT agent_type, instance_id FROM agent_instances WHERE tenant_id = ?1 "
            "ORDER BY agent_type, instance_id"
        )
        .bind(tenant)
        .all()
    )
    return [(str(row["agent_type"]), str(row["instance_id"])) for row in result.results]


INSTANCE_FIGURES_SQL = (
    "SELECT COUNT(*) AS instances, COALESCE(SUM(storage_bytes), 0) AS storage_total, "
    "COALESCE(MAX(storage_bytes), 0) AS storage_max, "
    "COALESCE(MAX(run_log_rows), 0) AS run_log_max, "
    "COALESCE(SUM(pending_writes), 0) AS pending, COALESCE(SUM(failed_writes), 0) AS failed, "
    "MIN(failed_oldest_at) AS failed_oldest FROM agent_instances WHERE tenant_id = ?"
)


def instance_figures(row: dict[str, object]) -> InstanceFigures:
    """`InstanceFigures` from a row of `INSTANCE_FIGURES_SQL`."""

    def number(key: str) -> int:
        value = row.get(key)
        return int(value) if isinstance(value, int | float) else 0

    oldest = row.get("failed_oldest")
    return InstanceFigures(
        instances=number("instances"),
        storage_bytes_total=number("storage_total"),
        storage_bytes_max=number("storage_max"),
        run_log_rows_max=number("run_log_max"),
        pending_writes=number("pending"),
        failed_writes=number("failed"),
        failed_oldest_at=int(oldest) if isinstance(oldest, int | float) else None,
    )


async def tenant_instance_figures(db: D1Database, tenant: str) -> InstanceFigures:
    """The tenant's instance figures (one statement)."""
    result = await db.prepare(INSTANCE_FIGURES_SQL).bind(tenant).all()
    return instance_figures(result.results[0] if result.results else {})
