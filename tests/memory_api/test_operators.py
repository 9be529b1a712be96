"""Tenant-scoped operators: every Access-gated route checks the identity's grant first."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from authorization.operator_grants import Principal, grant, granted_tenants, revoke_grant
from http_messages import Headers, HttpRequest
from local_runtime.access_dev import DevAccessKeys, access_claims, mint_token
from local_runtime.cli import main
from local_runtime.runtime import LocalRuntime
from tests.memory_api.conftest import Client
from worker.app import ACCESS, ROUTES, handle
from worker.identity import ACCESS_HEADER

EVE = "eve@example.com"


class SpyNamespace:
    def __init__(self) -> None:
        self.touched: list[str] = []

    def get_by_name(self, name: str) -> Any:
        self.touched.append(name)
        raise AssertionError(f"Durable Object {name!r} touched")


def _path(pattern: str, tenant: str) -> str:
    values = {
        "{tenant}": tenant,
        "{agent_type}": "assistant",
        "{run_id}": "01J00000000000000000000000",
        "{fact_id}": "01J00000000000000000000000",
        "{event_id}": "01J00000000000000000000000",
        "{jti}": "01J00000000000000000000000",
        "{subject}": "contact:ada",
        "{name}": "triage",
        "{grant_id}": "g_0123456789abcdef",
        "{job_id}": "01J00000000000000000000000",
        "{part}": "0",
        "{endpoint_id}": "01J00000000000000000000000",
    }
    for name, value in values.items():
        pattern = pattern.replace(name, value)
    assert "{" not in pattern, pattern
    return pattern


BODIES: dict[str, Any] = {
    "/v1/agents/{tenant}/{agent_type}/run": {"input": "hello"},
    "/v1/agents/{tenant}/{agent_type}/runs/{run_id}/outcome": {"score": 1.0},
    "/admin/tenants/{tenant}/lifecycle": {"episode_retention_days": 1},
    "/admin/tenants/{tenant}/memory-tokens": {"agent_id": "agent-a"},
    "/admin/tenants/{tenant}/agents/{agent_type}/packs": {
        "name": "triage",
        "workflow_id": "w",
        "instance_id": "default",
    },
}

GATED = [route for route in ROUTES if route.auth is ACCESS]


async def _tables(runtime: LocalRuntime) -> dict[str, int]:
    counts = {}
    for table in (
        "agent_runs",
        "memory_episodes",
        "semantic_facts",
        "tenant_lifecycle",
        "memory_events",
        "operator_grants",
        "workflow_packs",
    ):
        row = await runtime.db.prepare(f"SELECT COUNT(*) AS n FROM {table}").first()
        assert row is not None
        counts[table] = int(row["n"])
    return counts


@pytest.mark.parametrize("route", GATED, ids=lambda route: f"{route.method} {route.path}")
async def test_an_identity_without_a_grant_gets_403_and_nothing_runs(
    client: Client, memory_runtime: LocalRuntime, route: Any
) -> None:
    await grant(memory_runtime.bindings(), "acme", "email", EVE, "test")
    before = await _tables(memory_runtime)
    kv_before = (await memory_runtime.kv.list()).keys
    spy = SpyNamespace()
    bindings = dataclasses.replace(memory_runtime.bindings(), agents=spy)
    eve = mint_token(memory_runtime.state.access, EVE, now=memory_runtime.clock.now())
    body = BODIES.get(route.path)

    request = HttpRequest(
        route.method,
        "http://127.0.0.1:8790" + _path(route.path, "globex"),
        Headers({ACCESS_HEADER: eve, "content-type": "application/json"}),
        b"" if body is None else json.dumps(body).encode(),
    )
    response = await handle(request, bindings)
    assert response.status == 403, response.json()
    assert response.json()["error"]["code"] == "tenant_forbidden"
    assert spy.touched == []
    assert await _tables(memory_runtime) == before
    assert (await memory_runtime.kv.list()).keys == kv_before


async def test_a_grant_opens_its_tenant_only_and_revoking_it_closes_it(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    eve = mint_token(memory_runtime.state.access, EVE, now=memory_runtime.clock.now())
    path = "/admin/tenants/{}/memory-tokens"
    body = {"agent_id": "agent-a"}
    refused = await client.send("POST", path.format("acme"), body, access=eve)
    assert refused.json()["error"]["code"] == "tenant_forbidden"
    await grant(memory_runtime.bindings(), "acme", "email", "Eve@Example.com", "test")
    assert (await client.send("POST", path.format("acme"), body, access=eve)).status == 201
    other = await client.send("POST", path.format("globex"), body, access=eve)
    assert (other.status, other.json()["error"]["code"]) == (403, "tenant_forbidden")
    assert await revoke_grant(memory_runtime.bindings(), "acme", "email", EVE)
    again = await client.send("POST", path.format("acme"), body, access=eve)
    assert again.json()["error"]["code"] == "tenant_forbidden"


async def test_service_tokens_and_groups_are_granted_by_their_own_names(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    keys = DevAccessKeys.load_or_create(memory_runtime.state.access)
    now = memory_runtime.clock.now()
    service = keys.sign(
        {**access_claims("x", now=now), "email": None, "common_name": "ci-bot.access"}
    )
    member = keys.sign({**access_claims("gail@example.com", now=now), "groups": ["sre"]})
    path = "/admin/tenants/acme/lifecycle"
    for token in (service, member):
        assert (await client.send("GET", path, access=token)).status == 403
    await grant(memory_runtime.bindings(), "acme", "common_name", "ci-bot.access", "test")
    await grant(memory_runtime.bindings(), "acme", "group", "sre", "test")
    for token in (service, member):
        assert (await client.send("GET", path, access=token)).status == 200


@pytest.mark.parametrize("count", [49, 100, 500])
async def test_an_operator_in_many_access_groups_is_granted_by_any_of_them(
    client: Client, memory_runtime: LocalRuntime, count: int
) -> None:
    # D1 binds at most 100 parameters: two per group locked out 49+ groups, and groups
    # past the 64th were dropped before the query (issue 26).
    keys = DevAccessKeys.load_or_create(memory_runtime.state.access)
    groups = [f"g{i:03d}" for i in range(count)]
    token = keys.sign(
        {**access_claims("gail@example.com", now=memory_runtime.clock.now()), "groups": groups}
    )
    path = "/admin/tenants/acme/lifecycle"
    refused = await client.send("GET", path, access=token)
    assert (refused.status, refused.json()["error"]["code"]) == (403, "tenant_forbidden")
    await grant(memory_runtime.bindings(), "acme", "group", groups[-1], "test")
    assert (await client.send("GET", path, access=token)).status == 200
    other = await client.send("GET", "/admin/tenants/globex/lifecycle", access=token)
    assert other.status == 403
    who = Principal(email="gail@example.com", groups=tuple(groups))
    assert await granted_tenants(who, memory_runtime.bindings()) == {"acme"}


async def test_a_service_token_named_like_an_admins_email_is_not_an_admin(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    # PLATFORM_ADMINS (local runtime) lists ops@example.com as an email: a service token
    # whose common name is that string used to be a platform admin (issue 26).
    keys = DevAccessKeys.load_or_create(memory_runtime.state.access)
    now = memory_runtime.clock.now()
    impostor = keys.sign(
        {**access_claims("x", now=now), "email": None, "common_name": "ops@example.com"}
    )
    admin = mint_token(memory_runtime.state.access, "OPS@example.com", now=now)
    path = "/admin/tenants/acme/lifecycle"
    refused = await client.send("GET", path, access=impostor)
    assert (refused.status, refused.json()["error"]["code"]) == (403, "tenant_forbidden")
    assert (await client.send("GET", path, access=admin)).status == 200
    scopes = [
        (await client.send("GET", "/admin/tenants", access=token)).json()["scope"]
        for token in (impostor, admin)
    ]
    assert scopes == ["granted", "platform"]


async def test_platform_admins_match_only_the_kind_they_are_configured_as(
    tmp_path: Path,
) -> None:
    runtime = LocalRuntime.open(
        tmp_path / "state",
        vars={"PLATFORM_ADMINS": "common_name:ada@example.com,email:ci-bot.access@example.com"},
    )
    await runtime.migrate()
    keys = DevAccessKeys.load_or_create(runtime.state.access)
    now = runtime.clock.now()

    def service(name: str) -> str:
        return keys.sign({**access_claims("x", now=now), "email": None, "common_name": name})

    client = Client(runtime)
    scopes = {
        who: (await client.send("GET", "/admin/tenants", access=token)).json()["scope"]
        for who, token in {
            "service ada@example.com": service("ada@example.com"),
            "user ada@example.com": mint_token(runtime.state.access, "ada@example.com", now=now),
            "user ci-bot.access@example.com": mint_token(
                runtime.state.access, "ci-bot.access@example.com", now=now
            ),
            "service ci-bot.access@example.com": service("ci-bot.access@example.com"),
        }.items()
    }
    await runtime.close()
    assert scopes == {
        "service ada@example.com": "platform",
        "user ada@example.com": "granted",
        "user ci-bot.access@example.com": "platform",
        "service ci-bot.access@example.com": "granted",
    }


async def _lifecycle_status(state: Path, tenant: str) -> tuple[int, str | None]:
    runtime = LocalRuntime.open(state)
    eve = mint_token(runtime.state.access, EVE, now=runtime.clock.now())
    response = await Client(runtime).send("GET", f"/admin/tenants/{tenant}/lifecycle", access=eve)
    await runtime.close()
    return response.status, (response.json().get("error") or {}).get("code")


def test_cli_grants_a_platform_admin_every_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert main(["operators", "grant", EVE, "--platform-admin", "--state", str(state)]) == 0
    assert json.loads(capsys.readouterr().out)["grant"][0]["tenant"] == "*"
    for tenant in ("acme", "globex"):
        assert asyncio.run(_lifecycle_status(state, tenant)) == (200, None)
    assert main(["operators", "revoke", EVE, "--platform-admin", "--state", str(state)]) == 0
    assert asyncio.run(_lifecycle_status(state, "acme")) == (403, "tenant_forbidden")


async def test_without_d1_the_grant_check_fails_closed(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    eve = mint_token(memory_runtime.state.access, EVE, now=memory_runtime.clock.now())

    bindings = dataclasses.replace(memory_runtime.bindings(), db=None)
    request = HttpRequest(
        "GET",
        "http://127.0.0.1:8790/admin/tenants/acme/lifecycle",
        Headers({ACCESS_HEADER: eve}),
        b"",
    )
    response = await handle(request, bindings)
    assert (response.status, response.json()["error"]["code"]) == (503, "grants_unavailable")
