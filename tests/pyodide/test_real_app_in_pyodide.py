"""The whole app, no double, serving requests inside a Pyodide interpreter.

Pyodide 314 with pydantic-core's emscripten wheel from PyPI (tests/pyodide/pyodide314.py)
imports the real `worker.entry`, and `Default.fetch` answers real JS Requests through the
real `worker.app` against real KV, D1, R2 and the rate limiter from Miniflare
(tests/pyodide/real_app.mjs, py314/serve_real_app.py): health, a working-memory write and
read with a memory token, an MCP `tools/list` with an API key. numpy is a stub there
(py314/numpy_stub.py): these routes never reach the vector code; recall and embeddings do,
and stay tested in CPython and, for their Cloudflare adapters, in tests/pyodide/py/.

Without Node, `node_modules/pyodide-314` or the wheel (no PyPI) the test skips; in CI it
fails instead.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from local_runtime.adapters.do_sql import split_sql_statements
from local_runtime.memory_tokens_dev import issue_token
from local_runtime.migrations import migration_files
from local_runtime.runtime import MIGRATIONS_DIR
from tests.conftest import IN_CI
from tests.miniflare.session import compatibility_date
from tests.pyodide import pyodide314

pytestmark = pytest.mark.xdist_group("pyodide-314")

KEYS = {"k1": "pyodide-314-secret-" + "a" * 32}
TENANT = "acme"
AGENT = "agent-1"
TOOL = {
    "name": "echo",
    "description": "Echoes its input",
    "url": "https://tools.example/echo",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def served() -> dict[str, Any]:
    token = issue_token(
        json.dumps(KEYS),
        TENANT,
        AGENT,
        tiers=["working"],
        scopes=["read", "write"],
        ttl=3600,
        now=time.time(),
    )
    config = {
        "mode": "serve",
        "compatibilityDate": compatibility_date(),
        "vars": {"ENVIRONMENT": "test", "MEMORY_TOKEN_KEYS": json.dumps(KEYS)},
        "migrations": [
            [path.name, list(split_sql_statements(path.read_text("utf-8")))]
            for path in migration_files(MIGRATIONS_DIR)
        ],
        "tenant": TENANT,
        "tool": TOOL,
        "agent_id": AGENT,
        "token": token,
    }
    try:
        answer = pyodide314.run_harness(config)
    except pyodide314.HarnessUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI needs Pyodide 314 and its pydantic-core wheel: {exc}")
        pytest.skip(str(exc))
    assert answer["python"].startswith("3.14"), answer["python"]
    result: dict[str, Any] = answer["result"]
    return result


def by_path(served: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    found = [r for r in served["requests"] if (r["method"], r["path"]) == (method, path)]
    assert len(found) == 1, served["requests"]
    return found[0]


def test_healthz_answers_from_the_start_up_modules(served: dict[str, Any]) -> None:
    health = by_path(served, "GET", "/healthz")
    assert health["status"] == 200, health
    assert health["body"]["status"] == "ok" and health["body"]["environment"] == "test"
    assert health["body"]["bindings"]["kv"] is True and health["body"]["bindings"]["d1"] is True
    assert health["body"]["embedding"]["model"].startswith("@cf/baai/bge-small-en-v1.5")
    assert health["imported"] == []  # health needs nothing the start-up did not import


def test_working_memory_is_written_and_read_back_with_a_memory_token(
    served: dict[str, Any],
) -> None:
    written = by_path(served, "POST", f"/api/v1/memory/{AGENT}")
    assert written["status"] == 201, written
    assert written["body"]["agent_id"] == AGENT and written["body"]["item"]["key"] == "plan"
    # The memory API is a lazy route: its module loaded on this, its first request.
    assert "worker.memory_routes" in written["imported"]
    assert "worker.memory_routes" not in served["start_up_modules"]
    read = by_path(served, "GET", f"/api/v1/memory/{AGENT}?tier=working")
    assert read["status"] == 200, read
    items = read["body"]["items"]
    assert [(item["key"], item["value"]) for item in items] == [
        ("plan", {"step": 1, "note": "in Pyodide"})
    ]
    assert written["background_errors"] == [] and read["background_errors"] == []


def test_mcp_lists_the_tenants_tools_and_the_memory_tools(served: dict[str, Any]) -> None:
    listed = by_path(served, "POST", "/mcp")
    assert listed["status"] == 200, listed
    names = {tool["name"] for tool in listed["body"]["result"]["tools"]}
    assert {"echo", "recall_memory", "store_memory"} <= names
    # Listing the memory tools does not load the semantic memory (worker.memory_wiring).
    assert not any(m.startswith("agent_memory.tiers.semantic") for m in listed["imported"])


def test_the_start_up_leaves_the_lazy_routes_and_numpy_out(served: dict[str, Any]) -> None:
    start_up = set(served["start_up_modules"])
    assert {"worker.entry", "worker.app", "gateway.tool_proxy", "gateway.mcp"} <= start_up
    lazy = {"worker.openapi", "worker.inspector_routes", "agent_runtime_do.core"}
    assert not lazy & start_up
    assert served["numpy_at_start_up"] is False
