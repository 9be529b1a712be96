"""The AgentRuntime object's storage lifecycle, driven by its alarm on the local clock (no
sleeps): idle 24 h -> run_log and turn_state cleared once in D1; an unsettled outbox ->
replayed, not cleared; a failed write retried by the alarm until it lands, or reported in
the daily brief when its retries run out; a new turn re-arms; the run log stays under its
caps; the object's figures reach D1 and the brief."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.lifecycle.brief import build_brief
from agent_memory.tiers.episodic import EpisodicStore
from agent_runtime_do.core import AgentRuntimeCore
from agent_runtime_do.storage import FAILED_WRITE_RETRIES
from bindings.ports.clock import FixedClock
from local_runtime.access_dev import mint_token
from local_runtime.durable_objects import LocalDurableObjectNamespace
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.agents.test_episodic import FlakyD1
from tests.agents.test_outbox import DiesAfterAnswering
from tests.fakes.embedder import HashingEmbedder
from worker.app import handle

NOW = 1_750_000_000.0
DAY = 86_400.0
OBJECT = "acme:assistant:default"


async def no_sleep(_: float) -> None:
    return None


def use_cores(rt: LocalRuntime, **bindings: Any) -> None:
    """The runtime's namespace, with episodic retries that do not sleep."""
    rt.agents = LocalDurableObjectNamespace(
        rt._do_registry,
        lambda storage, alarms: AgentRuntimeCore(
            storage,
            dataclasses.replace(rt.bindings(), **bindings),
            retry_sleep=no_sleep,
            alarms=alarms,
        ),
        rt.agents.alarms,
    )


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    runtime = LocalRuntime.open(
        tmp_path / "state",
        embedder=HashingEmbedder(),
        clock=FixedClock(NOW),
        vars={"AGENT_RUN_LOG_MAX_ROWS": "100"},
    )
    await runtime.migrate()
    use_cores(runtime)
    yield runtime
    await runtime.close()


def clock(rt: LocalRuntime) -> FixedClock:
    assert isinstance(rt.clock, FixedClock)
    return rt.clock


async def turn(rt: LocalRuntime, text: str = "remember the blue door") -> dict[str, Any]:
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    request = build_request("POST", "/v1/agents/acme/assistant/run", {"input": text}, token=token)
    response = await handle(request, rt.bindings())
    assert response.status == 200, response.body
    await rt.background.drain()
    answer: dict[str, Any] = json.loads(response.body)
    return answer


def count(rt: LocalRuntime, table: str) -> int:
    storage = rt.durable_object_storage(OBJECT)
    return int(storage.sql.exec(f"SELECT COUNT(*) AS n FROM {table}").one()["n"])


async def later(rt: LocalRuntime, seconds: float) -> list[str]:
    """Move the clock and fire what is due, as the dev server's alarm loop would."""
    clock(rt).advance(seconds)
    fired = await rt.fire_due_alarms()
    await rt.background.drain()
    return fired


async def reported(rt: LocalRuntime) -> dict[str, Any]:
    row = await rt.db.prepare(
        "SELECT * FROM agent_instances WHERE tenant_id = 'acme' AND instance_id = 'default'"
    ).first()
    assert row is not None
    return dict(row)


async def test_an_idle_instance_is_cleared_after_a_day_once_its_runs_are_in_d1(
    rt: LocalRuntime,
) -> None:
    answer = await turn(rt)
    assert rt.agents.alarms.get(OBJECT) == NOW + DAY
    assert count(rt, "run_log") > 0 and count(rt, "turn_state") == 1

    assert await later(rt, DAY - 60) == []  # 23 h 59 min: nothing due
    assert count(rt, "run_log") > 0
    assert await later(rt, 60) == [OBJECT]

    assert count(rt, "run_log") == 0 and count(rt, "turn_state") == 0
    assert rt.agents.alarms.get(OBJECT) is None  # nothing left to look after
    run = await EpisodicStore(rt.db, "acme").get_run(answer["run_id"])
    assert run is not None and run.status == "completed"  # D1 keeps the run
    figures = await reported(rt)
    assert figures["run_log_rows"] == 0 and figures["cleared_at"] == int((NOW + DAY) * 1000)
    assert figures["storage_bytes"] > 0
    # Procedural memory is not working state: the bandit keeps what it learned.
    assert count(rt, "procedural_workflows") > 0


async def test_a_new_turn_re_arms_and_postpones_the_clear(rt: LocalRuntime) -> None:
    await turn(rt)
    await later(rt, 20 * 3600)
    await turn(rt, "and the red one")  # 20 h later: idle restarts
    assert rt.agents.alarms.get(OBJECT) == NOW + DAY  # the earlier alarm stays set

    assert await later(rt, 4 * 3600) == [OBJECT]  # fires, finds 4 h of idleness
    assert count(rt, "run_log") > 0 and count(rt, "turn_state") == 1
    assert rt.agents.alarms.get(OBJECT) == NOW + 20 * 3600 + DAY

    await later(rt, 20 * 3600)
    assert count(rt, "run_log") == 0 and rt.agents.alarms.get(OBJECT) is None
    await turn(rt, "a new day")  # cleared, then a new turn: armed again
    assert rt.agents.alarms.get(OBJECT) == rt.clock.now() + DAY
    assert count(rt, "turn_state") == 1


