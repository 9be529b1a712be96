"""Recall statistics and `memory_retrieved` events: written after the response, retried,
never counted twice, never lost."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from agent_memory.governance.events import EventLog
from agent_memory.tiers.semantic import recall_record as record_module
from agent_memory.tiers.semantic.recall_record import unrecorded
from bindings.ports.d1 import D1Error, D1Result
from local_runtime.background import LocalBackgroundTasks
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import MemoryFactory, event_count, fact_rows
from tests.semantic.fakes import SpyD1

FACTS = [
    {"content": "Dana prefers short emails on Tuesday", "subject": "dana"},
    {"content": "Lee asked about SSO support", "subject": "lee"},
]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(record_module, "RECORD_BASE_DELAY", 0.0)
    yield
    record_module._UNRECORDED.clear()


class CommitThenFail:
    """A D1 whose next `fail` batches commit and then report an error (outcome unknown)."""

    def __init__(self, inner: SpyD1) -> None:
        self.inner = inner
        self.fail = 0

    def prepare(self, sql: str) -> Any:
        return self.inner.prepare(sql)

    async def batch(self, statements: Sequence[Any]) -> list[D1Result]:
        result = await self.inner.batch(statements)
        if self.fail > 0 and any("memory_events" in s.sql for s in statements):
            self.fail -= 1
            raise D1Error("D1_ERROR: injected: network error after commit")
        return result

    async def exec(self, sql: str) -> Any:
        return await self.inner.exec(sql)


async def _counts(rt: LocalRuntime) -> dict[str, int]:
    return {row["content"]: row["recall_count"] for row in await fact_rows(rt)}


async def test_stats_and_event_are_written_after_the_response(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    background = LocalBackgroundTasks()
    memory = make_memory(background=background)
    await memory.learn_many(FACTS)
    await background.drain()
    found = await memory.recall("SSO support", 1)
    # The answer is out; its record is not written yet...
    assert found.event_id is not None and await event_count(rt) == 0
    await background.drain()
    # ...and is once the background work ran.
    [event] = await EventLog("acme", rt.db).recent("memory_retrieved")
    assert event.event_id == found.event_id
    assert (await _counts(rt))["Lee asked about SSO support"] == 1


async def test_a_write_that_fails_every_attempt_is_kept_and_written_with_the_next_recall(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    memory = make_memory()
    await memory.learn_many(FACTS)
    spy_db.fail_pattern = "INSERT INTO memory_events"
    first = await memory.recall("SSO support", 1)
    # Nothing half-written: the stats and the event are one transaction.
    assert await event_count(rt) == 0
    assert (await _counts(rt))["Lee asked about SSO support"] == 0
    assert [r.event.event_id for r in unrecorded("acme")] == [first.event_id]
    spy_db.fail_pattern = None
    second = await memory.recall("SSO support", 1)
    events = await EventLog("acme", rt.db).recent("memory_retrieved")
    assert {e.event_id for e in events} == {first.event_id, second.event_id}
    assert (await _counts(rt))["Lee asked about SSO support"] == 2
    assert unrecorded("acme") == []


async def test_a_retry_after_an_unknown_outcome_never_counts_twice(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    db = CommitThenFail(spy_db)
    memory = make_memory(db=db)
    await memory.learn_many(FACTS)
    db.fail = 1  # the first attempt commits, then reports a failure; the retry runs again
    found = await memory.recall("SSO support", 1)
    [event] = await EventLog("acme", rt.db).recent("memory_retrieved")
    assert event.event_id == found.event_id
    assert (await _counts(rt))["Lee asked about SSO support"] == 1
    assert unrecorded("acme") == []
