"""The weekly prune: archive to the cold tier before deleting, bounded batches, per-tenant
retention, and no loss or double count when it is interrupted or runs out of budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from agent_memory.lifecycle.prune import (
    PruneBudget,
    Pruner,
    decode_archive,
    iso_week,
    parse_archive_key,
    resume_unfinished,
    weekly_prune_id,
)
from agent_memory.lifecycle.retention import LifecycleUpdate, set_lifecycle
from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Database, D1Error, D1Result, D1Statement
from bindings.ports.object_store import ObjectInfo, ObjectStore
from local_runtime.runtime import LocalRuntime
from tests.lifecycle.conftest import DAY_MS, NOW_MS, count, seed_episodes, seed_run


def pruner(rt: LocalRuntime, db: D1Database | None = None, **budget: Any) -> Pruner:
    return Pruner(
        db or rt.db,
        rt.cold,
        rt.clock,
        default_retention_days=90,
        budget=PruneBudget(**budget),
    )


async def archived(rt: LocalRuntime, tenant: str, kind: str = "episodes") -> list[dict[str, Any]]:
    """Every row in the tenant's archives of `kind`, in key order."""
    rows: list[dict[str, Any]] = []
    root = "archive" if kind == "episodes" else "logs"  # runs and events are the `log` kind
    for key in rt.cold.keys(f"{root}/{tenant}/{kind}/"):
        body = await rt.cold.get(key)
        assert body is not None
        rows += decode_archive(body.data)
    return rows


async def episodes_left(rt: LocalRuntime, tenant: str) -> int:
    return await count(
        rt.db, "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = ?", tenant
    )


def days_ago(*days: float) -> list[int]:
    return [NOW_MS - int(d * DAY_MS) for d in days]


async def test_old_episodes_and_finished_runs_are_archived_then_deleted(rt: LocalRuntime) -> None:
    old = await seed_episodes(rt.db, "t1", days_ago(120, 110, 100, 95), subject="contact:1")
    recent = await seed_episodes(rt.db, "t1", days_ago(10, 1))
    old_run = await seed_run(rt.db, "t1", days_ago(100)[0])
    stuck = await seed_run(rt.db, "t1", days_ago(100)[0] + 5, status="running")
    new_run = await seed_run(rt.db, "t1", days_ago(2)[0])

    report = await pruner(rt).run(weekly_prune_id(NOW_MS), NOW_MS)

    assert report.complete and report.stopped_by is None
    [t1] = report.tenants
    assert (t1.episodes_deleted, t1.runs_deleted) == (4, 1)
    assert t1.done and t1.retention_days == 90
    left = (
        await rt.db.prepare(
            "SELECT episode_id FROM memory_episodes WHERE tenant_id = ? ORDER BY created_at"
        )
        .bind("t1")
        .all()
    )
    assert [r["episode_id"] for r in left.results] == recent
    runs = await rt.db.prepare("SELECT run_id FROM agent_runs WHERE tenant_id = ?").bind("t1").all()
    assert {r["run_id"] for r in runs.results} == {stuck, new_run}  # running runs stay
    rows = await archived(rt, "t1")
    assert [r["episode_id"] for r in rows] == old
    assert rows[0]["subject"] == "contact:1" and rows[0]["data"] == {"i": 0}  # JSON decoded
    assert rows[0]["content"] == "observed something #0"
    [run_row] = await archived(rt, "t1", "runs")
    assert run_row["run_id"] == old_run and run_row["input"] == {"text": "hello"}


async def test_archives_are_gzip_ndjson_per_tenant_kind_and_iso_week(rt: LocalRuntime) -> None:
    # 120..95 days ago spans several ISO weeks; batch_rows=2 forces several objects per week.
    times = days_ago(120, 119.5, 119, 113, 112, 100)
    await seed_episodes(rt.db, "t1", times)
    report = await pruner(rt, batch_rows=2).run("job", NOW_MS)
    keys = rt.cold.keys("archive/t1/")
    assert report.tenants[0].archives_now == keys
    for key in keys:
        tenant, kind, week = parse_archive_key(key) or ("", "", "")
        assert (tenant, kind) == ("t1", "episodes")
        body = await rt.cold.get(key)
        assert body is not None and body.data[:2] == b"\x1f\x8b"  # gzip
        rows = decode_archive(body.data)
        assert 1 <= len(rows) <= 2
        assert {iso_week(r["created_at"]) for r in rows} == {week}  # never spans two weeks
        assert body.custom_metadata["rows"] == str(len(rows))
    assert sum(t.batches for t in report.tenants) == len(keys)
    ledger = await count(
        rt.db, "SELECT SUM(rows) AS n FROM lifecycle_archives WHERE tenant_id = ?", "t1"
    )
    assert ledger == 6


