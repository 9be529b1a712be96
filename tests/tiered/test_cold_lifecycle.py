"""The cold tier's lifecycle (the placement table): run and event archives — the `log`
kind — are deleted by the prune once past their cold retention (90 days by default, or as
`MEMORY_PLACEMENT` says); archived episodes stay, readable by key."""

from __future__ import annotations

from agent_memory.hot_warm_cold import ArchiveColdMemory
from agent_memory.lifecycle.prune import Pruner, encode_archive
from agent_memory.namespace import ItemKey
from agent_memory.placement import PlacementTable, parse_placement
from bindings.ports.clock import FixedClock
from local_runtime.runtime import LocalRuntime
from tests.lifecycle.conftest import DAY_MS, count, seed_episodes, seed_run

DAY = 86_400


def pruner(rt: LocalRuntime, placement: PlacementTable | None = None) -> Pruner:
    if placement is None:
        return Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90)
    return Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90, placement=placement)


def now_ms(clock: FixedClock) -> int:
    return int(clock.now() * 1000)


async def ledger(rt: LocalRuntime, kind: str) -> int:
    return await count(rt.db, "SELECT COUNT(*) AS n FROM lifecycle_archives WHERE kind = ?", kind)


async def test_log_archives_expire_after_90_days_and_episodes_stay(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    [episode] = await seed_episodes(rt.db, "acme", [now_ms(clock) - 100 * DAY_MS])
    await seed_run(rt.db, "acme", now_ms(clock) - 100 * DAY_MS)
    first = await pruner(rt).run("week-1", now_ms(clock))
    assert first.complete and first.tenants[0].archives_expired_now == 0
    assert rt.cold.keys("logs/acme/runs/") and rt.cold.keys("archive/acme/episodes/")

    clock.advance(89 * DAY)  # not yet: 89 days in cold
    assert (await pruner(rt).run("week-2", now_ms(clock))).tenants[0].archives_expired_now == 0
    assert rt.cold.keys("logs/acme/runs/")

    clock.advance(2 * DAY)  # 91 days in cold: the log archive goes, with its ledger row
    report = await pruner(rt).run("week-3", now_ms(clock))
    [acme] = report.tenants  # met although it has no rows left, only archives
    assert acme.archives_expired_now == 1 and report.summary()["archives_expired_now"] == 1
    assert rt.cold.keys("logs/acme/") == []
    assert await ledger(rt, "runs") == 0 and await ledger(rt, "episodes") == 1
    key = ItemKey.build("acme", "default", "episode", episode).key
    assert await ArchiveColdMemory(rt.db, rt.cold, rt.clock).download_text(key) is not None


async def test_the_cold_retention_follows_the_placement_override(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    await seed_run(rt.db, "acme", now_ms(clock) - 100 * DAY_MS)
    # An archive written before logs had their own prefix: expired all the same.
    old_key = "archive/acme/events/2025-W01/0000000000001-01J0000000000000000000000A.ndjson.gz"
    await rt.cold.put(old_key, encode_archive([], "events"))
    await (
        rt.db.prepare(
            "INSERT INTO lifecycle_archives (tenant_id, archive_key, kind, iso_week, rows, "
            "matched, first_key, last_key, bytes, prune_id, created_at) "
            "VALUES ('acme', ?, 'events', '2025-W01', 0, 0, '', '', 0, 'old', ?)"
        )
        .bind(old_key, now_ms(clock))
        .run()
    )
    table = parse_placement('{"log": {"cold_retention_days": 30}}')
    await pruner(rt, table).run("week-1", now_ms(clock))
    clock.advance(31 * DAY)
    report = await pruner(rt, table).run("week-2", now_ms(clock))
    assert report.tenants[0].archives_expired_now == 2
    assert rt.cold.keys("logs/acme/") == [] and rt.cold.keys("archive/acme/") == []
    assert await ledger(rt, "runs") == 0 and await ledger(rt, "events") == 0


def test_placement_overrides_are_checked() -> None:
    import pytest

    from agent_memory.placement import PlacementError

    for bad in (
        "[]",
        '{"cart": {}}',
        '{"episode": {"tier": "hot"}}',
        '{"log": {"cold_retention_days": 0}}',
        '{"working": {"ttl_seconds": 900}}',
        '{"episode": {"retention_days": 30}}',
        '{"episode": {"cold_promotes_to_warm": "yes"}}',
        "{",
    ):
        with pytest.raises(PlacementError):
            parse_placement(bad)
    table = parse_placement('{"log": {"cold_retention_days": null}}')
    assert table.placement("log").cold_retention_days is None
    assert table.placement("working").ttl_seconds == 3600
