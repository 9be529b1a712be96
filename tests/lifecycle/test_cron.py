"""The lifecycle crons end to end: the weekly prune through the local server's scheduled
route (as `wrangler dev` triggers it), and the daily brief resuming an unfinished prune."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import httpx

from agent_memory.lifecycle.prune import decode_archive
from bindings.ports.clock import FixedClock
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from tests.lifecycle.conftest import DAY_MS, NOW, NOW_MS, count, seed_episodes
from worker.cron import DAILY_BRIEF, WEEKLY_PRUNE, run_scheduled
from worker.identity import ACCESS_HEADER


async def scheduled_over_http(
    runtime: LocalRuntime, cron: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """Trigger `cron` at `NOW_MS` through the local server's scheduled route, as the dev
    operator unless `headers` say otherwise."""
    if headers is None:
        token = mint_token(runtime.state.access, "operator@localhost", now=runtime.clock.now())
        headers = {ACCESS_HEADER: token}

    def call() -> httpx.Response:
        with running_server(runtime) as base:
            return httpx.get(
                f"{base}/cdn-cgi/handler/scheduled",
                params={"cron": cron, "time": str(NOW_MS)},
                headers=headers,
                timeout=60,
            )

    return await asyncio.to_thread(call)


async def test_the_scheduled_route_runs_nothing_without_a_platform_admins_header(
    tmp_path: Path,
) -> None:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(NOW)
    )
    await runtime.migrate()
    await seed_episodes(runtime.db, "acme", [NOW_MS - 100 * DAY_MS])
    now = runtime.clock.now()
    eve = mint_token(runtime.state.access, "eve@example.com", now=now)
    ops = mint_token(runtime.state.access, "ops@example.com", now=now)
    refusals = {
        "nothing": (await scheduled_over_http(runtime, WEEKLY_PRUNE, {})),
        # A cross-site page can make a browser send its cookies with a GET, not a header.
        "cookie": (
            await scheduled_over_http(runtime, WEEKLY_PRUNE, {"cookie": f"CF_Authorization={ops}"})
        ),
        "forged": (
            await scheduled_over_http(runtime, WEEKLY_PRUNE, {ACCESS_HEADER: ops[:-4] + "AAAA"})
        ),
        "no admin": (await scheduled_over_http(runtime, WEEKLY_PRUNE, {ACCESS_HEADER: eve})),
    }
    assert {name: (r.status_code, r.json()["error"]["code"]) for name, r in refusals.items()} == {
        "nothing": (401, "access_token_missing"),
        "cookie": (401, "access_token_missing"),
        "forged": (403, "access_token_invalid"),
        "no admin": (403, "tenant_forbidden"),
    }
    episodes = "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = 'acme'"
    assert await count(runtime.db, episodes) == 1  # the prune never ran
    allowed = await scheduled_over_http(runtime, WEEKLY_PRUNE, {ACCESS_HEADER: ops})
    assert allowed.status_code == 200 and await count(runtime.db, episodes) == 0
    await runtime.close()


async def test_weekly_cron_over_http_prunes_and_reports_per_tenant(tmp_path: Path) -> None:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(NOW)
    )
    await runtime.migrate()
    old = await seed_episodes(runtime.db, "acme", [NOW_MS - 100 * DAY_MS, NOW_MS - 95 * DAY_MS])
    await seed_episodes(runtime.db, "acme", [NOW_MS - DAY_MS])
    await seed_episodes(runtime.db, "globex", [NOW_MS - 200 * DAY_MS])

    response = await scheduled_over_http(runtime, WEEKLY_PRUNE)
    assert response.status_code == 200
    body = response.json()
    assert body["cron"] == WEEKLY_PRUNE and body["job"] == "weekly_prune"
    result = body["result"]
    assert result["prune"]["prune_id"] == "weekly-2025-W24" and result["prune"]["complete"]
    counts = {t["tenant_id"]: t["episodes_deleted"] for t in result["tenants"]}
    assert counts == {"acme": 2, "globex": 1}
    archived = []
    for key in runtime.cold.keys("archive/acme/"):
        got = await runtime.cold.get(key)
        assert got is not None
        archived += [row["episode_id"] for row in decode_archive(got.data)]
    assert archived == old
    await runtime.close()


async def test_daily_cron_briefs_and_finishes_an_interrupted_weekly_prune(
    rt: LocalRuntime,
) -> None:
    await seed_episodes(rt.db, "t1", [NOW_MS - (100 + i) * DAY_MS for i in range(12)])
    small = rt.bindings()
    # A weekly invocation whose budget runs out part-way.
    # 18 operations for each of the two shards' prunes (the invocation's budget is shared).
    tight = rt.settings.model_copy(update={"lifecycle_max_operations": 36, "prune_batch_rows": 2})
    weekly = await run_scheduled(WEEKLY_PRUNE, NOW, dataclasses.replace(small, settings=tight))
    assert weekly["result"]["prune"]["complete"] is False
    left = await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = 't1'")
    assert 0 < left < 12

    daily = await run_scheduled(DAILY_BRIEF, NOW + 3 * 3600, small)
    result = daily["result"]
    assert result["brief"]["tenants"] == 1
    assert [t["episodes_past_retention"] for t in result["tenants"]] == [left]
    [resumed] = result["prune_resumed"]
    assert resumed["complete"] and resumed["prune_id"] == "weekly-2025-W24"
    assert resumed["episodes_deleted"] == 12
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 0


async def test_crons_report_missing_bindings_instead_of_failing(rt: LocalRuntime) -> None:
    bindings = dataclasses.replace(rt.bindings(), cold=None)
    result = await run_scheduled(WEEKLY_PRUNE, NOW, bindings)
    assert result["result"] == {"ran": False, "missing_bindings": ["COLD"]}