async def test_each_tenant_uses_its_own_retention(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "t1", days_ago(40))
    await seed_episodes(rt.db, "t2", days_ago(40))
    await set_lifecycle(
        rt.db,
        "t2",
        LifecycleUpdate(episode_retention_days=30),
        default_days=90,
        now_ms=NOW_MS,
        updated_by="test",
    )
    report = await pruner(rt).run("job", NOW_MS)
    by_tenant = {t.tenant_id: t for t in report.tenants}
    assert by_tenant["t1"].episodes_deleted == 0 and by_tenant["t1"].retention_days == 90
    assert by_tenant["t2"].episodes_deleted == 1 and by_tenant["t2"].retention_days == 30
    assert await episodes_left(rt, "t1") == 1
    assert await episodes_left(rt, "t2") == 0


class FailingD1:
    """D1 whose `batch` fails on chosen calls (counting from 1), before doing anything."""

    def __init__(self, inner: D1Database, fail_on: Sequence[int]) -> None:
        self._inner = inner
        self._fail_on = set(fail_on)
        self.batches = 0

    def prepare(self, sql: str) -> D1Statement:
        return self._inner.prepare(sql)

    async def batch(self, statements: Sequence[D1Statement]) -> list[D1Result]:
        self.batches += 1
        if self.batches in self._fail_on:
            raise D1Error("D1_ERROR: Network connection lost.")
        return await self._inner.batch(statements)


async def test_interrupted_between_archive_and_delete_loses_nothing_and_counts_once(
    rt: LocalRuntime,
) -> None:
    old = await seed_episodes(rt.db, "t1", days_ago(120, 119, 118, 117, 116))
    # Batch calls: 1 = job start; 2 = the first archive's delete → fails after its PUT.
    flaky = FailingD1(rt.db, fail_on=[2])
    first = await pruner(rt, flaky, batch_rows=2).run("weekly-x", NOW_MS)
    assert not first.complete
    assert first.tenants[0].error and "Network connection lost" in first.tenants[0].error
    # The archive object was written, nothing was deleted.
    assert len(rt.cold.keys("archive/t1/")) == 1
    assert await episodes_left(rt, "t1") == 5

    second = await pruner(rt, batch_rows=2).run("weekly-x", NOW_MS)
    assert second.complete
    assert second.tenants[0].episodes_deleted == 5  # counted once
    assert await episodes_left(rt, "t1") == 0
    ids = [r["episode_id"] for r in await archived(rt, "t1")]
    assert sorted(ids) == sorted(old) and len(ids) == len(set(ids))  # each row archived once
    assert len(rt.cold.keys("archive/t1/")) == 3  # the interrupted batch's object replaced


async def test_a_failed_archive_write_deletes_nothing(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "t1", days_ago(120, 119))

    class BrokenCold:
        async def put(self, *args: Any, **kwargs: Any) -> ObjectInfo:
            raise OSError("R2 unavailable")

    p = Pruner(rt.db, BrokenCold(), rt.clock, default_retention_days=90)  # type: ignore[arg-type]
    report = await p.run("job", NOW_MS)
    assert report.tenants[0].error and "R2 unavailable" in report.tenants[0].error
    assert not report.complete
    assert await episodes_left(rt, "t1") == 2


async def test_a_row_appearing_inside_the_range_is_archived_before_it_is_deleted(
    rt: LocalRuntime,
) -> None:
    times = days_ago(120, 119)
    await seed_episodes(rt.db, "t1", times)
    inserted: list[str] = []

    class SneakyCold:
        """After the first archive PUT, a late write lands inside the batch's range."""

        def __init__(self, inner: ObjectStore) -> None:
            self.inner = inner

        async def put(self, key: str, data: bytes, **kwargs: Any) -> ObjectInfo:
            info = await self.inner.put(key, data, **kwargs)
            if not inserted:
                inserted.extend(await seed_episodes(rt.db, "t1", [times[0] + 1]))
            return info

    p = Pruner(rt.db, SneakyCold(rt.cold), rt.clock, default_retention_days=90)  # type: ignore[arg-type]
    report = await p.run("job", NOW_MS)
    assert report.complete and report.tenants[0].episodes_deleted == 3
    assert await episodes_left(rt, "t1") == 0
    assert inserted[0] in {r["episode_id"] for r in await archived(rt, "t1")}