async def test_an_unsettled_outbox_is_replayed_and_nothing_is_cleared_yet(
    rt: LocalRuntime,
) -> None:
    use_cores(rt, background=DiesAfterAnswering())
    answer = await turn(rt)
    assert count(rt, "pending_writes") == 3  # the isolate died before writing to D1
    rt.evict_durable_objects()
    use_cores(rt)

    assert await later(rt, DAY) == [OBJECT]

    # The object started again, replayed its outbox into D1, and kept its state.
    run = await EpisodicStore(rt.db, "acme").get_run(answer["run_id"])
    assert run is not None and run.status == "completed"
    assert count(rt, "pending_writes") == 0
    assert count(rt, "run_log") > 0 and count(rt, "turn_state") == 1
    assert rt.agents.alarms.get(OBJECT) == rt.clock.now() + 60  # looks again in a minute
    await later(rt, 60)
    assert count(rt, "run_log") == 0 and count(rt, "turn_state") == 0


async def test_a_failed_write_is_retried_by_the_alarm_until_it_lands(rt: LocalRuntime) -> None:
    flaky = FlakyD1(rt.db, target="INSERT INTO memory_episodes", failures=-1)
    use_cores(rt, db=flaky)
    answer = await turn(rt)
    assert count(rt, "failed_writes") == 1  # four attempts in the turn's background work
    assert rt.agents.alarms.get(OBJECT) == NOW + 60  # armed for the first retry

    await later(rt, 60)
    assert count(rt, "failed_writes") == 1  # D1 still refuses: next retry in 2 min
    assert (await reported(rt))["failed_writes"] == 1
    flaky.failures = 0
    await later(rt, 120)

    assert count(rt, "failed_writes") == 0
    episodes = await EpisodicStore(rt.db, "acme").episodes_for_run(answer["run_id"])
    assert [e.episode_id for e in episodes] == [answer["episode_id"]]
    assert (await reported(rt))["failed_writes"] == 0
    # Now in D1, the run's log goes at the end of the idle day like any other.
    await later(rt, DAY)
    assert count(rt, "run_log") == 0


async def test_a_write_that_keeps_failing_is_kept_and_reported_in_the_brief(
    rt: LocalRuntime,
) -> None:
    flaky = FlakyD1(rt.db, target="INSERT INTO memory_episodes", failures=-1)
    use_cores(rt, db=flaky)
    answer = await turn(rt)
    for minutes in (1, 2, 4, 8, 16):
        await later(rt, minutes * 60)
    storage = rt.durable_object_storage(OBJECT)
    row = storage.sql.exec("SELECT retries, next_retry_at, payload_json FROM failed_writes").one()
    assert row["retries"] == FAILED_WRITE_RETRIES and row["next_retry_at"] is None
    assert json.loads(row["payload_json"])["episode_id"] == answer["episode_id"]  # not lost
    await later(rt, DAY)
    # Its run is not in D1 in full: that run's log stays, and so does the turn state.
    assert count(rt, "run_log") > 0 and count(rt, "turn_state") == 1

    brief = await build_brief(rt.db, now_ms=int(rt.clock.now() * 1000), default_retention_days=90)

    acme = next(t for t in brief.tenants if t.tenant_id == "acme")
    assert acme.agent_instances == 1 and acme.agent_failed_writes == 1
    assert acme.agent_failed_oldest_age_ms == int((rt.clock.now() - NOW) * 1000)
    assert acme.agent_storage_bytes_max > 0 and acme.agent_run_log_rows_max > 0
    assert any("failed for good" in w for w in brief.warnings)


async def test_the_run_log_stays_under_its_cap_dropping_the_oldest_runs_in_d1(
    rt: LocalRuntime,
) -> None:
    answers = [await turn(rt, f"note number {i}") for i in range(15)]
    rows_before = count(rt, "run_log")
    assert rows_before > 100
    # Over the cap: the turn armed the alarm for now.
    assert rt.agents.alarms.get(OBJECT) == rt.clock.now()

    await later(rt, 0)

    assert count(rt, "run_log") <= 100
    storage = rt.durable_object_storage(OBJECT)
    kept = {r["run_id"] for r in storage.sql.exec("SELECT run_id FROM run_log").to_array()}
    assert answers[-1]["run_id"] in kept and answers[0]["run_id"] not in kept
    for answer in answers:  # every run is still in D1
        assert await EpisodicStore(rt.db, "acme").get_run(answer["run_id"]) is not None
    assert (await reported(rt))["run_log_rows"] == count(rt, "run_log")


async def test_a_failing_alarm_handler_is_retried_with_backoff(rt: LocalRuntime) -> None:
    await turn(rt)

    class Exploding:
        async def initialize(self) -> None:
            return None

        async def alarm(self, retry_count: int = 0) -> None:
            raise RuntimeError("boom")

        async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
            return {}

    rt.agents = LocalDurableObjectNamespace(
        rt._do_registry, lambda storage, alarms: Exploding(), rt.agents.alarms
    )
    assert await later(rt, DAY) == [OBJECT]
    # Cloudflare's documented retry: 2 s after the first failure, then doubling.
    assert rt.agents.alarms.get(OBJECT) == rt.clock.now() + 2
    assert await later(rt, 2) == [OBJECT]
    assert rt.agents.alarms.get(OBJECT) == rt.clock.now() + 4
