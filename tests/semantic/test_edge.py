"""Semantic memory at the edge: the Access-gated admin delete, and the memory tools over
MCP through the Worker's handler."""

from __future__ import annotations

import json
from typing import Any

from agent_memory.memory import Memory
from gateway import admin_ops
from gateway.credentials import ISOLATE_CACHE
from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.semantic.conftest import fact_rows, vector_count
from worker.app import APP, ROUTES, handle


async def delete(rt: LocalRuntime, path: str, token: str | None) -> HttpResponse:
    return await handle(build_request("DELETE", path, token=token), rt.bindings())


def token_for(rt: LocalRuntime) -> str:
    return mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())


async def test_admin_delete_removes_row_and_vector_and_is_idempotent(rt: LocalRuntime) -> None:
    memory = (await Memory.open(rt.bindings(), "acme")).semantic()
    kept = await memory.learn({"content": "keep me"})
    gone = await memory.learn({"content": "delete me"})
    path = f"/admin/tenants/acme/facts/{gone.fact_id}"
    first = await delete(rt, path, token_for(rt))
    assert first.status == 200
    assert first.json() == {
        "tenant": "acme",
        "fact_id": gone.fact_id,
        "deleted": True,
        "vector_deleted": True,
        "complete": True,
    }
    assert [row["fact_id"] for row in await fact_rows(rt)] == [kept.fact_id]
    assert await vector_count(rt) == 1
    again = await delete(rt, path, token_for(rt))
    assert again.status == 200
    assert again.json()["deleted"] is False and again.json()["complete"] is True


async def test_admin_delete_needs_access_and_deletes_nothing_without_it(rt: LocalRuntime) -> None:
    fact = await (await Memory.open(rt.bindings(), "acme")).semantic().learn({"content": "x y z"})
    path = f"/admin/tenants/acme/facts/{fact.fact_id}"
    missing = await delete(rt, path, None)
    assert missing.status == 401 and missing.json()["error"]["code"] == "access_token_missing"
    forged = await delete(rt, path, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
    assert forged.status == 403 and forged.json()["error"]["code"] == "access_token_invalid"
    assert len(await fact_rows(rt)) == 1 and await vector_count(rt) == 1


async def test_admin_delete_validates_the_path(rt: LocalRuntime) -> None:
    bad_id = await delete(rt, "/admin/tenants/acme/facts/not-a-ulid", token_for(rt))
    assert bad_id.status == 422 and bad_id.json()["error"]["code"] == "invalid_path"
    bad_tenant = await delete(rt, "/admin/tenants/ACME!/facts/" + "0" * 26, token_for(rt))
    assert bad_tenant.status == 422 and bad_tenant.json()["error"]["code"] == "invalid_path"


async def test_admin_delete_cannot_reach_another_tenants_fact(rt: LocalRuntime) -> None:
    fact = await (await Memory.open(rt.bindings(), "acme")).semantic().learn({"content": "mine"})
    response = await delete(rt, f"/admin/tenants/globex/facts/{fact.fact_id}", token_for(rt))
    assert response.status == 200 and response.json()["deleted"] is False
    assert response.json()["vector_deleted"] is False
    assert len(await fact_rows(rt)) == 1 and await vector_count(rt) == 1


def test_the_route_is_registered_once_by_the_app() -> None:
    route, params = APP.resolve("DELETE", "/admin/tenants/acme/facts/" + "0" * 26)
    assert params == {"tenant": "acme", "fact_id": "0" * 26}
    pattern = "/admin/tenants/{tenant}/facts/{fact_id}"
    assert route.path == pattern
    methods = [r.method for r in ROUTES if r.path == pattern]
    assert methods.count("DELETE") == 1


async def mcp(rt: LocalRuntime, key: str, method: str, params: dict[str, Any]) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = Headers(
        {
            "Authorization": f"Bearer {key}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
    )
    response = await handle(
        HttpRequest("POST", "https://gw.test/mcp", headers, body), rt.bindings()
    )
    assert response.status == 200, response.body
    return response.json()["result"]


async def test_mcp_clients_store_and_recall_through_the_gateway(rt: LocalRuntime) -> None:
    ISOLATE_CACHE.clear()
    assert rt.kv is not None
    await admin_ops.create_tenant(rt.kv, rt.clock, "acme", memory_enabled=True)
    key = (await admin_ops.issue_api_key(rt.kv, rt.clock, "acme")).api_key
    tools = await mcp(rt, key, "tools/list", {})
    assert {"recall_memory", "store_memory"} <= {t["name"] for t in tools["tools"]}
    stored = await mcp(
        rt,
        key,
        "tools/call",
        {
            "name": "store_memory",
            "arguments": {"content": "Deploys freeze on Fridays", "metadata": {"team": "infra"}},
        },
    )
    assert stored["isError"] is False
    assert json.loads(stored["content"][0]["text"]) == {"stored": True}
    found = await mcp(
        rt,
        key,
        "tools/call",
        {
            "name": "recall_memory",
            "arguments": {"query": "when is the deploy freeze?"},
        },
    )
    assert found["isError"] is False
    result = json.loads(found["content"][0]["text"])
    assert [r["content"] for r in result["results"]] == ["Deploys freeze on Fridays"]
    ISOLATE_CACHE.clear()