async def test_out_of_budget_stops_and_the_next_invocation_finishes_the_same_job(
    rt: LocalRuntime, clock: FixedClock
) -> None:
    await seed_episodes(rt.db, "t1", days_ago(*range(120, 100, -1)))  # 20 old episodes
    await seed_episodes(rt.db, "t2", days_ago(*range(120, 110, -1)))  # 10 old episodes
    # An episode 89 days old: not due at the job's schedule, due 2 days later.
    await seed_episodes(rt.db, "t2", days_ago(89))
    job = weekly_prune_id(NOW_MS)

    first = await pruner(rt, batch_rows=4, max_operations=20).run(job, NOW_MS)
    assert first.stopped_by == "operations" and not first.complete
    assert first.operations <= 20
    done_first = sum(t.episodes_now for t in first.tenants)
    assert 0 < done_first < 30

    clock.advance(2 * 86_400)  # the daily cron resumes two days later
    reports = await resume_unfinished(pruner(rt, batch_rows=4))
    assert reports and reports[-1].complete
    totals = {t.tenant_id: t.episodes_deleted for t in reports[-1].tenants}
    assert totals == {"t1": 20, "t2": 10}  # job totals: exact, nothing counted twice
    # The job kept its cutoff: the 89-day episode was not due when the job was scheduled.
    assert await episodes_left(rt, "t2") == 1
    assert await resume_unfinished(pruner(rt)) == []  # nothing left to resume


async def test_the_time_budget_stops_a_run(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "t1", days_ago(*range(120, 100, -1)))
    ticks = iter(range(10_000))
    p = Pruner(
        rt.db,
        rt.cold,
        rt.clock,
        default_retention_days=90,
        budget=PruneBudget(batch_rows=2, max_seconds=5),
        monotonic=lambda: float(next(ticks)),
    )
    report = await p.run("job", NOW_MS)
    assert report.stopped_by == "time" and not report.complete
    assert 0 < report.tenants[0].episodes_deleted < 20


async def test_running_a_complete_job_again_changes_nothing(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "t1", days_ago(120, 119))
    first = await pruner(rt).run("job", NOW_MS)
    keys = rt.cold.keys()
    again = await pruner(rt).run("job", NOW_MS)
    assert again.complete
    assert [t.episodes_deleted for t in again.tenants] == [
        t.episodes_deleted for t in first.tenants
    ]
    assert sum(t.episodes_now for t in again.tenants) == 0
    assert rt.cold.keys() == keys


async def test_dry_run_counts_what_is_due_and_writes_nothing(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "t1", days_ago(120, 100, 5))
    await seed_run(rt.db, "t1", days_ago(100)[0])
    report = await pruner(rt).dry_run(NOW_MS)
    assert [(t.tenant_id, t.episodes_due, t.runs_due) for t in report.tenants] == [("t1", 2, 1)]
    assert await episodes_left(rt, "t1") == 3
    assert rt.cold.keys() == []
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM lifecycle_prunes") == 0


@pytest.mark.parametrize("batch_rows", [1, 3, 500])
async def test_batches_never_exceed_the_batch_size(rt: LocalRuntime, batch_rows: int) -> None:
    await seed_episodes(rt.db, "t1", days_ago(*[120 - i / 10 for i in range(12)]))
    report = await pruner(rt, batch_rows=batch_rows).run("job", NOW_MS)
    sizes = (
        await rt.db.prepare("SELECT rows AS n FROM lifecycle_archives WHERE tenant_id = ?")
        .bind("t1")
        .all()
    )
    assert all(int(r["n"]) <= batch_rows for r in sizes.results)
    assert report.tenants[0].episodes_deleted == 12


async def test_memory_events_past_retention_are_archived_then_deleted(rt: LocalRuntime) -> None:
    from agent_memory.governance.writes import EventLog, memory_written

    log = EventLog("t1", rt.db)
    old = memory_written(
        tenant_id="t1",
        tier="episodic",
        now=(NOW_MS - 100 * DAY_MS) / 1000,
        content_hash="a" * 64,
        payload={"key": "k"},
    )
    new = memory_written(
        tenant_id="t1", tier="episodic", now=NOW_MS / 1000, content_hash="b" * 64, payload={}
    )
    await log.record(old)
    await log.record(new)
    report = await pruner(rt).run("job", NOW_MS)
    assert report.tenants[0].events_deleted == 1
    [row] = await archived(rt, "t1", "events")
    assert row["event_id"] == old.event_id and row["payload"] == {"key": "k"}
    left = await rt.db.prepare("SELECT event_id FROM memory_events WHERE tenant_id = 't1'").all()
    assert [r["event_id"] for r in left.results] == [new.event_id]
