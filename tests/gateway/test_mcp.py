"""MCP over Streamable HTTP at /mcp (2025-06-18), driven through `worker.app.handle`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from bindings.settings import Settings
from gateway import admin_ops
from tests.fakes.memory_tools import FakeMemoryTools
from tests.gateway.conftest import TENANT, Seeded

FakeMemory = FakeMemoryTools


def _result(response: Any) -> Any:
    assert response.status == 200, response.body
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "error" not in body, body
    return body["result"]


def _rpc_error(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status == status, response.body
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    error: dict[str, Any] = body["error"]
    return error


def _tool_names(result: dict[str, Any]) -> list[str]:
    return sorted(tool["name"] for tool in result["tools"])


# --- lifecycle --------------------------------------------------------------------------------


async def test_initialize_echoes_a_supported_version(seeded: Seeded) -> None:
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    result = _result(await seeded.gateway.rpc("initialize", params, key=seeded.key))
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "agent-memory-gateway"
    assert result["serverInfo"]["version"]


async def test_initialize_answers_its_latest_version_for_an_unknown_one(seeded: Seeded) -> None:
    for offered, answered in (
        ("2099-01-01", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
    ):
        params = {"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "t"}}
        result = _result(await seeded.gateway.rpc("initialize", params, key=seeded.key))
        assert result["protocolVersion"] == answered, offered


async def test_initialize_without_a_version_is_invalid_params(seeded: Seeded) -> None:
    error = _rpc_error(await seeded.gateway.rpc("initialize", {}, key=seeded.key))
    assert error["code"] == -32602


async def test_notifications_get_202_and_no_body(seeded: Seeded) -> None:
    for method in ("notifications/initialized", "notifications/cancelled", "notifications/x"):
        response = await seeded.gateway.rpc(method, None, key=seeded.key, request_id=None)
        assert response.status == 202, method
        assert response.body == b""


async def test_a_client_response_message_gets_202(seeded: Seeded) -> None:
    message = {"jsonrpc": "2.0", "id": 7, "result": {}}
    response = await seeded.gateway.request("POST", "/mcp", message, key=seeded.key)
    assert (response.status, response.body) == (202, b"")


async def test_ping(seeded: Seeded) -> None:
    response = await seeded.gateway.rpc("ping", None, key=seeded.key, request_id="p-1")
    assert response.json() == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


# --- JSON-RPC errors ------------------------------------------------------------------------


async def test_batch_is_invalid_request_because_2025_06_18_removed_batching(
    seeded: Seeded,
) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    error = _rpc_error(await seeded.gateway.request("POST", "/mcp", batch, key=seeded.key), 400)
    assert error["code"] == -32600
    assert "batch" in error["message"]


async def test_unparseable_body_is_parse_error(seeded: Seeded) -> None:
    response = await seeded.gateway.request("POST", "/mcp", "{not json", key=seeded.key)
    error = _rpc_error(response, 400)
    assert error["code"] == -32700
    assert response.json()["id"] is None


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},
        "ping",
    ],
)
async def test_malformed_messages_are_invalid_request(seeded: Seeded, message: Any) -> None:
    response = await seeded.gateway.request("POST", "/mcp", json.dumps(message), key=seeded.key)
    assert _rpc_error(response, 400)["code"] == -32600


async def test_unknown_method_is_method_not_found(seeded: Seeded) -> None:
    response = await seeded.gateway.rpc("resources/list", {}, key=seeded.key, request_id=9)
    assert response.json()["id"] == 9
    assert _rpc_error(response)["code"] == -32601


async def test_params_must_be_an_object(seeded: Seeded) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}
    response = await seeded.gateway.request("POST", "/mcp", message, key=seeded.key)
    assert _rpc_error(response)["code"] == -32602


async def test_unsupported_protocol_version_header_is_400(seeded: Seeded) -> None:
    response = await seeded.gateway.rpc(
        "tools/list", {}, key=seeded.key, headers={"MCP-Protocol-Version": "1999-01-01"}
    )
    error = _rpc_error(response, 400)
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2025-06-18", "2025-11-25", "2026-07-28"],
        "requested": "1999-01-01",
    }
    ok = await seeded.gateway.rpc(
        "tools/list", {}, key=seeded.key, headers={"MCP-Protocol-Version": "2025-06-18"}
    )
    assert ok.status == 200


@pytest.mark.parametrize("version", ["2025-03-26", "2024-11-05"])
async def test_an_older_version_named_in_the_header_is_minus_32022_too(
    seeded: Seeded, version: str
) -> None:
    """Issue 42.4: the docs' -32022 (2026-07-28's UnsupportedProtocolVersion, HTTP 400) for
    every version not served, not -32600 for the ones the SDKs know."""
    for method in ("tools/list", "initialize"):
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}}
        headers = {"MCP-Protocol-Version": version}
        response = await seeded.gateway.rpc(method, params, key=seeded.key, headers=headers)
        error = _rpc_error(response, 400)
        assert (error["code"], error["data"]["requested"]) == (-32022, version)


# --- transport and auth ---------------------------------------------------------------------


async def test_get_and_delete_are_405_no_sse_stream(seeded: Seeded) -> None:
    for method in ("GET", "DELETE"):
        response = await seeded.gateway.request(method, "/mcp", key=seeded.key)
        assert response.status == 405
        assert response.headers.get("allow") == "POST"
        assert response.json()["error"]["code"] == "method_not_allowed"


async def test_get_without_credentials_is_the_401_challenge(seeded: Seeded) -> None:
    """Issue 42.4: clients probe for auth with a bare GET; the 401 names the metadata."""
    for key in (None, "amk_" + "z" * 43):
        response = await seeded.gateway.request("GET", "/mcp", key=key)
        assert response.status == 401, key
        challenge = response.headers.get("www-authenticate") or ""
        assert challenge.startswith('Bearer resource_metadata="https://gw.test/.well-known/')
        assert challenge.split('"')[1].endswith("/oauth-protected-resource/mcp")


async def test_cors_answers_configured_browser_origins_only(seeded: Seeded) -> None:
    """Issue 42.2: a browser client's preflight and request, never `*`, nothing for an origin
    not configured, and the admin routes stay same-origin."""
    gw = seeded.gateway
    gw.settings = Settings(environment="test", mcp_allowed_origins="https://app.test")
    asked = "authorization, content-type, mcp-protocol-version"
    preflight = {"Origin": "https://app.test", "Access-Control-Request-Method": "POST"}
    preflight["Access-Control-Request-Headers"] = asked
    for path in ("/mcp", "/token", "/register", "/.well-known/oauth-authorization-server"):
        answer = await gw.request("OPTIONS", path, headers=preflight)
        assert answer.status == 204, path
        assert answer.headers.get("access-control-allow-origin") == "https://app.test"
        assert answer.headers.get("access-control-allow-headers") == asked
        assert "credentials" not in str(answer.headers.items()).lower()
    methods = (await gw.request("OPTIONS", "/mcp", headers=preflight)).headers
    assert methods.get("access-control-allow-methods") == "POST, GET, DELETE"
    evil = await gw.request("OPTIONS", "/mcp", headers={**preflight, "Origin": "https://e.test"})
    assert evil.status == 403
    assert evil.headers.get("access-control-allow-origin") is None
    call = await gw.rpc("ping", None, key=seeded.key, headers={"Origin": "https://app.test"})
    assert call.status == 200
    assert call.headers.get("access-control-allow-origin") == "https://app.test"
    assert call.headers.get("vary") == "Origin"
    exposed = call.headers.get("access-control-expose-headers") or ""
    assert {"Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate"} <= set(
        exposed.split(", ")
    )
    refused = await gw.rpc("ping", None, key=None, headers={"Origin": "https://app.test"})
    assert refused.headers.get("access-control-allow-origin") == "https://app.test"  # readable
    admin = await gw.request("OPTIONS", "/admin/tenants/acme/oauth-clients", headers=preflight)
    assert admin.status == 405
    assert admin.headers.get("access-control-allow-origin") is None


async def test_missing_key_is_http_401_with_a_json_rpc_body(seeded: Seeded) -> None:
    response = await seeded.gateway.rpc("tools/list", {}, key=None)
    error = _rpc_error(response, 401)
    assert error["code"] == -32001
    assert error["data"]["code"] == "missing_api_key"
    assert (response.headers.get("www-authenticate") or "").startswith("Bearer")
    assert response.headers.get("x-gateway-error") == "missing_api_key"


async def test_revoked_key_is_401(seeded: Seeded) -> None:
    gw = seeded.gateway
    await admin_ops.revoke_api_key(gw.kv, gw.clock, TENANT, seeded.key_id)
    error = _rpc_error(await gw.rpc("ping", None, key=seeded.key), 401)
    assert error["data"]["code"] == "revoked_api_key"


async def test_browser_origins_must_be_on_the_configured_allow_list(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.settings = Settings(environment="test", mcp_allowed_origins="https://app.test")
    evil = await gw.rpc("ping", None, key=seeded.key, headers={"Origin": "https://evil.test"})
    assert _rpc_error(evil, 403)["data"]["code"] == "origin_not_allowed"
    # Matching the request's own Host is not enough: a DNS-rebinding page has that Origin.
    own = await gw.rpc("ping", None, key=seeded.key, headers={"Origin": "https://gw.test"})
    assert _rpc_error(own, 403)["data"]["code"] == "origin_not_allowed"
    listed = await gw.rpc("ping", None, key=seeded.key, headers={"Origin": "https://app.test"})
    assert listed.status == 200
    # API-key clients (Cursor, Codex) send no Origin and need no configuration.
    assert (await gw.rpc("ping", None, key=seeded.key)).status == 200


# --- tools/list -----------------------------------------------------------------------------


async def test_tools_list_shows_the_tenant_s_tools_with_input_schemas(seeded: Seeded) -> None:
    result = _result(await seeded.gateway.rpc("tools/list", {}, key=seeded.key))
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert set(tools) == {"echo", "list_issues"}  # no semantic tier in this deployment
    assert tools["echo"]["description"] == "Echo the arguments"
    assert tools["echo"]["inputSchema"]["required"] == ["text"]


async def test_other_tenant_sees_none_of_acme_s_tools(seeded: Seeded) -> None:
    result = _result(await seeded.gateway.rpc("tools/list", {}, key=seeded.other_key))
    assert result["tools"] == []


async def test_memory_tools_listed_when_enabled_and_semantic_tier_present(
    seeded: Seeded,
) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    gw.use_memory(FakeMemory())
    result = _result(await gw.rpc("tools/list", {}, key=seeded.key))
    assert _tool_names(result) == ["echo", "list_issues", "recall_memory", "store_memory"]
    recall = next(t for t in result["tools"] if t["name"] == "recall_memory")
    # ADR-0030's schema.
    assert recall["inputSchema"]["required"] == ["query"]
    assert recall["inputSchema"]["properties"]["top_k"]["maximum"] == 20


async def test_every_tool_has_a_title_and_annotations(seeded: Seeded) -> None:
    """Issue 42.3: recall_memory is read-only (Codex stops asking to approve every recall);
    a proxied tool's hints follow its HTTP method."""
    gw = seeded.gateway
    gw.semantic_tier = True
    gw.use_memory(FakeMemory())
    tools = {t["name"]: t for t in _result(await gw.rpc("tools/list", {}, key=seeded.key))["tools"]}
    assert all(t["title"] and set(t["annotations"]) == HINTS for t in tools.values())
    assert tools["recall_memory"]["title"] == "Recall memory"
    assert tools["recall_memory"]["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert tools["store_memory"]["annotations"]["readOnlyHint"] is False
    assert tools["store_memory"]["annotations"]["destructiveHint"] is False
    assert tools["list_issues"]["annotations"]["readOnlyHint"] is True  # a GET upstream
    assert tools["echo"]["annotations"]["readOnlyHint"] is False  # a POST upstream
    assert tools["echo"]["annotations"]["openWorldHint"] is True


HINTS = {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}


async def test_memory_tools_hidden_without_semantic_tier(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.use_memory(FakeMemory())  # the dispatcher exists, but the deployment has no semantic tier
    result = _result(await gw.rpc("tools/list", {}, key=seeded.key))
    assert "recall_memory" not in _tool_names(result)


async def test_memory_tools_hidden_when_tenant_has_memory_disabled(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    gw.use_memory(FakeMemory())
    await admin_ops.set_tenant_memory(gw.kv, TENANT, False)
    result = _result(await gw.rpc("tools/list", {}, key=seeded.key))
    assert _tool_names(result) == ["echo", "list_issues"]


async def test_memory_only_key_lists_only_memory_tools(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    gw.use_memory(FakeMemory())
    result = _result(await gw.rpc("tools/list", {}, key=seeded.memory_only_key))
    assert _tool_names(result) == ["recall_memory", "store_memory"]


# --- tools/call -----------------------------------------------------------------------------


async def test_tools_call_proxies_and_returns_text_content(seeded: Seeded) -> None:
    gw = seeded.gateway
    params = {"name": "echo", "arguments": {"text": "hello"}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert result["isError"] is False
    [content] = result["content"]
    assert content["type"] == "text"
    assert json.loads(content["text"])["echo"] == {"text": "hello"}
    assert gw.upstream.last.headers["authorization"] == "Token s3cret-echo"


async def test_tools_call_upstream_error_status_is_a_tool_error(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.upstream.handler = lambda request: httpx.Response(500, text="exploded")
    params = {"name": "echo", "arguments": {"text": "hello"}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert result["isError"] is True
    assert "HTTP 500" in result["content"][0]["text"]
    assert "exploded" in result["content"][0]["text"]


async def test_tools_call_upstream_timeout_is_a_tool_error(seeded: Seeded) -> None:
    gw = seeded.gateway

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    gw.upstream.handler = slow
    params = {"name": "echo", "arguments": {"text": "hello"}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert result["isError"] is True
    assert "upstream_timeout" in result["content"][0]["text"]


async def test_tools_call_unknown_tool_is_invalid_params(seeded: Seeded) -> None:
    for key in (seeded.key, seeded.other_key):
        params = {"name": "nope" if key == seeded.key else "echo", "arguments": {}}
        error = _rpc_error(await seeded.gateway.rpc("tools/call", params, key=key))
        assert error["code"] == -32602
        assert "Unknown tool" in error["message"]
    assert seeded.gateway.upstream.requests == []


async def test_tools_call_invalid_arguments_is_invalid_params_with_problems(
    seeded: Seeded,
) -> None:
    params = {"name": "echo", "arguments": {"text": ""}}
    error = _rpc_error(await seeded.gateway.rpc("tools/call", params, key=seeded.key))
    assert error["code"] == -32602
    assert error["data"]["problems"][0]["path"] == "$.text"


@pytest.mark.parametrize(
    "params", [{}, {"name": 3}, {"name": "echo", "arguments": [1]}, {"name": ""}]
)
async def test_tools_call_malformed_params(seeded: Seeded, params: dict[str, Any]) -> None:
    error = _rpc_error(await seeded.gateway.rpc("tools/call", params, key=seeded.key))
    assert error["code"] == -32602


async def test_tools_call_without_tools_scope_is_403(seeded: Seeded) -> None:
    params = {"name": "echo", "arguments": {"text": "x"}}
    response = await seeded.gateway.rpc("tools/call", params, key=seeded.memory_only_key)
    assert _rpc_error(response, 403)["data"]["code"] == "insufficient_scope"


async def test_recall_memory_is_dispatched_with_tenant_and_default_top_k(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    memory = FakeMemory()
    gw.use_memory(memory)
    params = {"name": "recall_memory", "arguments": {"query": "ui preferences"}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"])["entries"][0]["content"] == "prefers dark mode"
    assert memory.calls == [(TENANT, "recall_memory", {"top_k": 5, "query": "ui preferences"})]
    assert gw.upstream.requests == []


async def test_store_memory_is_dispatched(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    memory = FakeMemory()
    gw.use_memory(memory)
    params = {"name": "store_memory", "arguments": {"content": "x", "metadata": {"k": 1}}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert json.loads(result["content"][0]["text"]) == {"stored": True}
    assert memory.calls == [(TENANT, "store_memory", {"content": "x", "metadata": {"k": 1}})]


async def test_memory_tool_arguments_are_validated(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    memory = FakeMemory()
    gw.use_memory(memory)
    params = {"name": "recall_memory", "arguments": {"query": "q", "top_k": 50}}
    error = _rpc_error(await gw.rpc("tools/call", params, key=seeded.key))
    assert error["code"] == -32602
    assert memory.calls == []


class _Refused(ValueError):
    code = "empty_query"


class RefusingMemory(FakeMemory):
    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((tenant, tool_name, arguments))
        raise _Refused("query must contain at least one word")


async def test_refused_memory_input_reaches_the_client_with_its_reason(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    gw.use_memory(RefusingMemory())
    params = {"name": "recall_memory", "arguments": {"query": "   "}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert result["isError"] is True
    refused = json.loads(result["content"][0]["text"])["error"]
    assert refused == {"code": "empty_query", "message": "query must contain at least one word"}


async def test_memory_tool_failure_is_a_tool_error(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.semantic_tier = True
    gw.use_memory(FakeMemory(fail=True))
    params = {"name": "recall_memory", "arguments": {"query": "q"}}
    result = _result(await gw.rpc("tools/call", params, key=seeded.key))
    assert result["isError"] is True
    assert "vector index down" not in result["content"][0]["text"]  # internals stay internal


async def test_memory_tool_is_unknown_when_memory_is_not_available(seeded: Seeded) -> None:
    gw = seeded.gateway
    memory = FakeMemory()
    gw.use_memory(memory)  # no semantic tier
    params = {"name": "store_memory", "arguments": {"content": "x"}}
    error = _rpc_error(await gw.rpc("tools/call", params, key=seeded.key))
    assert error["code"] == -32602
    assert memory.calls == []
