"""Tenant placement's D1 mechanics on real workerd (issue 29): the schema read that finds a
tenant's tables, the size D1 reports, and the fence triggers a move relies on."""

from __future__ import annotations

import pytest

from agent_memory.directory import (
    DERIVED_TABLES,
    SIZE_PROBE,
    ensure_fence_triggers,
    holds_tenant,
    set_fence,
    tenant_tables,
)
from bindings.ports.d1 import D1Error, met_fence
from tests.miniflare.adapters import MiniflareD1

pytestmark = pytest.mark.xdist_group("miniflare")

INSERT = (
    "INSERT INTO tenant_lifecycle (tenant_id, episode_retention_days, updated_at, updated_by) "
    "VALUES (?, 30, 1, 'test')"
)


async def test_a_fenced_tenant_cannot_write_and_others_can(mf_migrated_d1: MiniflareD1) -> None:
    db = mf_migrated_d1
    tables = {t.name: t for t in await tenant_tables(db, "workerd")}
    assert {"semantic_facts", "memory_episodes", "memory_events"} <= set(tables)
    assert tables["semantic_facts"].key == ("fts_rowid",)
    assert "oauth_grants" not in tables and "tenant_directory" not in tables
    # D1 reports its size after `run` (the directory's size probe).
    assert (await db.prepare(SIZE_PROBE).run()).meta.size_after > 0

    created = await ensure_fence_triggers(db, "workerd")
    assert created == 3 * len(set(tables) - DERIVED_TABLES)
    await ensure_fence_triggers(db, "workerd")  # idempotent
    await db.prepare(INSERT).bind("stays").run()
    assert await holds_tenant(db, "stays", "workerd")
    assert not await holds_tenant(db, "moving", "workerd")

    await set_fence(db, "moving", "frozen", 1)
    with pytest.raises(D1Error) as refused:
        await db.prepare(INSERT).bind("moving").run()
    assert met_fence(refused.value)
    await db.prepare(INSERT.replace("'test'", "'again'")).bind("other").run()  # not fenced

    # `moved`: the move may delete what it copied, nothing may be written.
    await db.prepare("DELETE FROM tenant_fences WHERE tenant_id = 'stays'").run()
    await set_fence(db, "stays", "frozen", 2)
    with pytest.raises(D1Error):
        await db.prepare("DELETE FROM tenant_lifecycle WHERE tenant_id = 'stays'").run()
    await set_fence(db, "stays", "moved", 3)
    with pytest.raises(D1Error):
        await db.prepare(
            "UPDATE tenant_lifecycle SET episode_retention_days = 1 WHERE tenant_id = 'stays'"
        ).run()
    await db.prepare("DELETE FROM tenant_lifecycle WHERE tenant_id = 'stays'").run()
    assert not await holds_tenant(db, "stays", "workerd")
