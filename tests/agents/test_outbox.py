"""Acknowledged turns survive the isolate dying before its background writes ran: the
episodic writes a turn queued are kept in the object's SQLite
(`agent_runtime_do.storage.DurableOutbox`) and replayed when the object starts again, so a
run the client saw `completed` never stays `running` in D1 (the crash-consistency test found
this under SIGKILL)."""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine
from typing import Any

from agent_memory.tiers.episodic import EpisodicStore
from agent_runtime_do.core import AgentRuntimeCore
from local_runtime.runtime import LocalRuntime

SCOPE = {"tenant": "acme", "agent_type": "assistant", "instance_id": "outbox"}


class DiesAfterAnswering:
    """A `BackgroundTasks` whose work never runs: the isolate went away after the
    response, taking its in-memory queue with it."""

    def __init__(self) -> None:
        self.dropped = 0

    def wait_until(self, work: Coroutine[Any, Any, Any]) -> None:
        work.close()
        self.dropped += 1


async def test_writes_queued_before_a_crash_are_replayed_when_the_object_restarts(
    agent_runtime: LocalRuntime,
) -> None:
    storage = agent_runtime._do_registry.storage("outbox")
    dying = DiesAfterAnswering()
    first_life = AgentRuntimeCore(
        storage, dataclasses.replace(agent_runtime.bindings(), background=dying)
    )
    await first_life.initialize()
    answered = await first_life.call("run", {**SCOPE, "input": "remember the blue door"})
    assert answered["status"] == "completed" and dying.dropped > 0
    store = EpisodicStore(agent_runtime.db, "acme")
    assert await store.get_run(answered["run_id"]) is None  # nothing reached D1
    pending = storage.sql.exec("SELECT op FROM pending_writes ORDER BY seq").to_array()
    assert [row["op"] for row in pending] == ["start_run", "append_episode", "complete_run"]

    second_life = AgentRuntimeCore(storage, agent_runtime.bindings())
    await second_life.initialize()  # replays the outbox in the background
    await agent_runtime.background.drain()

    run = await store.get_run(answered["run_id"])
    assert run is not None and run.status == "completed"
    episodes = await store.episodes_for_run(answered["run_id"])
    assert [e.episode_id for e in episodes] == [answered["episode_id"]]
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM pending_writes").one()["n"] == 0


async def test_settled_writes_leave_nothing_in_the_outbox(agent_runtime: LocalRuntime) -> None:
    storage = agent_runtime._do_registry.storage("settled")
    core = AgentRuntimeCore(storage, agent_runtime.bindings())
    await core.initialize()
    await core.call("run", {**SCOPE, "instance_id": "settled", "input": "hello"})
    await agent_runtime.background.drain()
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM pending_writes").one()["n"] == 0
