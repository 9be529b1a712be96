"""Finding 1 of issue 14: one input boundary. Hostile bodies and bad local-endpoint input
get JSON 4xx with stable codes (never a 500, never text/plain), and input that storage
would later refuse is refused up front instead of being acknowledged and lost."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from gateway import admin_ops
from gateway.credentials import ISOLATE_CACHE
from http_messages import (
    MAX_DEPTH,
    Headers,
    HttpRequest,
    HttpResponse,
    JsonLimitError,
    loads_bounded,
)
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import Send
from worker.app import handle
from worker.identity import ACCESS_HEADER

RUN = "/v1/agents/acme/assistant/run"
DEEP = b"[" * 50_000 + b"]" * 50_000
HUGE_INT = b'{"input": "hi", "metadata": {"n": ' + b"9" * 5000 + b"}}"


def error_code(response: HttpResponse) -> str:
    assert response.headers.get("content-type") == "application/json"
    code: str = response.json()["error"]["code"]
    return code


async def run_count(rt: LocalRuntime) -> int:
    assert rt.db is not None
    result = await rt.db.prepare("SELECT COUNT(*) AS n FROM agent_runs").all()
    return int(result.results[0]["n"])


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (DEEP, 413, "json_too_deep"),
        (
            b'{"input": "hi", "metadata": '
            + b'{"a": ' * (MAX_DEPTH + 1)
            + b"1"
            + b"}" * (MAX_DEPTH + 2),
            413,
            "json_too_deep",
        ),
        (HUGE_INT, 413, "number_too_large"),
        (b'{"input": "' + b"x" * 70_000 + b'"}', 413, "string_too_long"),
        (b'{"input": "hi", "metadata": {"n": NaN}}', 400, "invalid_json"),
    ],
)
async def test_hostile_bodies_on_access_gated_routes_are_json_4xx(
    agent_runtime: LocalRuntime, send: Send, raw: bytes, status: int, code: str
) -> None:
    response = await send("POST", RUN, raw=raw)
    assert (response.status, error_code(response)) == (status, code)
    assert await run_count(agent_runtime) == 0


async def test_a_nul_subject_is_refused_not_acknowledged_and_lost(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    response = await send("POST", RUN, {"input": "hello", "subject": "\u0000"})
    assert response.status == 422, response.json()
    assert error_code(response) == "invalid_character"
    await agent_runtime.background.drain()
    assert await run_count(agent_runtime) == 0


async def test_a_control_character_subject_is_refused(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    response = await send("POST", RUN, {"input": "hello", "subject": "ab\u0007c"})
    assert (response.status, error_code(response)) == (422, "validation_error")
    assert await run_count(agent_runtime) == 0


async def test_a_nul_in_the_run_input_is_refused(agent_runtime: LocalRuntime, send: Send) -> None:
    response = await send("POST", RUN, {"input": "\u0000hello"})
    assert (response.status, error_code(response)) == (422, "invalid_character")
    assert await run_count(agent_runtime) == 0


async def _gateway_key(rt: LocalRuntime) -> str:
    ISOLATE_CACHE.clear()
    assert rt.kv is not None
    await admin_ops.create_tenant(rt.kv, rt.clock, "acme", memory_enabled=True)
    # Never called: every request below is refused before any outbound fetch.
    await admin_ops.register_tool(rt.kv, "acme", {"name": "echo", "url": "https://upstream.test/e"})
    return (await admin_ops.issue_api_key(rt.kv, rt.clock, "acme")).api_key


async def _post(rt: LocalRuntime, path: str, key: str, body: bytes) -> HttpResponse:
    headers = Headers({"Authorization": f"Bearer {key}", "content-type": "application/json"})
    return await handle(HttpRequest("POST", f"https://gw.test{path}", headers, body), rt.bindings())


async def test_mcp_store_memory_with_a_nul_subject_is_a_clear_tool_error(
    agent_runtime: LocalRuntime,
) -> None:
    key = await _gateway_key(agent_runtime)
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "store_memory",
            "arguments": {"content": "x likes tea", "metadata": {"subject": "\u0000"}},
        },
    }
    response = await _post(agent_runtime, "/mcp", key, json.dumps(message).encode())
    answer = response.json()
    assert answer["error"]["code"] == -32602, answer
    assert answer["error"]["data"]["code"] == "invalid_character"
    assert agent_runtime.db is not None
    facts = await agent_runtime.db.prepare("SELECT COUNT(*) AS n FROM semantic_facts").all()
    assert facts.results[0]["n"] == 0


@pytest.mark.parametrize("path", ["/mcp", "/api/v1/tools/echo"])
async def test_huge_integers_on_the_gateway_are_413_not_500(
    agent_runtime: LocalRuntime, path: str
) -> None:
    key = await _gateway_key(agent_runtime)
    body = b'{"jsonrpc": "2.0", "id": ' + b"1" * 5000 + b', "method": "ping"}'
    response = await _post(agent_runtime, path, key, body)
    assert response.status == 413
    payload: dict[str, Any] = response.json()
    found = payload["error"].get("data", payload["error"]).get("code")
    assert found == "number_too_large"


async def test_a_lone_surrogate_subject_is_refused_not_lost(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    # JSON may spell a lone UTF-16 surrogate ("\ud800"); Python decodes it, but it cannot be
    # encoded as UTF-8 for SQLite, so the background write would fail after the ack.
    raw = b'{"input": "hello", "subject": "ab\\ud800c"}'
    response = await send("POST", RUN, raw=raw)
    assert (response.status, error_code(response)) == (422, "invalid_character")
    await agent_runtime.background.drain()
    assert await run_count(agent_runtime) == 0


async def test_a_lone_surrogate_in_tool_arguments_is_a_4xx_not_a_500(
    agent_runtime: LocalRuntime,
) -> None:
    key = await _gateway_key(agent_runtime)
    response = await _post(agent_runtime, "/api/v1/tools/echo", key, b'{"text": "\\udfff"}')
    assert response.status == 422
    assert response.json()["error"]["code"] == "invalid_character"


def test_bounded_decoder_never_raises_recursion_error() -> None:
    with pytest.raises(JsonLimitError) as caught:
        loads_bounded(b'{"a":' * 200_000 + b"1" + b"}" * 200_000)
    assert caught.value.code == "json_too_deep"


# --- the local server's own endpoints, over real loopback HTTP -------------------------


def test_scheduled_endpoint_refuses_a_non_numeric_time_with_json(served: str, token: str) -> None:
    response = httpx.get(
        f"{served}/cdn-cgi/handler/scheduled",
        params={"cron": "0 3 * * 1", "time": "soon"},
        headers={ACCESS_HEADER: token},
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "validation_error"


def test_unknown_http_methods_get_json(served: str) -> None:
    host, port = served.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"FOO /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["error"]["code"] == "invalid_http_request"


def test_hostile_body_over_http_is_json_413(agent_runtime: LocalRuntime, served: str) -> None:
    token = mint_token(agent_runtime.state.access, "ops@example.com", now=agent_runtime.clock.now())
    response = httpx.post(
        f"{served}{RUN}", content=DEEP, headers={ACCESS_HEADER: token}, timeout=30
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "json_too_deep"
