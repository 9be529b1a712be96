"""The tool gateway's checks: a tool call and MCP `initialize` + `tools/list`, with the
API key."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from local_runtime.commands.smoke.session import (
    Problem,
    Session,
    Skip,
    describe_response,
    json_of,
)

MCP_PROTOCOL = "2025-06-18"


def check_tool_call(s: Session) -> str:
    if not s.o.tool:
        raise Skip(
            "no tool named: give --tool NAME --tool-args JSON (a tool registered for "
            "the API key's tenant) and --api-key / $AGENT_MEMORY_API_KEY"
        )
    if not s.creds.api_key:
        raise Skip("no API key: give --api-key / $AGENT_MEMORY_API_KEY")
    response = s.request(
        "POST",
        f"/api/v1/tools/{quote(s.o.tool, safe='')}",
        json_body=s.o.tool_args,
        headers=s.api_key_headers(),
    )
    upstream = response.headers.get("x-upstream-status")
    if upstream is None:
        raise Problem(f"the gateway refused the call: {describe_response(response)}")
    if not upstream.isdigit() or int(upstream) >= 400:
        raise Problem(f"the gateway called the upstream, which answered HTTP {upstream}")
    return f"{s.o.tool}: the upstream answered HTTP {upstream} ({len(response.content)} bytes)"


def mcp_call(s: Session, message: dict[str, Any]) -> Any:
    response = s.request(
        "POST",
        "/mcp",
        json_body=message,
        headers={
            **s.api_key_headers(),
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MCP_PROTOCOL,
        },
    )
    data = json_of(response)
    if response.status_code != 200 or not isinstance(data, dict):
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and "message" in error:
            code = (error.get("data") or {}).get("code", error.get("code"))
            raise Problem(
                f"{message['method']}: HTTP {response.status_code} {code}: {error['message']}"
            )
        raise Problem(f"{message['method']}: {describe_response(response)}")
    if "error" in data:
        raise Problem(f"{message['method']}: JSON-RPC error {data['error']}")
    return data.get("result")


def check_mcp(s: Session) -> str:
    if not s.creds.api_key:
        raise Skip("no API key: give --api-key / $AGENT_MEMORY_API_KEY")
    init = mcp_call(
        s,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": MCP_PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "agent-memory-smoke", "version": "1"},
            },
        },
    )
    if not isinstance(init, dict) or "protocolVersion" not in init:
        raise Problem(f"initialize answered no protocolVersion: {init!r}"[:200])
    listed = mcp_call(s, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = listed.get("tools") if isinstance(listed, dict) else None
    if not isinstance(tools, list):
        raise Problem("tools/list answered no tools list")
    names = [str(t.get("name")) for t in tools if isinstance(t, dict)]
    if s.o.tool and s.o.tool not in names:
        raise Problem(f"tools/list does not list {s.o.tool} (it lists {names})")
    server = (init.get("serverInfo") or {}).get("name", "?")
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return (
        f"initialize: protocol {init['protocolVersion']}, server {server}; "
        f"tools/list: {len(names)} tool(s){': ' + shown if names else ''}"
    )
