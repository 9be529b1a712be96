"""`POST /api/v1/tools/{tool}` through `worker.app.handle`: what a caller of the gateway sees."""

from __future__ import annotations

import json
from typing import Any

import httpx

from bindings.ports.kv import KVNamespace
from gateway import admin_ops, credentials
from gateway.credentials import CACHE_TTL_SECONDS
from tests.gateway.conftest import TENANT, Gateway, Seeded, gateway_error


async def test_proxies_call_with_credential_and_relays_upstream(seeded: Seeded) -> None:
    gw = seeded.gateway
    response = await gw.call_tool("echo", {"text": "hi", "times": 2}, key=seeded.key)

    assert response.status == 200
    assert response.json()["echo"] == {"text": "hi", "times": 2}
    assert response.headers.get("x-upstream-status") == "200"
    assert response.headers.get("x-gateway-error") is None
    # Only the configured response header passes through.
    assert response.headers.get("x-request-id") == "up-1"
    assert response.headers.get("x-secret-internal") is None
    sent = gw.upstream.last
    assert sent.method == "POST"
    assert str(sent.url) == "https://upstream.test/echo"
    assert sent.headers["authorization"] == "Token s3cret-echo"
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.content) == {"text": "hi", "times": 2}


async def test_client_authorization_never_reaches_the_upstream(seeded: Seeded) -> None:
    gw = seeded.gateway
    await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert seeded.key not in str(gw.upstream.last.headers)


async def test_get_tool_fills_path_and_query_and_sends_credential_as_parameter(
    seeded: Seeded,
) -> None:
    gw = seeded.gateway
    response = await gw.call_tool(
        "list_issues",
        {"owner": "a b", "repo": "../x", "state": "open", "labels": ["bug", "ui"]},
        key=seeded.key,
    )
    assert response.status == 200
    sent = gw.upstream.last
    assert sent.method == "GET"
    assert sent.content == b""
    # Placeholders are quoted whole: no path traversal, no extra segments.
    assert sent.url.raw_path.decode().startswith("/repos/a%20b/..%2Fx/issues?")
    assert sent.url.params.get_list("labels") == ["bug", "ui"]
    assert sent.url.params["state"] == "open"
    assert sent.url.params["access_token"] == "s3cret-forge"
    assert "owner" not in sent.url.params


