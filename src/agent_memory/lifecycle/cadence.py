"""ADR-0051's write cadence for the reconciler: after N new facts of a tenant (default 20),
a reconcile run is scheduled in the background (`waitUntil`), besides the daily cron and
`agent-memory reconcile` / the admin route on demand.

`note_writes(db, tenant, created, every)` counts a tenant's new facts in
`reconcile_state.writes_since_run` (migration 0005) and returns True exactly once per N:
the counter is reset by the same guarded UPDATE that claims the run, so two concurrent
writers cannot both schedule one. The caller (the edge, `worker.lifecycle_jobs`) then runs
the reconciler with `BackgroundTasks.wait_until`, never on the request itself.
"""

from __future__ import annotations

from bindings.ports.d1 import D1Database

DEFAULT_RECONCILE_EVERY_WRITES = 20


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
