"""The hot/warm/cold client over the local runtime's real stores: KV (hot), D1 (warm) and the
cold bucket with its index (cold); one conversation walked through all three."""

from __future__ import annotations

import gzip
import json

import pytest

from agent_memory.governance.personal_data import PersonalData
from agent_memory.hot_warm_cold import (
    ArchiveColdMemory,
    D1WarmMemory,
    KVHotMemory,
    MemoryBuilder,
    MemoryClient,
    PersonalDataInHot,
    episode_from_item,
    item_text,
    open_episode_item,
)
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.prune import Pruner, weekly_prune_id
from agent_memory.namespace import InvalidNamespaceKey, ItemKey, NamespaceForbidden
from agent_memory.tiers.episodic import Episode
from bindings.ports.clock import FixedClock
from local_runtime.runtime import LocalRuntime

DAY = 86_400
TENANT, AGENT = "acme", "agent-7"


def client(rt: LocalRuntime, **rules: object) -> MemoryClient:
    return (
        MemoryBuilder()
        .with_hot(KVHotMemory(rt.kv))
        .with_warm(D1WarmMemory(rt.db, PersonalData.from_bindings(rt.bindings(), TENANT)))
        .with_cold(ArchiveColdMemory(rt.db, rt.cold, rt.clock))
        .with_rules(**rules)  # type: ignore[arg-type]
        .for_tenant(TENANT)
        .build()
    )


def conversation(clock: FixedClock, n: int = 3, **data: object) -> list[Episode]:
    run_id = new_ulid(clock.now())
    out = []
    for i, kind in enumerate(("message", "action", "outcome")[:n]):
        at = clock.now() + i
        out.append(
            Episode(
                episode_id=new_ulid(at),
                run_id=run_id,
                agent_type="assistant",
                instance_id=AGENT,
                kind=kind,
                subject="contact:ada",
                content=f"turn {i} of the conversation",
                data={"turn": i, **data},
                created_at=int(at * 1000),
            )
        )
    return out


def key(episode: Episode, tenant: str = TENANT) -> str:
    return ItemKey.build(tenant, episode.instance_id, "episode", episode.episode_id).key


def text(episode: Episode) -> str:
    return item_text({**episode.model_dump(), "tenant_id": TENANT})


async def in_hot(rt: LocalRuntime, episode: Episode) -> bool:
    return await rt.kv.get(key(episode)) is not None


async def test_one_conversation_walks_hot_warm_cold_and_reads_back_from_each(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    memory = client(rt, write_through=True, hot_ttl=600)
    turns = conversation(clock)
    for episode in turns:
        assert await memory.set(key(episode), text(episode)) == "warm"

    # Hot: write-through left a copy in KV; reads are served from it.
    for episode in turns:
        read = await memory.get(key(episode))
        assert read is not None and read.tier == "hot"
        assert episode_from_item(read.value) == episode

    # Warm: the hot copies expire (600 s TTL); the next read comes from D1 and promotes.
    clock.advance(601)
    assert not await in_hot(rt, turns[0])
    read = await memory.get(key(turns[0]))
    assert read is not None and (read.tier, read.promoted_to) == ("warm", ("hot",))
    assert episode_from_item(read.value) == turns[0]
    assert await in_hot(rt, turns[0])
    again = await memory.get(key(turns[0]))
    assert again is not None and again.tier == "hot"

    # Cold: 100 days on, the weekly prune demotes the conversation to R2 (the hot copies
    # long expired); it is gone from D1 but every turn stays readable by key.
    clock.advance(100 * DAY)
    now_ms = int(clock.now() * 1000)
    pruner = Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90)
    report = await pruner.run(weekly_prune_id(now_ms), now_ms)
    assert report.complete and report.tenants[0].episodes_deleted == 3
    assert await D1WarmMemory(rt.db).read(key(turns[1])) is None
    for episode in turns:
        read = await memory.get(key(episode))
        assert read is not None and (read.tier, read.promoted_to) == ("cold", ("hot",))
        assert episode_from_item(read.value) == episode
        hot = await memory.get(key(episode))  # promoted: the next read is hot
        assert hot is not None and hot.tier == "hot"
    # Promotion from cold skips warm (episodes: `cold_promotes_to_warm` is false).
    assert await D1WarmMemory(rt.db).read(key(turns[1])) is None

    # The subject's archived history lists the conversation, newest first.
    cold = ArchiveColdMemory(rt.db, rt.cold, rt.clock)
    page = await cold.history(
        TENANT, namespace=ItemKey.parse(key(turns[0])).namespace, subject="contact:ada"
    )
    assert [i.entity_id for i in page.items] == [e.episode_id for e in reversed(turns)]


