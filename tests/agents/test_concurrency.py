"""20 concurrent runs against one agent instance lose no turn_state update and no run_log row.

Twice: through the local Durable Object namespace (which serialises calls to one object,
as Cloudflare's input gates do while storage is awaited), and straight against the core
with no lock at all, so turns really interleave at every await (Cloudflare may deliver a
second event while the first awaits the model). Correctness must not depend on the lock.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from agent_runtime_do.core import AgentRuntimeCore
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import Send

N = 20
SCOPE = {"tenant": "acme", "agent_type": "assistant", "instance_id": "shared"}
# turn_start, 3 memory reads, llm_call, memory_write, tool_call, llm_call, turn_end
ROWS_PER_RUN = 9


async def assert_nothing_lost(
    runtime: LocalRuntime, core_call: Any, results: list[dict[str, Any]]
) -> None:
    await runtime.background.drain()
    assert all(r["status"] == "completed" for r in results)
    run_ids = {r["run_id"] for r in results}
    assert len(run_ids) == N
    assert sorted(r["turn_count"] for r in results) == list(range(1, N + 1))
    state = (await core_call("state", SCOPE))["turn_state"]
    assert (state["turn_count"], state["completed_count"], state["failed_count"]) == (N, N, 0)
    for run_id in run_ids:
        log = (await core_call("run_log", {**SCOPE, "run_id": run_id}))["run_log"]
        assert len(log) == ROWS_PER_RUN
        assert [row["step"] for row in log] == list(range(ROWS_PER_RUN))
    row = (
        await runtime.db.prepare(
            "SELECT COUNT(*) AS n FROM agent_runs WHERE tenant_id = ? AND status = 'completed'"
        )
        .bind("acme")
        .first()
    )
    assert row is not None and row["n"] == N


async def test_twenty_concurrent_requests_to_one_instance(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    responses = await asyncio.gather(
        *(
            send(
                "POST",
                "/v1/agents/acme/assistant/run",
                {"input": f"job {i}", "instance_id": "shared"},
            )
            for i in range(N)
        )
    )
    assert [r.status for r in responses] == [200] * N
    stub = agent_runtime.agents.get_by_name("acme:assistant:shared")
    await assert_nothing_lost(agent_runtime, stub.call, [r.json() for r in responses])


async def test_twenty_interleaved_turns_on_an_unlocked_core(agent_runtime: LocalRuntime) -> None:
    storage = agent_runtime._do_registry.storage("unlocked")
    core = AgentRuntimeCore(storage, agent_runtime.bindings())
    await core.initialize()
    results = await asyncio.gather(
        *(core.call("run", {**SCOPE, "input": f"job {i}"}) for i in range(N))
    )
    # The turns did interleave: some run's log rows are not contiguous in seq order.
    rows = storage.sql.exec("SELECT run_id FROM run_log ORDER BY seq").to_array()
    runs_in_order = [row["run_id"] for row in rows]
    blocks: dict[str, int] = defaultdict(int)
    previous = None
    for run_id in runs_in_order:
        if run_id != previous:
            blocks[run_id] += 1
        previous = run_id
    assert max(blocks.values()) > 1
    await assert_nothing_lost(agent_runtime, core.call, results)
