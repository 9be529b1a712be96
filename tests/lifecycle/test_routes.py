"""The lifecycle admin routes over the Worker's handler: Access first, then path and body,
then the same effects as the CLI and the crons."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.lifecycle.conftest import DAY_MS, NOW_MS, count, seed_episodes
from worker.app import handle


async def call(
    rt: LocalRuntime, method: str, path: str, body: Any = None, *, token: bool = True
) -> tuple[int, Any]:
    auth = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now()) if token else None
    response = await handle(build_request(method, path, body, token=auth), rt.bindings())
    return response.status, json.loads(response.body)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/tenants/acme/lifecycle"),
        ("PUT", "/admin/tenants/acme/lifecycle"),
        ("POST", "/admin/tenants/acme/prune"),
        ("POST", "/admin/tenants/acme/reconcile"),
        ("DELETE", "/admin/tenants/acme/subjects/contact%3Aada"),
    ],
)
async def test_every_lifecycle_route_needs_access(rt: LocalRuntime, method: str, path: str) -> None:
    status, body = await call(rt, method, path, {"episode_retention_days": 1}, token=False)
    assert status == 401 and body["error"]["code"] == "access_token_missing"


async def test_settings_can_be_read_overridden_and_reset(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "acme", [NOW_MS - 40 * DAY_MS, NOW_MS])
    status, body = await call(rt, "GET", "/admin/tenants/acme/lifecycle")
    assert status == 200
    assert body["settings"]["episode_retention_days"] == 90
    assert body["brief"]["episodes"] == 2 and body["brief"]["episodes_past_retention"] == 0

    status, body = await call(
        rt, "PUT", "/admin/tenants/acme/lifecycle", {"episode_retention_days": 30}
    )
    assert status == 200 and body["settings"]["retention_overridden"]
    assert body["settings"]["updated_by"] == "ops@example.com"
    _, body = await call(rt, "GET", "/admin/tenants/acme/lifecycle")
    assert body["brief"]["episodes_past_retention"] == 1

    status, body = await call(
        rt, "PUT", "/admin/tenants/acme/lifecycle", {"episode_retention_days": None}
    )
    assert body["settings"]["episode_retention_days"] == 90


@pytest.mark.parametrize(
    "body",
    [{"episode_retention_days": 0}, {"episode_limit": 100_001}, {"retention": 3}, [1]],
)
async def test_bad_settings_are_refused_and_change_nothing(rt: LocalRuntime, body: Any) -> None:
    status, answer = await call(rt, "PUT", "/admin/tenants/acme/lifecycle", body)
    assert status == 422 and answer["error"]["code"] == "validation_error"
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM tenant_lifecycle") == 0


async def test_prune_one_tenant_now_with_a_dry_run_first(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "acme", [NOW_MS - 100 * DAY_MS, NOW_MS - 99 * DAY_MS, NOW_MS])
    await seed_episodes(rt.db, "globex", [NOW_MS - 100 * DAY_MS])
    status, body = await call(rt, "POST", "/admin/tenants/acme/prune", {"dry_run": True})
    assert status == 200 and body["prune"]["dry_run"]
    assert [(t["tenant_id"], t["episodes_due"]) for t in body["tenants"]] == [("acme", 2)]
    status, body = await call(rt, "POST", "/admin/tenants/acme/prune")
    assert status == 200 and body["prune"]["complete"]
    assert body["tenants"][0]["episodes_deleted"] == 2
    assert (
        await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = 'globex'")
        == 1
    )
    # The operator's job is complete: the daily cron has nothing to resume.
    assert (
        await count(rt.db, "SELECT COUNT(*) AS n FROM lifecycle_prunes WHERE status = 'running'")
        == 0
    )


async def test_bad_paths_are_refused(rt: LocalRuntime) -> None:
    status, body = await call(rt, "GET", "/admin/tenants/Not_Valid!/lifecycle")
    assert status == 422 and body["error"]["code"] == "invalid_path"
    status, body = await call(rt, "POST", "/admin/tenants/acme/prune", {"dry_run": "maybe"})
    assert status == 422


@pytest.mark.parametrize("dry_run", [0, "false", "no"])
async def test_a_dry_run_that_is_not_a_boolean_is_refused_not_run(
    rt: LocalRuntime, dry_run: Any
) -> None:
    """Issue 26: `{"dry_run": 0}` ran a real prune (0 coerced to false)."""
    await seed_episodes(rt.db, "acme", [NOW_MS - 100 * DAY_MS])
    status, body = await call(rt, "POST", "/admin/tenants/acme/prune", {"dry_run": dry_run})
    assert status == 422 and body["error"]["code"] == "validation_error"
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 1
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM lifecycle_prunes") == 0