async def test_reads_without_fallback_or_promotion_follow_the_rules(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    [episode] = conversation(clock, 1)
    await client(rt).set(key(episode), text(episode))
    assert not await in_hot(rt, episode)  # no write-through: only the kind's tier
    assert await client(rt, read_fallback=False).get(key(episode)) is None
    read = await client(rt, promote_on_read=False).get(key(episode))
    assert read is not None and read.tier == "warm" and read.promoted_to == ()
    assert not await in_hot(rt, episode)


async def test_a_write_without_write_through_drops_a_stale_hot_copy(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    [episode] = conversation(clock, 1)
    memory = client(rt)
    await rt.kv.put(key(episode), "stale copy")
    await memory.set(key(episode), text(episode))
    read = await memory.get(key(episode))
    assert read is not None and read.tier == "warm"


async def test_personal_items_never_reach_hot(rt: LocalRuntime, clock: FixedClock) -> None:
    [episode] = conversation(clock, 1, email="ada@example.com", _personal=["email"])
    memory = client(rt, write_through=True)
    await memory.set(key(episode), text(episode))
    assert not await in_hot(rt, episode)  # write-through skipped
    personal = PersonalData.from_bindings(rt.bindings(), TENANT)
    read = await memory.get(key(episode))
    assert read is not None and read.tier == "warm" and read.promoted_to == ()
    assert "ada@example.com" not in read.value  # the warm tier holds ciphertext
    assert (await open_episode_item(read.value, personal)).data["email"] == "ada@example.com"
    assert not await in_hot(rt, episode)  # promotion skipped
    clock.advance(100 * DAY)
    now_ms = int(clock.now() * 1000)
    await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("job", now_ms)
    read = await memory.get(key(episode))
    assert read is not None and read.tier == "cold" and read.promoted_to == ()
    assert "ada@example.com" not in read.value  # archived as stored: ciphertext
    assert (await open_episode_item(read.value, personal)).data["email"] == "ada@example.com"
    assert not await in_hot(rt, episode)
    working = ItemKey.build(TENANT, AGENT, "working", "contact").key
    with pytest.raises(PersonalDataInHot):
        await memory.set(working, json.dumps({"email": "x@example.com", "_personal": True}))
    assert await rt.kv.get(working) is None


async def test_keys_are_checked_and_bound_to_the_tenant(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    [episode] = conversation(clock, 1)
    memory = client(rt)
    for bad in (
        "agent-memory:acme:agent-7:episode:",
        "agent-memory:acme::episode:x",
        "agent-memory:acme:agent-7:episode:*",
        "agent-memory:acme:agent-7:episode:a%b",
        "agent-memory/acme/agent-7/episode/x",
        "agent-memory:acme:agent-7:cart:active",  # a kind the placement table does not know
    ):
        with pytest.raises(InvalidNamespaceKey):
            await memory.set(bad, text(episode))
    with pytest.raises(NamespaceForbidden):
        await memory.get(key(episode, tenant="globex"))
    with pytest.raises(NamespaceForbidden):
        await memory.set(key(episode, tenant="globex"), text(episode))
    assert await rt.db.prepare("SELECT COUNT(*) AS n FROM memory_episodes").first_value("n") == 0


async def test_delete_reaches_every_tier(rt: LocalRuntime, clock: FixedClock) -> None:
    first, second = conversation(clock, 2)
    memory = client(rt, write_through=True)
    for episode in (first, second):
        await memory.set(key(episode), text(episode))
    clock.advance(100 * DAY)
    now_ms = int(clock.now() * 1000)
    await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("job", now_ms)
    assert (await memory.get(key(first))) is not None  # promoted to hot again
    await memory.delete(key(first))
    assert await memory.get(key(first)) is None
    read = await memory.get(key(second))  # its archive neighbour is untouched
    assert read is not None and episode_from_item(read.value) == second


async def test_erase_reaches_cold_items_their_index_and_hot_copies(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    from agent_memory.lifecycle.erase import SubjectEraser

    ada = conversation(clock, 2)
    [bob] = [
        e.model_copy(update={"subject": "contact:bob", "episode_id": new_ulid(clock.now() + 9)})
        for e in conversation(clock, 1)
    ]
    memory = client(rt)
    for episode in (*ada, bob):
        await memory.set(key(episode), text(episode))
    clock.advance(100 * DAY)
    now_ms = int(clock.now() * 1000)
    await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("job", now_ms)
    for episode in (*ada, bob):  # promoted to hot under their canonical keys
        assert (await memory.get(key(episode))) is not None
        assert await in_hot(rt, episode)

    eraser = SubjectEraser(TENANT, db=rt.db, clock=rt.clock, kv=rt.kv, cold=rt.cold)
    report = await eraser.erase("contact:ada")
    assert report.complete and report.archived_rows["episodes"] == 2

    for episode in ada:
        assert not await in_hot(rt, episode)
        assert await memory.get(key(episode)) is None
    index = await rt.db.prepare("SELECT entity_id FROM cold_items").all()
    assert [r["entity_id"] for r in index.results] == [bob.episode_id]
    read = await client(rt).get(key(bob))
    assert read is not None and episode_from_item(read.value) == bob
    for name in rt.cold.keys(""):  # no archive object or key names the erased subject
        body = await rt.cold.get(name)
        assert body is not None and b"contact:ada" not in gzip.decompress(body.data)


def test_the_migrations_namespace_column_uses_the_service_of_the_key_grammar() -> None:
    from agent_memory.namespace import SERVICE
    from tests.conftest import PROJECT_ROOT

    migration = (PROJECT_ROOT / "migrations" / "0001_baseline.sql").read_text()
    assert f"GENERATED ALWAYS AS ('{SERVICE}:' || tenant_id || ':' || instance_id)" in migration
