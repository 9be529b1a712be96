"""The daily brief's agent-instance figures, read from the rows objects report
(`agent_instances`), per tenant, across batches."""

from __future__ import annotations

import dataclasses
from typing import Any

from agent_memory.lifecycle.brief import build_brief
from agent_memory.lifecycle.retention import InstanceReport, report_instance
from local_runtime.runtime import LocalRuntime
from tests.lifecycle.conftest import NOW_MS, seed_episodes

HOUR_MS = 3_600_000


BASE = InstanceReport(
    tenant_id="-",
    agent_type="assistant",
    instance_id="-",
    storage_bytes=0,
    run_log_rows=0,
    run_log_bytes=0,
    pending_writes=0,
    failed_writes=0,
    failed_oldest_at=None,
    last_activity_at=NOW_MS,
    cleared_at=None,
    reported_at=NOW_MS,
)


def report(tenant: str, instance: str, **figures: Any) -> InstanceReport:
    return dataclasses.replace(BASE, tenant_id=tenant, instance_id=instance, **figures)


async def test_each_tenant_gets_its_own_objects_figures_across_batches(rt: LocalRuntime) -> None:
    tenants = [f"t{i:02d}" for i in range(30)]  # more than one batch of 25
    for index, tenant in enumerate(tenants):
        await seed_episodes(rt.db, tenant, [NOW_MS - 1])
        await report_instance(rt.db, report(tenant, "a", storage_bytes=1000 + index))
    await report_instance(
        rt.db,
        report(
            "t27",
            "b",
            storage_bytes=5000,
            run_log_rows=40,
            failed_writes=2,
            failed_oldest_at=NOW_MS - 3 * HOUR_MS,
            pending_writes=1,
        ),
    )
    await report_instance(
        rt.db,
        report(
            "t27",
            "b",
            storage_bytes=6000,
            run_log_rows=41,
            failed_writes=2,
            failed_oldest_at=NOW_MS - 3 * HOUR_MS,
        ),
    )

    brief = await build_brief(rt.db, now_ms=NOW_MS, default_retention_days=90)

    by_tenant = {t.tenant_id: t for t in brief.tenants}
    assert [t.tenant_id for t in brief.tenants] == tenants
    assert by_tenant["t03"].agent_instances == 1
    assert by_tenant["t03"].agent_storage_bytes_total == 1003
    assert by_tenant["t03"].agent_failed_writes == 0
    assert by_tenant["t03"].agent_failed_oldest_age_ms is None
    t27 = by_tenant["t27"]  # in the second batch; its second object re-reported (upsert)
    assert (t27.agent_instances, t27.agent_storage_bytes_total) == (2, 1027 + 6000)
    assert (t27.agent_storage_bytes_max, t27.agent_run_log_rows_max) == (6000, 41)
    assert (t27.agent_failed_writes, t27.agent_pending_writes) == (2, 0)
    assert t27.agent_failed_oldest_age_ms == 3 * HOUR_MS
    assert brief.totals()["agent_failed_writes"] == 2
    [warning] = [w for w in brief.warnings if "failed for good" in w]
    assert warning.startswith("tenant t27: 2 episodic write(s)") and "3.0 h old" in warning
