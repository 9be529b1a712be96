"""The hot/warm/cold client with hot and warm on workerd (miniflare's real KV and D1): the
generated `namespace_key` column, the prune's `INSERT … SELECT … ON CONFLICT` into the cold
index, the warm read by namespace, and read-repair on real KV. The cold bucket is the local
one (R2 has no simulator in this harness)."""

from __future__ import annotations

import json

from agent_memory.hot_warm_cold import (
    ArchiveColdMemory,
    D1WarmMemory,
    KVHotMemory,
    MemoryBuilder,
    episode_from_item,
    item_text,
)
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.prune import Pruner
from agent_memory.namespace import ItemKey
from agent_memory.tiers.episodic import Episode
from agent_memory.tiers.working import NamespaceFlags, WorkingMemory
from bindings.environment import Bindings

DAY_MS = 86_400_000


async def test_a_conversation_through_kv_and_d1_on_workerd_then_cold(
    mf_bindings: Bindings,
) -> None:
    kv, db, cold, clock = mf_bindings.kv, mf_bindings.db, mf_bindings.cold, mf_bindings.clock
    assert kv is not None and db is not None and cold is not None
    memory = (
        MemoryBuilder()
        .with_hot(KVHotMemory(kv))
        .with_warm(D1WarmMemory(db))
        .with_cold(ArchiveColdMemory(db, cold, clock))
        .with_rules(write_through=True)
        .for_tenant("acme")
        .build()
    )
    now = clock.now()
    turns = [
        Episode(
            episode_id=new_ulid(now + i),
            run_id=new_ulid(now),
            agent_type="assistant",
            instance_id="agent-7",
            kind="message",
            subject="contact:ada",
            content=f"turn {i}",
            created_at=int((now + i) * 1000),
        )
        for i in range(2)
    ]
    keys = [ItemKey.build("acme", "agent-7", "episode", e.episode_id).key for e in turns]
    for key, episode in zip(keys, turns, strict=True):
        await memory.set(key, item_text({**episode.model_dump(), "tenant_id": "acme"}))
        found = await memory.get(key)
        assert found is not None and found.tier == "hot"
    await kv.delete(keys[0])  # the hot copy expired
    found = await memory.get(keys[0])
    assert found is not None and (found.tier, found.promoted_to) == ("warm", ("hot",))
    assert episode_from_item(found.value) == turns[0]
    row = await db.prepare("SELECT namespace_key FROM memory_episodes LIMIT 1").first()
    assert row is not None and row["namespace_key"] == "agent-memory:acme:agent-7"

    later = int(now * 1000) + 100 * DAY_MS
    report = await Pruner(db, cold, clock, default_retention_days=90).run("w", later)
    assert report.complete and report.tenants[0].episodes_deleted == 2
    for key in keys:
        await kv.delete(key)
    found = await memory.get(keys[1])
    assert found is not None and (found.tier, found.promoted_to) == ("cold", ("hot",))
    assert episode_from_item(found.value) == turns[1]


async def test_read_repair_on_workerd_kv(mf_bindings: Bindings) -> None:
    assert mf_bindings.kv is not None
    kv = mf_bindings.kv
    legacy = WorkingMemory(kv, "acme", "agent-7", namespace=NamespaceFlags())
    await legacy.set("plan", {"step": 1})
    dual = WorkingMemory(kv, "acme", "agent-7", namespace=NamespaceFlags(compat_read=True))
    assert await dual.get("plan") == {"step": 1}
    repaired = await kv.get("agent-memory:acme:agent-7:working:plan")
    assert repaired is not None and json.loads(repaired) == {"step": 1}
