"""The real app serving requests inside Pyodide 314 (tests/pyodide/test_real_app_in_pyodide.py).

`serve(config_json)` imports the real `worker.entry` (and so the real `worker.app`, pydantic
with its compiled core, httpx, the workers SDK), then answers requests the way workerd
hands them over: `Default(ctx, env).fetch(js Request)`, with `env` holding real KV, D1, R2
and the rate limiter from Miniflare, the JS models of Workers AI and Vectorize, and the
vars. Setup goes through the project's own code over the same bindings: the D1
migrations' statements (split by the pytest side) in one batch per file, a gateway tenant,
API key and tool (`gateway.admin_ops`). The memory token comes from the pytest side
(PyJWT), so the Worker's WebCrypto verifier checks an independent signer.

Returns JSON: the import's modules, and per request its status, JSON body, and the project
modules that request imported (the lazy routes load on first use), plus the background
work's errors (`waitUntil`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import harness_js
from js import Object, Request
from pyodide.ffi import to_js

PROJECT = "/app/src/"


def _project_modules() -> set[str]:
    return {
        name
        for name, module in list(sys.modules.items())
        if (getattr(module, "__file__", None) or "").startswith(PROJECT)
    }


async def _migrate(statements_by_file: list[tuple[str, list[str]]]) -> None:
    from bindings.cloudflare.d1 import CloudflareD1Database

    db = CloudflareD1Database(harness_js.env.DB)
    for _name, statements in statements_by_file:
        await db.batch([db.prepare(sql) for sql in statements])


async def _seed_gateway(config: dict[str, Any]) -> str:
    from bindings.cloudflare.kv import CloudflareKVNamespace
    from bindings.ports.clock import SystemClock
    from gateway import admin_ops

    kv = CloudflareKVNamespace(harness_js.env.KV)
    clock = SystemClock()
    await admin_ops.create_tenant(kv, clock, config["tenant"], memory_enabled=True)
    await admin_ops.register_tool(kv, config["tenant"], config["tool"])
    return (await admin_ops.issue_api_key(kv, clock, config["tenant"])).api_key


async def _fetch(
    entry: Any, method: str, path: str, body: Any = None, bearer: str | None = None
) -> dict[str, Any]:
    before = _project_modules()
    # MCP's Streamable HTTP wants both types accepted; the other routes ignore `accept`.
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if bearer is not None:
        headers["authorization"] = f"Bearer {bearer}"
    init: dict[str, Any] = {"method": method, "headers": headers}
    if body is not None:
        init["body"] = json.dumps(body)
    request = Request.new(
        f"https://worker.example{path}", to_js(init, dict_converter=Object.fromEntries)
    )
    ctx = harness_js.newExecutionContext()
    response = await entry.Default(ctx, harness_js.env).fetch(request)
    js_response = response.js_object
    text = await js_response.text()
    background_errors = list(await ctx.drain())
    return {
        "method": method,
        "path": path,
        "status": int(js_response.status),
        "content_type": js_response.headers.get("content-type"),
        "body": json.loads(text) if text else None,
        "imported": sorted(_project_modules() - before),
        "background_errors": background_errors,
    }


async def serve(config_json: str) -> str:
    config = json.loads(config_json)
    import worker.entry as entry

    at_start_up = sorted(_project_modules())
    numpy_at_start_up = "numpy" in sys.modules
    await _migrate(config["migrations"])
    api_key = await _seed_gateway(config)
    agent, token = config["agent_id"], config["token"]
    item = {"tier": "working", "key": "plan", "value": {"step": 1, "note": "in Pyodide"}}
    mcp_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    transcript = [
        await _fetch(entry, "GET", "/healthz"),
        await _fetch(entry, "POST", f"/api/v1/memory/{agent}", item, bearer=token),
        await _fetch(entry, "GET", f"/api/v1/memory/{agent}?tier=working", bearer=token),
        await _fetch(entry, "POST", "/mcp", mcp_list, bearer=api_key),
    ]
    return json.dumps(
        {
            "start_up_modules": at_start_up,
            "numpy_at_start_up": numpy_at_start_up,
            "requests": transcript,
        }
    )
