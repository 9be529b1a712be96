"""A run whose turn a crash cut short is settled as `interrupted` (issue 47): by the next
request to its instance, or by the instance's alarm when nothing asks; its turn state counts
it, its run log ends, the admin listing and run view (what the inspector shows) say so.

The first test crashes the real local runtime: `agent-memory dev` with a model that blocks
(tests/agents/blocking_model.py) is killed with SIGKILL while two turns wait for the model,
one on an instance that ran a turn before and one on a new instance."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx

from agent_memory.tiers.episodic import EpisodicStore, RunRecord
from agent_runtime_do.core import AgentRuntimeCore
from bindings.ports.clock import FixedClock
from bindings.ports.llm import ChatMessage, ChatResult, ToolSpec
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import free_port
from tests.agents.conftest import build_request
from tests.fakes.embedder import HashingEmbedder
from tests.hardening.test_crash_consistency import start_server
from worker.app import handle
from worker.identity import ACCESS_HEADER

DAY = 86_400.0


def open_turns(rt: LocalRuntime, instance: str) -> list[str]:
    """Run ids whose turn began and has no end in the instance's log (read from its file)."""
    sql = rt.durable_object_storage(f"acme:assistant:{instance}").sql
    return [
        str(row["run_id"])
        for row in sql.exec(
            "SELECT run_id FROM run_log s WHERE kind = 'turn_start' AND NOT EXISTS "
            "(SELECT 1 FROM run_log e WHERE e.run_id = s.run_id AND e.kind = 'turn_end')"
        ).to_array()
    ]


async def get(rt: LocalRuntime, path: str) -> Any:
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    response = await handle(build_request("GET", path, token=token), rt.bindings())
    assert response.status == 200, response.body
    await rt.background.drain()
    return json.loads(response.body)


async def listed(rt: LocalRuntime) -> dict[str, str]:
    return {r["run_id"]: r["status"] for r in (await get(rt, "/admin/agents/acme/runs"))["runs"]}


