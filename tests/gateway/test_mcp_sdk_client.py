"""A real MCP client (the official `mcp` SDK) against the local dev server.

The local runtime serves `worker.app.handle` on a loopback port; the proxied tool's
upstream is a second loopback server. Both run in threads; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway import admin_ops
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.gateway.loopback import running_upstream


@pytest.fixture
def upstream_url() -> Iterator[str]:
    with running_upstream() as url:
        yield url


def _tool(upstream: str, name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Loopback {name}",
        "provider": "loop",
        "url": f"{upstream}{path}",
        "method": "POST",
        "auth": {"type": "header", "name": "Authorization", "prefix": "Bearer "},
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    }


async def _seed(runtime: LocalRuntime, upstream: str) -> str:
    await admin_ops.create_tenant(runtime.kv, runtime.clock, "acme")
    issued = await admin_ops.issue_api_key(runtime.kv, runtime.clock, "acme")
    await admin_ops.set_credential(runtime.kv, runtime.clock, "acme", "loop", "loop-token")
    await admin_ops.register_tool(runtime.kv, "acme", _tool(upstream, "echo", "/echo"))
    await admin_ops.register_tool(runtime.kv, "acme", _tool(upstream, "broken", "/fail"))
    return issued.api_key


def _client(base_url: str, api_key: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"})
    return Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_initializes_lists_and_calls_a_proxied_tool(
    runtime: LocalRuntime, upstream_url: str, mode: str
) -> None:
    api_key = await _seed(runtime, upstream_url)
    with running_server(runtime) as base_url:
        async with _client(base_url, api_key, mode) as client:
            assert client.protocol_version == "2025-06-18"
            assert client.server_info is not None
            assert client.server_info.name == "agent-memory-gateway"
            assert client.server_capabilities.tools is not None

            listed = await client.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            assert set(tools) == {"echo", "broken"}
            assert tools["echo"].input_schema["required"] == ["text"]

            result = await client.call_tool("echo", {"text": "hello"})
            assert result.is_error is False
            reply = json.loads(result.content[0].text)  # type: ignore[union-attr]
            assert reply["echo"] == {"text": "hello"}
            assert reply["authorization"] == "Bearer loop-token"

            failed = await client.call_tool("broken", {"text": "x"})
            assert failed.is_error is True
            assert "HTTP 500" in failed.content[0].text  # type: ignore[union-attr]

            with pytest.raises(MCPError) as caught:
                await client.call_tool("nope", {})
            assert caught.value.error.code == -32602


async def test_sdk_client_with_a_bad_key_sees_our_401_error(
    runtime: LocalRuntime, upstream_url: str
) -> None:
    await _seed(runtime, upstream_url)
    # The SDK wraps the error in ExceptionGroups.
    with running_server(runtime) as base_url, pytest.raises(BaseException) as caught:
        async with _client(base_url, "amk_" + "z" * 43, "legacy"):
            pass
    [error] = [e for e in _flatten(caught.value) if isinstance(e, MCPError)]
    assert error.error.code == -32001
    assert error.error.data == {"code": "invalid_api_key"}


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _flatten(sub)]
    return [exc]
