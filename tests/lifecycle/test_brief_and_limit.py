"""The daily brief, the episode counter, and the 100K hard limit (refuse new episodes)."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3

import pytest

from agent_memory.ids import content_hash
from agent_memory.lifecycle.brief import build_brief
from agent_memory.lifecycle.prune import Pruner
from agent_memory.lifecycle.retention import (
    DEFAULT_EPISODE_LIMIT,
    LifecycleUpdate,
    get_lifecycle,
    set_lifecycle,
)
from agent_memory.tiers.episodic import (
    EPISODE_LIMIT_CODE,
    Episode,
    EpisodeLimitReached,
    EpisodicStore,
    EpisodicWriter,
    FailedWrite,
)
from agent_memory.tiers.semantic.memory import SemanticMemory
from local_runtime.runtime import MIGRATIONS_DIR, LocalRuntime
from tests.lifecycle.conftest import DAY_MS, NOW_MS, count, seed_episodes, ulid_at


def episode(ms: int, run_id: str | None = None) -> Episode:
    return Episode(
        episode_id=ulid_at(ms),
        run_id=run_id or ulid_at(ms),
        agent_type="assistant",
        instance_id="default",
        kind="observation",
        content="hello",
        created_at=ms,
    )


async def limit(rt: LocalRuntime, tenant: str, n: int | None) -> None:
    await set_lifecycle(
        rt.db,
        tenant,
        LifecycleUpdate(episode_limit=n),
        default_days=90,
        now_ms=NOW_MS,
        updated_by="test",
    )


async def test_the_brief_reports_each_tenants_memory(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "t1", [NOW_MS - 100 * DAY_MS, NOW_MS - DAY_MS, NOW_MS])
    await seed_episodes(rt.db, "t2", [NOW_MS])
    memory = SemanticMemory(
        "t1", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    await memory.learn({"content": "Acme prefers email", "subject": "acme"})
    await memory.learn({"content": "Acme is in Berlin", "subject": "acme"})
    await rt.db.prepare(
        "UPDATE semantic_facts SET status = 'pending_vector' WHERE tenant_id = 't1' "
        "AND content = 'Acme is in Berlin'"
    ).run()

    brief = await build_brief(rt.db, now_ms=NOW_MS, default_retention_days=90)

    by_tenant = {t.tenant_id: t for t in brief.tenants}
    t1 = by_tenant["t1"]
    assert (t1.episodes, t1.episodes_past_retention, t1.level) == (3, 1, "ok")
    assert (t1.facts_active, t1.facts_pending_vector) == (1, 1)
    assert (t1.episode_limit, t1.episode_warn_at) == (100_000, 80_000)
    assert by_tenant["t2"].episodes == 1
    assert brief.warnings == []
    assert brief.totals()["episodes"] == 4


async def test_the_brief_warns_at_80_percent_and_flags_the_limit(
    rt: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    await limit(rt, "warm", 10)
    await limit(rt, "full", 10)
    await seed_episodes(rt.db, "warm", [NOW_MS - i for i in range(8)])
    await seed_episodes(rt.db, "full", [NOW_MS - i for i in range(10)])
    await seed_episodes(rt.db, "calm", [NOW_MS])
    with caplog.at_level(logging.WARNING, logger="agent_memory.lifecycle.brief"):
        brief = await build_brief(rt.db, now_ms=NOW_MS, default_retention_days=90)
    levels = {t.tenant_id: t.level for t in brief.tenants}
    assert levels == {"calm": "ok", "warm": "warning", "full": "at_limit"}
    assert len(brief.warnings) == 2
    assert any(
        "full is AT its episode limit" in r.message and r.levelno == logging.ERROR
        for r in caplog.records
    )
    assert any(
        "warm has 8 episodes" in r.message and r.levelno == logging.WARNING for r in caplog.records
    )


async def test_a_tenant_at_its_limit_gets_a_clear_error_and_nothing_is_written(
    rt: LocalRuntime,
) -> None:
    await limit(rt, "t1", 3)
    await seed_episodes(rt.db, "t1", [NOW_MS - 3, NOW_MS - 2, NOW_MS - 1])
    store = EpisodicStore(rt.db, "t1")
    extra = episode(NOW_MS)
    with pytest.raises(EpisodeLimitReached, match=EPISODE_LIMIT_CODE) as caught:
        await store.append_episode(extra)
    assert caught.value.tenant == "t1"
    assert (
        await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = 't1'") == 3
    )
    # Other tenants are not affected.
    await EpisodicStore(rt.db, "t2").append_episode(episode(NOW_MS))


async def test_a_retried_write_of_a_stored_episode_is_not_refused(rt: LocalRuntime) -> None:
    await limit(rt, "t1", 1)
    store = EpisodicStore(rt.db, "t1")
    first = episode(NOW_MS)
    await store.append_episode(first)
    await store.append_episode(first)  # the writer's retry after a lost reply: a no-op
    assert (
        await count(rt.db, "SELECT episodes AS n FROM memory_tenant_stats WHERE tenant_id = 't1'")
        == 1
    )


async def test_the_background_writer_records_a_refused_episode_without_retrying(
    rt: LocalRuntime,
) -> None:
    await limit(rt, "t1", 1)
    await seed_episodes(rt.db, "t1", [NOW_MS - 1])
    failures: list[FailedWrite] = []
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    writer = EpisodicWriter(
        EpisodicStore(rt.db, "t1"), rt.background, on_failure=failures.append, sleep=sleep
    )
    refused = episode(NOW_MS)
    writer.append_episode(refused)
    await writer.flush()
    [failed] = failures
    assert failed.op == "append_episode" and EPISODE_LIMIT_CODE in failed.error
    assert failed.payload["episode_id"] == refused.episode_id  # the payload is kept
    assert sleeps == []  # a permanent refusal is not retried


async def test_pruning_frees_room_under_the_limit(rt: LocalRuntime) -> None:
    await limit(rt, "t1", 2)
    await seed_episodes(rt.db, "t1", [NOW_MS - 100 * DAY_MS, NOW_MS - 1])
    store = EpisodicStore(rt.db, "t1")
    with pytest.raises(EpisodeLimitReached):
        await store.append_episode(episode(NOW_MS))
    await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("job", NOW_MS)
    await store.append_episode(episode(NOW_MS))
    assert (
        await count(rt.db, "SELECT episodes AS n FROM memory_tenant_stats WHERE tenant_id = 't1'")
        == 2
    )


async def test_lowering_and_resetting_a_tenants_settings(rt: LocalRuntime) -> None:
    got = await get_lifecycle(rt.db, "t1", 90)
    assert (got.episode_retention_days, got.episode_limit) == (90, DEFAULT_EPISODE_LIMIT)
    assert not got.retention_overridden
    await set_lifecycle(
        rt.db,
        "t1",
        LifecycleUpdate(episode_retention_days=30),
        default_days=90,
        now_ms=1,
        updated_by="a",
    )
    await limit(rt, "t1", 50)  # leaves the retention override alone
    got = await get_lifecycle(rt.db, "t1", 90)
    assert (got.episode_retention_days, got.episode_limit, got.episode_warn_at) == (30, 50, 40)
    await set_lifecycle(
        rt.db,
        "t1",
        LifecycleUpdate(episode_retention_days=None),
        default_days=90,
        now_ms=2,
        updated_by="b",
    )
    got = await get_lifecycle(rt.db, "t1", 90)
    assert (got.episode_retention_days, got.retention_overridden, got.episode_limit) == (
        90,
        False,
        50,
    )


def test_the_migration_and_the_code_agree_on_the_default_limit() -> None:
    sql = (MIGRATIONS_DIR / "0001_baseline.sql").read_text()
    assert f"{DEFAULT_EPISODE_LIMIT})" in sql.replace("\n", "").replace(" ", "")


@pytest.mark.slow
async def test_the_default_thresholds_hold_at_80k_and_100k(rt: LocalRuntime) -> None:
    """Real sizes: 80 000 episodes warn, 100 000 refuse the next one (seeded straight into
    the local D1 file; the counter triggers run for every row)."""

    await asyncio.to_thread(seed_more, rt, "big", 0, 80_000)
    brief = await build_brief(rt.db, now_ms=NOW_MS, default_retention_days=90)
    assert [(t.episodes, t.level) for t in brief.tenants] == [(80_000, "warning")]
    await asyncio.to_thread(seed_more, rt, "big", 80_000, 100_000)
    brief = await build_brief(rt.db, now_ms=NOW_MS, default_retention_days=90)
    assert [(t.episodes, t.level) for t in brief.tenants] == [(100_000, "at_limit")]
    with pytest.raises(EpisodeLimitReached):
        await EpisodicStore(rt.db, "big").append_episode(episode(NOW_MS + 1))
    assert json.loads(json.dumps(brief.summary()))["tenants_at_limit"] == 1


def seed_more(rt: LocalRuntime, tenant: str, start: int, stop: int) -> None:
    conn = sqlite3.connect(rt.state.d1)
    with conn:
        conn.executemany(
            "INSERT INTO memory_episodes (tenant_id, episode_id, run_id, agent_type, "
            "instance_id, kind, content, data, importance, content_hash, created_at) "
            "VALUES (?, ?, ?, 'assistant', 'default', 'observation', 'x', '{}', 0.5, ?, ?)",
            (
                (tenant, f"{i:026d}", f"{i:026d}", content_hash("x"), NOW_MS - i)
                for i in range(start, stop)
            ),
        )
    conn.close()