def test_turns_killed_with_the_process_are_settled_after_the_restart(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "server.log"
    seeding = LocalRuntime.open(state, embedder=HashingEmbedder())
    asyncio.run(seeding.migrate())
    asyncio.run(seeding.close())
    token = mint_token(state / "access", "ops@example.com", now=time.time(), ttl=3600)
    port = free_port()
    process = start_server(state, port, log, module="tests.agents.blocking_model")
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            body = {"input": "remember the blue door", "instance_id": "desk"}
            done = client.post(
                "/v1/agents/acme/assistant/run", json=body, headers={ACCESS_HEADER: token}
            )
            assert done.status_code == 200 and done.json()["status"] == "completed", done.text
        assert process.stdout is not None

        def stuck(instance: str) -> None:
            # The server dies under it: no answer was ever promised.
            with httpx.Client(base_url=base, timeout=60) as client, suppress(httpx.TransportError):
                client.post(
                    "/v1/agents/acme/assistant/run",
                    json={"input": f"block {instance}", "instance_id": instance},
                    headers={ACCESS_HEADER: token},
                )

        waiting = [threading.Thread(target=stuck, args=(name,)) for name in ("desk", "fresh")]
        for thread in waiting:
            thread.start()
        called = set()
        while called != {"block desk", "block fresh"}:  # the model's own signal, per turn
            line = process.stdout.readline().decode()
            assert line, f"the server exited: {log.read_text()[-2000:]}"
            if line.startswith("model-called "):
                called.add(line.split(" ", 1)[1].strip())
        # The desk turn's `running` row reaches D1 from the instance's outbox in the
        # background; the run view below is opened from that row, as the inspector would.
        with httpx.Client(base_url=base, timeout=60, headers={ACCESS_HEADER: token}) as client:
            deadline = time.monotonic() + 60
            while not any(
                run["instance_id"] == "desk" and run["status"] == "running"
                for run in client.get("/admin/agents/acme/runs").json()["runs"]
            ):
                assert time.monotonic() < deadline, "the running turn never reached D1"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        for thread in waiting:
            thread.join(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL

    asyncio.run(after_the_restart(state, done.json()))


async def after_the_restart(state: Path, done: dict[str, Any]) -> None:
    clock = FixedClock(time.time())
    rt = LocalRuntime.open(state, embedder=HashingEmbedder(), clock=clock)
    try:
        [desk_run], [fresh_run] = open_turns(rt, "desk"), open_turns(rt, "fresh")
        # Before anything reaches the instances, D1 says what it said when the process died.
        before = await listed(rt)
        assert before[done["run_id"]] == "completed"
        assert before[desk_run] == "running" and before.get(fresh_run) in {"running", None}

        # The next request to the instance (the run view: what the inspector opens).
        view = await get(rt, f"/admin/agents/acme/runs/{desk_run}")
        assert view["run"]["status"] == "interrupted", view["run"]
        assert view["run"]["error"].startswith("interrupted") and view["episodes"] == []
        assert view["run_log"][-1]["kind"] == "turn_end"
        assert view["run_log"][-1]["detail"]["status"] == "interrupted"
        state_of = await rt.agents.get_by_name("acme:assistant:desk").call(
            "state", {"tenant": "acme", "agent_type": "assistant", "instance_id": "desk"}
        )
        turn = state_of["turn_state"]
        assert (turn["turn_count"], turn["completed_count"], turn["interrupted_count"]) == (2, 1, 1)
        assert (turn["failed_count"], turn["last_status"]) == (0, "interrupted")
        listing = await listed(rt)
        assert listing[desk_run] == "interrupted"
        assert listing.get(fresh_run) in {"running", None}  # its instance was not asked yet

        # The instance works on: a new turn completes and counts.
        token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
        body = {"input": "and the red door", "instance_id": "desk"}
        answer = await handle(
            build_request("POST", "/v1/agents/acme/assistant/run", body, token=token), rt.bindings()
        )
        assert json.loads(answer.body)["status"] == "completed"
        assert json.loads(answer.body)["turn_count"] == 3

        # Nothing asks the new instance: its alarm (armed when its turn began) settles it.
        clock.advance(DAY + 1)
        assert "acme:assistant:fresh" in await rt.fire_due_alarms()
        await rt.background.drain()
        assert (await listed(rt))[fresh_run] == "interrupted"
        assert open_turns(rt, "fresh") == []
    finally:
        await rt.close()


class Blocking:
    """A model that blocks until released, and says when it was called."""

    model = "blocking"

    def __init__(self) -> None:
        self.called = asyncio.Event()

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        self.called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


SCOPE = {"tenant": "acme", "agent_type": "assistant", "instance_id": "desk"}
FINISHED = RunRecord(
    run_id="01J00000000000000000000008",
    agent_type="assistant",
    instance_id="desk",
    status="failed",
    error="llm_error: down",
    started_at=5,
    finished_at=6,
)


async def test_a_turn_cancelled_in_this_life_is_settled_by_the_next_call(
    agent_runtime: LocalRuntime,
) -> None:
    model = Blocking()
    bindings = dataclasses.replace(agent_runtime.bindings(), llm=model)
    core = AgentRuntimeCore(agent_runtime._do_registry.storage("desk"), bindings)
    await core.initialize()
    turn = asyncio.ensure_future(core.call("run", {**SCOPE, "input": "plan the launch"}))
    await model.called.wait()
    # Another event reaches the object while the turn waits for its model: nothing settles.
    assert (await core.call("state", SCOPE))["turn_state"]["last_status"] == "running"
    turn.cancel()
    await asyncio.gather(turn, return_exceptions=True)

    state = (await core.call("state", SCOPE))["turn_state"]

    assert (state["turn_count"], state["interrupted_count"], state["last_status"]) == (
        1,
        1,
        "interrupted",
    )
    await agent_runtime.background.drain()
    [run] = (await EpisodicStore(agent_runtime.db, "acme").list_runs()).runs
    assert run.status == "interrupted" and run.finished_at is not None


async def test_a_new_life_settles_the_turns_of_the_old_one(agent_runtime: LocalRuntime) -> None:
    model = Blocking()
    storage = agent_runtime._do_registry.storage("desk")
    first_life = AgentRuntimeCore(storage, dataclasses.replace(agent_runtime.bindings(), llm=model))
    await first_life.initialize()
    abandoned = asyncio.ensure_future(first_life.call("run", {**SCOPE, "input": "plan it"}))
    await model.called.wait()
    await agent_runtime.background.drain()  # start_run reached D1: the run is `running`

    second_life = AgentRuntimeCore(storage, agent_runtime.bindings())
    await second_life.initialize()
    await agent_runtime.background.drain()

    [run] = (await EpisodicStore(agent_runtime.db, "acme").list_runs()).runs
    assert run.status == "interrupted" and run.steps == 0
    assert run.input["text"] == "plan it"  # start_run's row kept its input
    abandoned.cancel()
    await asyncio.gather(abandoned, return_exceptions=True)


async def test_an_interrupted_mark_never_replaces_a_finish_that_landed(
    agent_runtime: LocalRuntime,
) -> None:
    store = EpisodicStore(agent_runtime.db, "acme")
    run = FINISHED.model_copy(update={"status": "completed", "error": None})
    await store.finish_run(run)
    await store.finish_run(run.model_copy(update={"status": "interrupted", "finished_at": 9}))
    assert (await store.get_run(run.run_id)) == run
