"""Background work (`Bindings.background.wait_until`) from a Worker and from a Durable Object.

workerd patches `waitUntil` to take Python awaitables only on a Worker's ExecutionContext;
a Durable Object's state is left as is, and its `waitUntil` then-s its argument in a later
microtask, after Pyodide has destroyed the borrowed proxy of a coroutine passed to it
(models.mjs). Both contexts are built the way the SDK builds them: through a real
`WorkerEntrypoint` / `DurableObject` subclass, whose wrapped constructor calls
`patchWaitUntil` and wraps a Durable Object's state in `DurableObjectContext`.
"""

from __future__ import annotations

from typing import Any

import harness_js
from support import unique
from workers import DurableObject, WorkerEntrypoint

from bindings.cloudflare.background import CloudflareBackgroundTasks
from bindings.cloudflare.d1 import CloudflareD1Database


class ProbeObject(DurableObject):  # type: ignore[misc]
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)


class ProbeWorker(WorkerEntrypoint):  # type: ignore[misc]
    pass


async def _table(db: CloudflareD1Database) -> str:
    table = unique("bg").replace("-", "_")
    await db.prepare(f"CREATE TABLE {table} (kind TEXT)").run()
    return table


async def _schedule_writes(ctx: Any, db: CloudflareD1Database, table: str) -> list[str]:
    """An episodic write and its memory_written event, scheduled like the tiers do; then the
    end of the invocation (the runtime waits for waitUntil work). Returns JS-side errors."""
    background = CloudflareBackgroundTasks(ctx)

    async def write(kind: str) -> None:
        await db.prepare(f"INSERT INTO {table} (kind) VALUES (?)").bind(kind).run()

    background.wait_until(write("episode"))
    background.wait_until(write("memory_written"))
    return list((await ctx._ctx.drain() if hasattr(ctx, "_ctx") else await ctx.drain()).to_py())


async def _kinds(db: CloudflareD1Database, table: str) -> list[str]:
    rows = (await db.prepare(f"SELECT kind FROM {table} ORDER BY kind").all()).results
    return [row["kind"] for row in rows]


async def test_work_scheduled_inside_a_durable_object_reaches_d1() -> None:
    db = CloudflareD1Database(harness_js.env.DB)
    table = await _table(db)
    state = harness_js.newDurableObjectState(harness_js.newStorage())
    obj = ProbeObject(state, harness_js.env)
    errors = await _schedule_writes(obj.ctx, db, table)
    assert errors == [], errors
    assert await _kinds(db, table) == ["episode", "memory_written"]


async def test_work_scheduled_from_a_worker_invocation_reaches_d1() -> None:
    db = CloudflareD1Database(harness_js.env.DB)
    table = await _table(db)
    ctx = harness_js.newExecutionContext()
    worker = ProbeWorker(ctx, harness_js.env)
    errors = await _schedule_writes(worker.ctx, db, table)
    assert errors == [], errors
    assert await _kinds(db, table) == ["episode", "memory_written"]


async def test_failed_background_work_is_reported_not_lost() -> None:
    state = harness_js.newDurableObjectState(harness_js.newStorage())
    obj = ProbeObject(state, harness_js.env)

    async def boom() -> None:
        raise RuntimeError("write failed")

    CloudflareBackgroundTasks(obj.ctx).wait_until(boom())
    errors = list((await state.drain()).to_py())
    assert len(errors) == 1 and "write failed" in errors[0], errors


async def _drain(ctx: Any) -> list[str]:
    js_ctx = getattr(ctx, "_ctx", ctx)  # the SDK wraps a Durable Object's state
    return [str(message) for message in (await js_ctx.drain()).to_py()]


async def test_wait_until_outcomes_by_context_and_scheduling() -> dict[str, Any]:
    """The pin for the fake's waitUntil: this table must equal the fake's (pytest side)."""
    import scenario_wait_until

    table = await scenario_wait_until.run(
        lambda: harness_js.newDurableObjectState(harness_js.newStorage()),
        harness_js.newExecutionContext,
        harness_js.env,
        _drain,
    )
    # A coroutine handed straight to a Durable Object's waitUntil never runs: the defect.
    assert table["durable_object/coroutine"] == {"ran": False, "borrowed_proxy_error": True}
    # The patched ExecutionContext takes it, and the adapter works everywhere.
    assert table["worker/coroutine"] == {"ran": True, "borrowed_proxy_error": False}
    assert (
        table["durable_object/adapter"]
        == table["worker/adapter"]
        == {
            "ran": True,
            "borrowed_proxy_error": False,
        }
    )
    return table
