"""A real MCP client (the official `mcp` SDK) against the local dev server.

The local runtime serves `worker.app.handle` on a loopback port; the proxied tool's
upstream is a second loopback server. Both run in threads of this process; the SDK client
runs in its own environment (tests/mcp_sdk: it needs a newer pydantic than the Worker
deploys) as a subprocess. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from gateway import admin_ops
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.conftest import PROJECT_ROOT
from tests.gateway.loopback import running_upstream

SDK_PROJECT = PROJECT_ROOT / "tests" / "mcp_sdk"


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


def run_sdk_client(*args: str) -> dict[str, Any]:
    """Run tests/mcp_sdk/client.py in the SDK's own environment; its last line is JSON.

    That environment (tests/mcp_sdk/.venv) belongs to these tests and uv installs it without
    bytecode: with PYTHONDONTWRITEBYTECODE set, every run compiled the SDK, pydantic and
    httpx from source again (~2.5 s of the ~4 s a run takes), so the first run writes it."""
    skipped = ("UV_PROJECT", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skipped)}
    done = subprocess.run(
        [
            "uv",
            "run",
            "--project",
            str(SDK_PROJECT),
            "--frozen",
            "--quiet",
            "python",
            str(SDK_PROJECT / "client.py"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_sdk_client_initializes_lists_and_calls_a_proxied_tool(
    runtime: LocalRuntime, upstream_url: str, mode: str, version: str
) -> None:
    api_key = await _seed(runtime, upstream_url)
    with running_server(runtime) as base_url:
        seen = await asyncio.to_thread(run_sdk_client, "list_and_call", base_url, api_key, mode)
    assert seen["protocol_version"] == version
    assert seen["server_name"] == "agent-memory-gateway"
    assert seen["has_tools_capability"] is True
    assert set(seen["tools"]) == {"echo", "broken"}
    assert seen["tools"]["echo"]["required"] == ["text"]
    assert seen["echo"]["is_error"] is False
    reply = json.loads(seen["echo"]["text"])
    assert reply["echo"] == {"text": "hello"}
    assert reply["authorization"] == "Bearer loop-token"
    assert seen["broken"]["is_error"] is True
    assert "HTTP 500" in seen["broken"]["text"]
    assert seen["unknown_tool_error"] == -32602


async def test_sdk_client_with_a_bad_key_sees_our_401_error(
    runtime: LocalRuntime, upstream_url: str
) -> None:
    await _seed(runtime, upstream_url)
    with running_server(runtime) as base_url:
        seen = await asyncio.to_thread(
            run_sdk_client, "bad_key", base_url, "amk_" + "z" * 43, "legacy"
        )
    assert seen["errors"] == [{"code": -32001, "data": {"code": "invalid_api_key"}}]
