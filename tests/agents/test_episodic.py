"""Tier 2 episodic memory in D1: tenant scoping, idempotent writes, writes off the response
path, retries with backoff, and failed writes logged by id and kept with their payload
(never silent)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_memory.directory import home_of
from agent_memory.ids import new_ulid
from agent_memory.tiers.episodic import (
    Episode,
    EpisodicStore,
    EpisodicWriter,
    FailedWrite,
    RunRecord,
)
from agent_runtime_do.core import AgentRuntimeCore
from bindings.ports.d1 import D1Database, D1Error, D1Result, D1Statement
from bindings.ports.sql import Row, SqlValue
from local_runtime.access_dev import mint_token
from local_runtime.background import LocalBackgroundTasks
from local_runtime.durable_objects import LocalDurableObjectNamespace
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.fakes.embedder import HashingEmbedder
from worker.app import handle

NOW_MS = 1_750_000_000_000


class FlakyStatement:
    def __init__(self, inner: D1Statement, owner: FlakyD1, sql: str) -> None:
        self._inner = inner
        self._owner = owner
        self._sql = sql

    def bind(self, *params: SqlValue | bool) -> FlakyStatement:
        return FlakyStatement(self._inner.bind(*params), self._owner, self._sql)

    async def run(self) -> D1Result:
        await self._owner.before_write(self._sql)
        return await self._inner.run()

    async def all(self) -> D1Result:
        return await self._inner.all()

    async def first(self) -> Row | None:
        return await self._inner.first()

    async def first_value(self, column: str) -> Any:
        return await self._inner.first_value(column)


class FlakyD1:
    """Wraps a D1 database; writes whose SQL matches `target` fail `failures` times
    (-1: always), or wait for `gate` when one is set."""

    def __init__(self, inner: D1Database, target: str = "", failures: int = 0) -> None:
        self._inner = inner
        self.target = target
        self.failures = failures
        self.attempts = 0
        self.gate: asyncio.Event | None = None

    async def before_write(self, sql: str) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.target and self.target in sql:
            self.attempts += 1
            if self.failures != 0:
                self.failures -= 1
                raise D1Error("D1_ERROR: injected failure: SQLITE_BUSY")

    def prepare(self, sql: str) -> FlakyStatement:
        return FlakyStatement(self._inner.prepare(sql), self, sql)

    async def batch(self, statements: Sequence[D1Statement]) -> list[D1Result]:
        flaky = [s for s in statements if isinstance(s, FlakyStatement)]
        for statement in flaky:
            await self.before_write(statement._sql)
        return await self._inner.batch([s._inner for s in flaky])


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    rt = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    await rt.migrate()
    yield rt
    await rt.close()


def run_record(run_id: str, **fields: Any) -> RunRecord:
    values: dict[str, Any] = {
        "run_id": run_id,
        "agent_type": "assistant",
        "instance_id": "default",
        "status": "running",
        "input": {"text": "hi"},
        "started_at": NOW_MS,
    }
    return RunRecord(**{**values, **fields})


def episode(run_id: str, created_at: int, agent_type: str = "assistant") -> Episode:
    return Episode(
        episode_id=new_ulid(created_at / 1000),
        run_id=run_id,
        agent_type=agent_type,
        instance_id="default",
        kind="outcome",
        content=f"episode at {created_at}",
        created_at=created_at,
    )


# --- the store ------------------------------------------------------------------------


async def test_recent_episodes_are_newest_first_and_scoped(runtime: LocalRuntime) -> None:
    acme = EpisodicStore(runtime.db, "acme")
    globex = EpisodicStore(runtime.db, "globex")
    run_id = new_ulid(NOW_MS / 1000)
    written = [episode(run_id, NOW_MS + i) for i in range(15)]
    for item in written:
        await acme.append_episode(item)
    await acme.append_episode(episode(run_id, NOW_MS + 100, agent_type="sdr"))
    await globex.append_episode(episode(run_id, NOW_MS + 200))
    recent = await acme.recent_episodes("assistant")
    assert [e.episode_id for e in recent] == [e.episode_id for e in reversed(written)][:10]
    assert [e.content for e in await globex.recent_episodes("assistant")] == [
        f"episode at {NOW_MS + 200}"
    ]


async def test_writes_are_idempotent_and_order_tolerant(runtime: LocalRuntime) -> None:
    store = EpisodicStore(runtime.db, "acme")
    run_id = new_ulid(NOW_MS / 1000)
    done = run_record(
        run_id, status="completed", output={"text": "ok"}, steps=2, finished_at=NOW_MS + 5
    )
    # The completion lands first (its start was lost or delayed): the row is still whole.
    await store.finish_run(done)
    await store.start_run(
        run_id=run_id,
        agent_type="assistant",
        instance_id="default",
        input={"text": "hi"},
        started_at=NOW_MS,
    )
    item = episode(run_id, NOW_MS + 5)
    await store.append_episode(item)
    await store.append_episode(item)
    found = await store.get_run(run_id)
    assert found is not None and found.status == "completed" and found.output == {"text": "ok"}
    assert len(await store.episodes_for_run(run_id)) == 1


# --- the writer -----------------------------------------------------------------------


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def test_failed_writes_are_retried_with_backoff(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyD1(runtime.db, target="INSERT INTO memory_episodes", failures=2)
    background = LocalBackgroundTasks()
    sleep = RecordingSleep()
    writer = EpisodicWriter(EpisodicStore(flaky, "acme"), background, sleep=sleep)
    run_id = new_ulid(NOW_MS / 1000)
    writer.append_episode(episode(run_id, NOW_MS))
    await background.drain()
    assert flaky.attempts == 3
    assert sleep.delays == [0.25, 0.5]
    assert len(await EpisodicStore(runtime.db, "acme").episodes_for_run(run_id)) == 1
    assert "retrying" in caplog.text


async def test_a_write_that_keeps_failing_is_logged_by_id_and_kept_with_its_payload(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyD1(runtime.db, target="INSERT INTO memory_episodes", failures=-1)
    background = LocalBackgroundTasks()
    failed: list[FailedWrite] = []
    writer = EpisodicWriter(
        EpisodicStore(flaky, "acme"), background, on_failure=failed.append, sleep=RecordingSleep()
    )
    run_id = new_ulid(NOW_MS / 1000)
    lost = episode(run_id, NOW_MS)
    writer.append_episode(lost)
    # Later writes still go through, in order, after the failed one gave up.
    writer.complete_run(run_record(run_id, status="completed", finished_at=NOW_MS + 1))
    with caplog.at_level(logging.ERROR):
        await background.drain()
    assert flaky.attempts == 4
    assert [f.op for f in failed] == ["append_episode"]
    assert failed[0].payload["content"] == lost.content
    assert failed[0].attempts == 4 and "injected failure" in failed[0].error
    record = next(r for r in caplog.records if r.levelno == logging.ERROR)
    assert run_id in record.getMessage() and lost.episode_id in record.getMessage()
    # Ids and sizes only: the content stays in the failed_writes record, not in the log.
    assert lost.content not in record.getMessage()
    completed = await EpisodicStore(runtime.db, "acme").get_run(run_id)
    assert completed is not None and completed.status == "completed"


async def test_writes_run_in_submission_order(runtime: LocalRuntime) -> None:
    order: list[str] = []
    flaky = FlakyD1(runtime.db)
    original = flaky.before_write

    async def spy(sql: str) -> None:
        await original(sql)
        order.append(sql.split()[2])

    flaky.before_write = spy  # type: ignore[method-assign]
    background = LocalBackgroundTasks()
    writer = EpisodicWriter(EpisodicStore(flaky, "acme"), background)
    run_id = new_ulid(NOW_MS / 1000)
    writer.start_run(run_record(run_id))
    writer.append_episode(episode(run_id, NOW_MS + 1))
    writer.complete_run(run_record(run_id, status="completed", finished_at=NOW_MS + 2))
    await background.drain()
    # The episode is its own `memory_written` event (write policy, ADR-0051; 0019).
    assert order == ["agent_runs", "memory_episodes", "agent_runs"]


# --- through the Durable Object and the route -----------------------------------------


def use_core(runtime: LocalRuntime, make: Callable[[Any], AgentRuntimeCore]) -> None:
    runtime.agents = LocalDurableObjectNamespace(
        runtime._do_registry, lambda storage, alarms: make(storage)
    )


async def post_run(runtime: LocalRuntime, text: str) -> dict[str, Any]:
    token = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now())
    request = build_request("POST", "/v1/agents/acme/assistant/run", {"input": text}, token=token)
    response = await handle(request, runtime.bindings())
    assert response.status == 200, response.json()
    result: dict[str, Any] = response.json()
    return result


async def test_episodic_writes_never_block_the_response(runtime: LocalRuntime) -> None:
    await home_of(runtime.bindings(), "acme")  # placed by an earlier request
    flaky = FlakyD1(runtime.db)
    flaky.gate = asyncio.Event()  # every D1 write waits until we open the gate
    runtime.db = flaky  # type: ignore[assignment]
    result = await post_run(runtime, "quick answer please")
    assert result["status"] == "completed"
    store = EpisodicStore(runtime.db, "acme")
    assert await store.get_run(result["run_id"]) is None  # written after the response
    assert runtime.background.pending > 0
    flaky.gate.set()
    await runtime.background.drain()
    found = await store.get_run(result["run_id"])
    assert found is not None and found.status == "completed"


async def test_an_injected_d1_failure_is_retried_then_surfaced_in_the_admin_view(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyD1(runtime.db, target="INSERT INTO memory_episodes", failures=-1)
    runtime.db = flaky  # type: ignore[assignment]
    sleep = RecordingSleep()
    use_core(
        runtime, lambda storage: AgentRuntimeCore(storage, runtime.bindings(), retry_sleep=sleep)
    )
    with caplog.at_level(logging.ERROR):
        result = await post_run(runtime, "remember the red door")
        await runtime.background.drain()
    assert sleep.delays == [0.25, 0.5, 1.0]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("append_episode" in m and result["episode_id"] in m for m in errors)
    assert not any("remember the red door" in m for m in errors)
    token = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now())
    request = build_request("GET", f"/admin/agents/acme/runs/{result['run_id']}", token=token)
    view = (await handle(request, runtime.bindings())).json()
    assert view["run"]["status"] == "completed"  # the other writes went through
    assert view["episodes"] == []
    [failed] = view["failed_writes"]
    assert failed["op"] == "append_episode" and failed["attempts"] == 4
    assert failed["payload"]["episode_id"] == result["episode_id"]
    assert "remember the red door" in failed["payload"]["content"]


async def test_a_transient_d1_failure_loses_nothing(runtime: LocalRuntime) -> None:
    flaky = FlakyD1(runtime.db, target="INSERT INTO agent_runs", failures=2)
    runtime.db = flaky  # type: ignore[assignment]
    use_core(
        runtime,
        lambda storage: AgentRuntimeCore(storage, runtime.bindings(), retry_sleep=RecordingSleep()),
    )
    first = await post_run(runtime, "one")
    await runtime.background.drain()
    second = await post_run(runtime, "two")
    await runtime.background.drain()
    assert second["context_episode_ids"] == [first["episode_id"]]
    page = await EpisodicStore(runtime.db, "acme").list_runs()
    assert [(r.run_id, r.status) for r in page.runs] == [
        (second["run_id"], "completed"),
        (first["run_id"], "completed"),
    ]
