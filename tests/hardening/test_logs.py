"""Finding 6 of issue 14: logs carry ids, hashes and sizes, never memory content,
subjects, credentials or payloads. Every path below logs something (a lost write, a failed
memory tool, an erase, an unhandled error); the secrets it handled must not appear in any
log record, message or traceback, while a lost payload stays recoverable."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agent_memory.memory import Memory
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_runtime_do.core import AgentRuntimeCore
from gateway import admin_ops
from gateway.credentials import ISOLATE_CACHE
from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.agents.test_episodic import FlakyD1, RecordingSleep, use_core
from worker.app import handle

SUBJECT = "Zelda Quartermaine-Subject"
CONTENT = "zelda keeps the vault code 4411 under the blue lamp"
QUERY = "where does zelda keep the vault code"
METADATA_SECRET = "private-metadata-7731"


def all_log_text(records: list[logging.LogRecord]) -> str:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(record) for record in records)


async def _admin(rt: LocalRuntime, method: str, path: str, body: Any = None) -> HttpResponse:
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    return await handle(build_request(method, path, body, token=token), rt.bindings())


async def _mcp(rt: LocalRuntime, key: str, name: str, arguments: dict[str, Any]) -> Any:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    headers = Headers({"Authorization": f"Bearer {key}", "content-type": "application/json"})
    request = HttpRequest("POST", "https://gw.test/mcp", headers, json.dumps(message).encode())
    return (await handle(request, rt.bindings())).json()


async def test_logs_never_carry_content_subjects_credentials_or_payloads(
    agent_runtime: LocalRuntime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = agent_runtime
    caplog.set_level(logging.DEBUG)
    secrets = [SUBJECT, CONTENT, QUERY, METADATA_SECRET, "vault code"]

    # 1. An agent run whose episode write is lost (D1 keeps failing): logged, not dumped.
    flaky = FlakyD1(rt.db, target="INSERT INTO memory_episodes", failures=-1)
    rt.db = flaky  # type: ignore[assignment]
    use_core(
        rt, lambda storage: AgentRuntimeCore(storage, rt.bindings(), retry_sleep=RecordingSleep())
    )
    body = {"input": CONTENT, "subject": SUBJECT, "metadata": {"note": METADATA_SECRET}}
    ran = await _admin(rt, "POST", "/v1/agents/acme/assistant/run", body)
    assert ran.status == 200, ran.json()
    await rt.background.drain()
    view = (await _admin(rt, "GET", f"/admin/agents/acme/runs/{ran.json()['run_id']}")).json()
    [failed] = view["failed_writes"]
    assert CONTENT in failed["payload"]["content"]  # recoverable, just not logged
    assert failed["payload"]["subject"] == SUBJECT
    assert any("LOST" in r.getMessage() for r in caplog.records)
    rt.db = flaky._inner  # type: ignore[assignment]

    # 2. MCP memory tools, including one failing with the content in its exception.
    ISOLATE_CACHE.clear()
    assert rt.kv is not None
    await admin_ops.create_tenant(rt.kv, rt.clock, "acme", memory_enabled=True)
    key = (await admin_ops.issue_api_key(rt.kv, rt.clock, "acme")).api_key
    stored = await _mcp(
        rt, key, "store_memory", {"content": CONTENT, "metadata": {"subject": SUBJECT}}
    )
    assert stored["result"]["isError"] is False, stored
    recalled = await _mcp(rt, key, "recall_memory", {"query": QUERY})
    assert recalled["result"]["isError"] is False

    async def exploding_learn(self: SemanticMemory, fact: Any) -> Any:
        raise RuntimeError(f"could not store {fact.content!r} about {fact.subject!r}")

    monkeypatch.setattr(SemanticMemory, "learn", exploding_learn)
    broken = await _mcp(
        rt, key, "store_memory", {"content": CONTENT, "metadata": {"subject": SUBJECT}}
    )
    assert broken["result"]["isError"] is True
    assert any("store_memory failed" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()

    # 3. Erasing the subject, then an unhandled error on the erase route (path = subject).
    erased = await _admin(rt, "DELETE", f"/admin/tenants/acme/subjects/{SUBJECT}")
    assert erased.status == 200, erased.json()

    def broken_eraser(*_: Any) -> Any:
        raise RuntimeError("eraser exploded")

    monkeypatch.setattr(Memory, "eraser", broken_eraser)
    crashed = await _admin(rt, "DELETE", f"/admin/tenants/acme/subjects/{SUBJECT}")
    assert crashed.status == 500
    assert any("unhandled error" in r.getMessage() for r in caplog.records)

    text = all_log_text(caplog.records)
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    for secret in [*secrets, SUBJECT.replace(" ", "%20"), key, token]:
        assert secret not in text, f"{secret!r} leaked into the logs"
