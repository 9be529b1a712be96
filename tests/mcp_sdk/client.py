"""Drive the official MCP Python SDK's client against a running server; print what it saw.

    uv run --project tests/mcp_sdk --frozen python tests/mcp_sdk/client.py SCENARIO URL KEY MODE

Runs in its own environment (tests/mcp_sdk/pyproject.toml), so it imports nothing of the
project. The last line of stdout is one JSON object; tests/gateway/test_mcp_sdk_client.py
asserts on it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def _client(base_url: str, api_key: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"})
    return Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode)


async def list_and_call(base_url: str, api_key: str, mode: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with _client(base_url, api_key, mode) as client:
        seen["protocol_version"] = client.protocol_version
        seen["server_name"] = client.server_info.name if client.server_info else None
        seen["has_tools_capability"] = client.server_capabilities.tools is not None
        listed = await client.list_tools()
        seen["tools"] = {tool.name: tool.input_schema for tool in listed.tools}
        result = await client.call_tool("echo", {"text": "hello"})
        seen["echo"] = {"is_error": result.is_error, "text": result.content[0].text}
        failed = await client.call_tool("broken", {"text": "x"})
        seen["broken"] = {"is_error": failed.is_error, "text": failed.content[0].text}
        try:
            await client.call_tool("nope", {})
            seen["unknown_tool_error"] = None
        except MCPError as exc:
            seen["unknown_tool_error"] = exc.error.code
    return seen


async def bad_key(base_url: str, api_key: str, mode: str) -> dict[str, Any]:
    try:
        async with _client(base_url, api_key, mode):
            return {"errors": []}
    except BaseException as exc:  # the SDK wraps errors in ExceptionGroups
        errors = [e for e in _flatten(exc) if isinstance(e, MCPError)]
        return {"errors": [{"code": e.error.code, "data": e.error.data} for e in errors]}


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _flatten(sub)]
    return [exc]


SCENARIOS = {"list_and_call": list_and_call, "bad_key": bad_key}


def main() -> None:
    scenario, base_url, api_key, mode = sys.argv[1:5]
    print(json.dumps(asyncio.run(SCENARIOS[scenario](base_url, api_key, mode))))


if __name__ == "__main__":
    main()
