"""The lifecycle jobs cover every database (issue 29): the weekly prune and the daily brief run
over each shard, and the brief reports each database's size and each index's vectors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from agent_memory.directory import place_tenant
from bindings.ports.clock import FixedClock
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.lifecycle.conftest import DAY_MS, NOW, NOW_MS, count, seed_episodes
from worker.cron import DAILY_BRIEF, WEEKLY_PRUNE, run_scheduled

EPISODES = "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = ?"


async def _runtime(tmp_path: Path, **vars: str) -> LocalRuntime:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(NOW), vars=vars
    )
    await runtime.migrate()
    await place_tenant(runtime.bindings(), "far", "s2")
    return runtime


async def test_the_weekly_prune_archives_the_old_episodes_of_every_database(
    tmp_path: Path,
) -> None:
    runtime = await _runtime(tmp_path)
    old = [NOW_MS - 100 * DAY_MS, NOW_MS - 95 * DAY_MS]
    await seed_episodes(runtime.db, "near", [*old, NOW_MS - DAY_MS])
    await seed_episodes(runtime.shard_db("s2"), "far", [*old, NOW_MS - DAY_MS])

    result = (await run_scheduled(WEEKLY_PRUNE, NOW, runtime.bindings()))["result"]

    assert set(result["prune"]["shards"]) == {"primary", "s2"} and result["prune"]["complete"]
    assert {t["tenant_id"]: t["episodes_deleted"] for t in result["tenants"]} == {
        "near": 2,
        "far": 2,
    }
    assert await count(runtime.db, EPISODES, "near") == 1
    assert await count(runtime.shard_db("s2"), EPISODES, "far") == 1
    assert runtime.cold.keys("archive/far/") and runtime.cold.keys("archive/near/")
    await runtime.close()


async def test_the_daily_brief_reports_every_database_against_its_limit(tmp_path: Path) -> None:
    # Databases of 440 KB: an empty one (its schema, 360 KB) is past 80 %.
    runtime = await _runtime(tmp_path, D1_DATABASE_MAX_BYTES="440000")
    await seed_episodes(runtime.db, "near", [NOW_MS - DAY_MS] * 1)
    await seed_episodes(runtime.shard_db("s2"), "far", [NOW_MS - DAY_MS, NOW_MS - 2 * DAY_MS])

    result = (await run_scheduled(DAILY_BRIEF, NOW, runtime.bindings()))["result"]

    databases = {d["shard"]: d for d in result["databases"]}
    assert set(databases) == {"primary", "s2"}
    for shard, d in databases.items():
        assert d["bytes"] > 0 and d["max_bytes"] == 440_000 and d["vectors"] == 0, shard
        assert d["used"] == round(d["bytes"] / 440_000, 4)
    assert {t["tenant_id"]: t["episodes"] for t in result["tenants"]} == {"near": 1, "far": 2}
    full = [s for s, d in databases.items() if d["used"] >= 0.8]
    assert full, databases
    for shard in full:
        assert any(
            w.startswith(f"shard {shard}: D1 database at") for w in result["brief"]["warnings"]
        )
    await runtime.close()


async def test_the_daily_resume_of_unfinished_prunes_stays_within_the_invocations_budget(
    tmp_path: Path,
) -> None:
    runtime = await _runtime(tmp_path)
    old = [NOW_MS - (100 + i) * DAY_MS for i in range(40)]
    await seed_episodes(runtime.db, "near", old)
    await seed_episodes(runtime.shard_db("s2"), "far", old)
    tight = runtime.settings.model_copy(
        update={"lifecycle_max_operations": 36, "prune_batch_rows": 2}
    )
    weekly = await run_scheduled(WEEKLY_PRUNE, NOW, replace(runtime.bindings(), settings=tight))
    assert weekly["result"]["prune"]["complete"] is False  # both shards left work

    budget = runtime.settings.model_copy(
        update={"lifecycle_max_operations": 40, "prune_batch_rows": 2}
    )
    daily = await run_scheduled(
        DAILY_BRIEF, NOW + 3600, replace(runtime.bindings(), settings=budget)
    )

    resumed = daily["result"]["prune_resumed"]
    assert len(resumed) == 2 and not any(r["complete"] for r in resumed)  # each shard had a go
    assert sum(r["operations"] for r in resumed) <= 40
    await runtime.close()