async def test_upstream_status_and_body_are_relayed_as_the_upstream_s(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.upstream.handler = lambda request: httpx.Response(
        503, json={"error": {"code": "busy", "message": "try later"}}
    )
    response = await gw.call_tool("echo", {"text": "hi"}, key=seeded.key)
    assert response.status == 503
    assert response.json() == {"error": {"code": "busy", "message": "try later"}}
    # Marked as the upstream's, not ours, though the body looks like one of our errors.
    assert response.headers.get("x-upstream-status") == "503"
    assert response.headers.get("x-gateway-error") is None


async def test_upstream_redirect_is_relayed_not_followed(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.upstream.handler = lambda request: httpx.Response(
        302, headers={"location": "https://elsewhere.test/"}
    )
    response = await gw.call_tool("echo", {"text": "hi"}, key=seeded.key)
    assert response.status == 302
    assert len(gw.upstream.requests) == 1


async def test_missing_key_is_401_with_bearer_challenge(seeded: Seeded) -> None:
    response = await seeded.gateway.call_tool("echo", {"text": "hi"}, key=None)
    assert gateway_error(response) == (401, "missing_api_key")
    assert (response.headers.get("www-authenticate") or "").startswith("Bearer")


async def test_malformed_authorization_is_401(seeded: Seeded) -> None:
    for header in ("Basic abcdefghijklmnopqrstuvwxyz", "Bearer short", "Bearer has space inside!"):
        response = await seeded.gateway.request(
            "POST", "/api/v1/tools/echo", {"text": "x"}, headers={"Authorization": header}
        )
        assert gateway_error(response) == (401, "malformed_api_key"), header


async def test_unknown_key_is_401(seeded: Seeded) -> None:
    response = await seeded.gateway.call_tool("echo", {"text": "x"}, key="amk_" + "x" * 43)
    assert gateway_error(response) == (401, "invalid_api_key")
    assert seeded.gateway.upstream.requests == []


async def test_revoked_key_stops_working_within_the_cache_bound(seeded: Seeded) -> None:
    gw = seeded.gateway
    assert (await gw.call_tool("echo", {"text": "x"}, key=seeded.key)).status == 200
    await admin_ops.revoke_api_key(gw.kv, gw.clock, TENANT, seeded.key_id)

    # This isolate cached the key a moment ago: still accepted inside the bound...
    gw.clock.advance(CACHE_TTL_SECONDS - 1)
    assert (await gw.call_tool("echo", {"text": "x"}, key=seeded.key)).status == 200
    # ...and refused once the bound has passed.
    gw.clock.advance(2)
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (401, "revoked_api_key")


async def test_revoked_key_is_refused_at_once_by_a_fresh_isolate(seeded: Seeded) -> None:
    gw = seeded.gateway
    await admin_ops.revoke_api_key(gw.kv, gw.clock, TENANT, seeded.key_id)
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (401, "revoked_api_key")


async def test_key_of_another_tenant_cannot_reach_this_tenant_s_tool(seeded: Seeded) -> None:
    gw = seeded.gateway
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.other_key)
    # Same answer as a tool that does not exist: nothing leaks about the other tenant.
    assert gateway_error(response) == (404, "tool_not_found")
    assert gw.upstream.requests == []


async def test_unknown_tool_is_404(seeded: Seeded) -> None:
    for name in ("nope", "bad%20name", "recall_memory"):
        response = await seeded.gateway.call_tool(name, {}, key=seeded.key)
        assert gateway_error(response) == (404, "tool_not_found"), name


async def test_key_without_tools_scope_is_403(seeded: Seeded) -> None:
    response = await seeded.gateway.call_tool("echo", {"text": "x"}, key=seeded.memory_only_key)
    assert gateway_error(response) == (403, "insufficient_scope")


async def test_input_failing_the_schema_is_422_with_each_problem(seeded: Seeded) -> None:
    gw = seeded.gateway
    response = await gw.call_tool("echo", {"times": 9, "extra": True}, key=seeded.key)
    assert gateway_error(response) == (422, "invalid_tool_input")
    problems = response.json()["error"]["details"]["problems"]
    assert {p["path"] for p in problems} == {"$.text", "$.times", "$.extra"}
    assert gw.upstream.requests == []


async def test_non_object_and_invalid_json_bodies_are_refused(seeded: Seeded) -> None:
    gw = seeded.gateway
    assert gateway_error(await gw.call_tool("echo", "[1, 2]", key=seeded.key)) == (
        422,
        "invalid_tool_input",
    )
    assert gateway_error(await gw.call_tool("echo", "{nope", key=seeded.key)) == (
        400,
        "invalid_json",
    )
    deep = "[" * 100_000 + "]" * 100_000
    assert gateway_error(await gw.call_tool("echo", deep, key=seeded.key))[0] in (400, 413)


async def test_empty_body_means_no_arguments(seeded: Seeded) -> None:
    gw = seeded.gateway
    response = await gw.call_tool("list_issues", None, key=seeded.key)
    assert gateway_error(response) == (422, "invalid_tool_input")  # owner, repo required


async def test_body_over_the_tool_limit_is_413(seeded: Seeded) -> None:
    gw = seeded.gateway
    await admin_ops.register_tool(gw.kv, TENANT, {**_echo_config(), "max_request_bytes": 64})
    response = await gw.call_tool("echo", {"text": "x" * 80}, key=seeded.key)
    assert gateway_error(response) == (413, "tool_input_too_large")
    assert gw.upstream.requests == []


async def test_body_over_the_worker_limit_is_413(seeded: Seeded) -> None:
    gw = seeded.gateway
    limit = gw.settings.max_body_bytes
    response = await gw.call_tool("echo", b"x" * (limit + 1), key=seeded.key)
    assert response.status == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert response.headers.get("x-upstream-status") is None


async def test_upstream_timeout_is_504(seeded: Seeded) -> None:
    gw = seeded.gateway

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    gw.upstream.handler = slow
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (504, "upstream_timeout")
    assert "2 s" in response.json()["error"]["message"]


async def test_upstream_unreachable_is_502_without_leaking_the_credential(seeded: Seeded) -> None:
    gw = seeded.gateway

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"connection refused for {request.url}", request=request)

    gw.upstream.handler = down
    response = await gw.call_tool("list_issues", {"owner": "o", "repo": "r"}, key=seeded.key)
    assert gateway_error(response) == (502, "upstream_unreachable")
    assert b"s3cret" not in response.body


async def test_upstream_protocol_failure_is_502(seeded: Seeded) -> None:
    gw = seeded.gateway

    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("peer closed connection", request=request)

    gw.upstream.handler = broken
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (502, "upstream_error")


async def test_oversized_upstream_response_is_502(seeded: Seeded) -> None:
    gw = seeded.gateway
    await admin_ops.register_tool(gw.kv, TENANT, {**_echo_config(), "max_response_bytes": 1000})
    gw.upstream.handler = lambda request: httpx.Response(200, content=b"x" * 5000)
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (502, "upstream_response_too_large")


async def test_missing_credential_is_424(seeded: Seeded) -> None:
    gw = seeded.gateway
    await admin_ops.delete_credential(gw.kv, TENANT, "echoer")
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (424, "credential_missing")
    assert gw.upstream.requests == []


async def test_tool_without_auth_sends_no_credential(seeded: Seeded) -> None:
    gw = seeded.gateway
    config = {**_echo_config(), "name": "public_echo", "auth": {"type": "none"}}
    config.pop("provider")
    await admin_ops.register_tool(gw.kv, TENANT, config)
    response = await gw.call_tool("public_echo", {"text": "x"}, key=seeded.key)
    assert response.status == 200
    assert "authorization" not in gw.upstream.last.headers


async def test_corrupt_stored_config_is_a_clear_500(seeded: Seeded) -> None:
    gw = seeded.gateway
    await gw.kv.put(credentials.tool_key(TENANT, "broken"), json.dumps({"name": "broken"}))
    response = await gw.call_tool("broken", {}, key=seeded.key)
    assert gateway_error(response) == (500, "gateway_misconfigured")


async def test_deployment_without_kv_is_503(seeded: Seeded) -> None:
    from dataclasses import replace

    from http_messages import Headers, HttpRequest
    from worker import app

    bindings = replace(seeded.gateway.bindings(), kv=None)
    request = HttpRequest(
        "POST",
        "https://gw.test/api/v1/tools/echo",
        Headers({"Authorization": f"Bearer {seeded.key}"}),
        b"{}",
    )
    assert gateway_error(await app.handle(request, bindings)) == (503, "kv_unavailable")


async def test_warm_isolate_makes_no_kv_reads(seeded: Seeded) -> None:
    gw = seeded.gateway
    counting = _CountingKV(gw.kv)
    gw.kv = counting  # type: ignore[assignment]
    await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert counting.gets == 3  # key record, tool config, credential
    await gw.call_tool("echo", {"text": "y"}, key=seeded.key)
    assert counting.gets == 3
    gw.clock.advance(CACHE_TTL_SECONDS)
    await gw.call_tool("echo", {"text": "z"}, key=seeded.key)
    assert counting.gets == 6


def _echo_config() -> dict[str, Any]:
    from tests.gateway.conftest import ECHO_TOOL

    return dict(ECHO_TOOL)


class _CountingKV:
    def __init__(self, inner: KVNamespace) -> None:
        self.inner = inner
        self.gets = 0

    async def get(self, key: str) -> str | None:
        self.gets += 1
        return await self.inner.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_gateway_fixture_sanity(gateway: Gateway) -> None:
    # A deployment with nothing in KV refuses any key.
    response = await gateway.call_tool("echo", {}, key="amk_" + "y" * 43)
    assert gateway_error(response) == (401, "invalid_api_key")


async def test_a_failed_fetch_surfacing_as_a_pyodide_error_is_502(seeded: Seeded) -> None:
    # On Workers a failed fetch may arrive as pyodide.ffi.JsException, not an httpx error.
    js_exception = type("JsException", (Exception,), {"__module__": "pyodide.ffi"})
    gw = seeded.gateway

    def fetch_failed(request: httpx.Request) -> httpx.Response:
        raise js_exception("TypeError: Network connection lost.")

    gw.upstream.handler = fetch_failed
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert gateway_error(response) == (502, "upstream_unreachable")


async def test_a_bug_is_still_the_worker_s_generic_500_not_an_upstream_error(
    seeded: Seeded,
) -> None:
    gw = seeded.gateway

    def bug(request: httpx.Request) -> httpx.Response:
        raise ZeroDivisionError

    gw.upstream.handler = bug
    response = await gw.call_tool("echo", {"text": "x"}, key=seeded.key)
    assert response.status == 500
    assert response.json()["error"]["code"] == "internal_error"


async def test_a_tool_whose_schema_uses_any_of_pattern_and_refs_registers_and_validates(
    seeded: Seeded,
) -> None:
    """Issue 23: `anyOf`, `pattern` and `$ref` were refused at registration, so common tool
    schemas could not be registered; now they are, and every call is checked by them."""
    gw = seeded.gateway
    tool = {
        "name": "get_issue",
        "description": "One issue",
        "provider": "echoer",
        "url": "https://upstream.test/echo",
        "method": "POST",
        "auth": {"type": "header", "name": "Authorization", "prefix": "Token "},
        "input_schema": {
            "type": "object",
            "properties": {
                "repo": {"$ref": "#/$defs/repo", "description": "owner/name"},
                "issue": {"anyOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/key"}]},
            },
            "required": ["repo", "issue"],
            "additionalProperties": False,
            "$defs": {
                "repo": {"type": "string", "pattern": "^[a-z0-9-]+/[a-z0-9-]+$"},
                "key": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"},
            },
        },
    }
    await admin_ops.register_tool(gw.kv, TENANT, tool)
    for good in ({"repo": "octo/hello", "issue": 7}, {"repo": "octo/hello", "issue": "OPS-12"}):
        response = await gw.call_tool("get_issue", good, key=seeded.key)
        assert response.status == 200, response.json()
        assert json.loads(gw.upstream.last.content) == good
    sent = len(gw.upstream.requests)
    response = await gw.call_tool(
        "get_issue", {"repo": "Octo/Hello!", "issue": "ops-12"}, key=seeded.key
    )
    assert gateway_error(response) == (422, "invalid_tool_input")
    problems = response.json()["error"]["details"]["problems"]
    assert {p["path"] for p in problems} == {"$.repo", "$.issue"}
    assert len(gw.upstream.requests) == sent
