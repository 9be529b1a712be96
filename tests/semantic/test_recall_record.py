"""Recall statistics and `memory_retrieved` events: written after the response, retried,
never counted twice, never lost: a record D1 refuses waits in KV (outliving the isolate)
until the tenant's next recall or the daily cron writes it back."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.tiers.semantic import recall as record_module
from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Error, D1Result
from bindings.ports.errors import BindingUnavailableError
from local_runtime.background import LocalBackgroundTasks
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import MemoryFactory, event_count, fact_rows, retrieved_events
from tests.semantic.fakes import SpyD1
from worker.cron import DAILY_BRIEF, run_scheduled

FACTS = [
    {"content": "Dana prefers short emails on Tuesday", "subject": "dana"},
    {"content": "Lee asked about SSO support", "subject": "lee"},
]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(record_module, "RECORD_BASE_DELAY", 0.0)
    record_module._CHECKED.clear()  # recalls of earlier tests in this process
    yield
    record_module._CHECKED.clear()


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


async def carried(rt: LocalRuntime, tenant: str = "acme") -> list[str]:
    """The tenant's recall records waiting in KV (key names)."""
    page = await rt.kv.list(prefix=f"recall-pending:{tenant}:")
    return [key.name for key in page.keys]


async def refused(make_memory: MemoryFactory, spy_db: SpyD1, **overrides: Any) -> Any:
    """A memory of acme with FACTS learned, whose recall records D1 now refuses."""
    memory = make_memory(**overrides)
    await memory.learn_many(FACTS)
    spy_db.fail_pattern = "INSERT INTO memory_events"
    return memory


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
    [event] = await retrieved_events(rt.db)
    assert event.event_id == found.event_id
    assert (await _counts(rt))["Lee asked about SSO support"] == 1


async def test_a_retry_after_an_unknown_outcome_never_counts_twice(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    db = CommitThenFail(spy_db)
    memory = make_memory(db=db, kv=rt.kv)
    await memory.learn_many(FACTS)
    db.fail = 1  # the first attempt commits, then reports a failure; the retry runs again
    found = await memory.recall("SSO support", 1)
    [event] = await retrieved_events(rt.db)
    assert event.event_id == found.event_id
    assert (await _counts(rt))["Lee asked about SSO support"] == 1
    assert await carried(rt) == []


def new_isolate() -> None:
    """What a new isolate starts with: no module state (the records are in KV)."""
    record_module._CHECKED.clear()


async def test_a_record_d1_refuses_waits_in_kv_and_a_new_isolate_writes_it_once(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    memory = await refused(make_memory, spy_db, kv=rt.kv)
    first = await memory.recall("SSO support", 1)
    # Nothing half-written (stats and event are one transaction); the record is in KV.
    assert await event_count(rt) == 0
    assert (await _counts(rt))["Lee asked about SSO support"] == 0
    key = f"recall-pending:acme:{first.event_id}"
    assert await carried(rt) == [key]
    copy = await rt.kv.get(key)
    spy_db.fail_pattern = None

    new_isolate()
    fresh = make_memory(kv=rt.kv)
    second = await fresh.recall("SSO support", 1)

    events = await retrieved_events(rt.db)
    assert sorted(e.event_id for e in events) == sorted([first.event_id, second.event_id])
    assert (await _counts(rt))["Lee asked about SSO support"] == 2
    assert await carried(rt) == []
    # The same record written back again (a stale KV read in another isolate, the cron)
    # changes nothing, and leaves KV.
    assert copy is not None
    await rt.kv.put(key, copy)
    new_isolate()
    await make_memory(kv=rt.kv).recall("short emails on Tuesday", 1)
    assert (await _counts(rt))["Lee asked about SSO support"] == 2
    assert await event_count(rt) == 3 and await carried(rt) == []


async def test_a_record_d1_committed_but_reported_failed_is_counted_once_on_write_back(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    db = CommitThenFail(spy_db)
    memory = make_memory(db=db, kv=rt.kv)
    await memory.learn_many(FACTS)
    db.fail = record_module.RECORD_ATTEMPTS  # every attempt commits, then reports an error
    found = await memory.recall("SSO support", 1)
    assert await carried(rt) == [f"recall-pending:acme:{found.event_id}"]

    assert await memory.write_back_recall_records() == 1

    [event] = await retrieved_events(rt.db)
    assert event.event_id == found.event_id
    assert (await _counts(rt))["Lee asked about SSO support"] == 1
    assert await carried(rt) == []


async def test_the_daily_cron_writes_carried_records_back(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    memory = await refused(make_memory, spy_db, kv=rt.kv)
    found = [await memory.recall("SSO support", 1), await memory.recall("short emails", 1)]
    spy_db.fail_pattern = None
    assert len(await carried(rt)) == 2

    new_isolate()
    daily = await run_scheduled(DAILY_BRIEF, 1_750_000_000.0, rt.bindings())

    assert daily["result"]["recall_records_written_back"] == {"acme": 2}
    events = await retrieved_events(rt.db)
    assert {e.event_id for e in events} == {f.event_id for f in found}
    assert await carried(rt) == []


async def test_a_write_back_stops_at_the_first_d1_failure_and_keeps_the_rest(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_db: SpyD1
) -> None:
    memory = await refused(make_memory, spy_db, kv=rt.kv)
    for _ in range(3):
        await memory.recall("SSO support", 1)
    tried = len(spy_db.sql)
    assert await memory.write_back_recall_records() == 0
    # One attempt, not one per record: D1 is down, the rest wait without being tried.
    assert sum("INSERT INTO memory_events" in sql for sql in spy_db.sql[tried:]) == 1
    assert len(await carried(rt)) == 3
    assert await event_count(rt) == 0


class FailingKV:
    """A KV whose writes fail (reads and lists work)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def list(self, **kwargs: Any) -> Any:
        return await self.inner.list(**kwargs)

    async def put(self, key: str, value: str, **kwargs: Any) -> None:
        raise BindingUnavailableError("injected: KV is unavailable")


async def test_when_d1_and_kv_both_fail_the_whole_record_is_logged_at_error(
    rt: LocalRuntime,
    make_memory: MemoryFactory,
    spy_db: SpyD1,
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = await refused(make_memory, spy_db, kv=FailingKV(rt.kv))
    with caplog.at_level(logging.ERROR, logger=record_module.__name__):
        found = await memory.recall("SSO support", 1)
    [logged] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert isinstance(logged.args, tuple)
    payload = json.loads(str(logged.args[-1]))  # the whole record, as JSON
    assert payload["event"]["event_id"] == found.event_id
    assert payload["event"]["payload"]["query"] == "SSO support"
    assert payload["fact_ids"] == found.fact_ids
    assert "KV" in logged.getMessage()


async def test_at_most_max_carried_records_wait_per_tenant_the_rest_are_logged(
    rt: LocalRuntime,
    make_memory: MemoryFactory,
    spy_db: SpyD1,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(record_module, "MAX_CARRIED", 2)
    memory = make_memory(kv=rt.kv)
    other = make_memory("globex", kv=rt.kv)
    await memory.learn_many(FACTS)
    await other.learn_many(FACTS)
    spy_db.fail_pattern = "INSERT INTO memory_events"
    with caplog.at_level(logging.ERROR, logger=record_module.__name__):
        found = [await memory.recall("SSO support", 1) for _ in range(3)]
        await other.recall("SSO support", 1)  # another tenant has its own bound
    assert sorted(await carried(rt)) == sorted(
        f"recall-pending:acme:{f.event_id}" for f in found[:2]
    )
    assert len(await carried(rt, "globex")) == 1
    [logged] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert found[2].event_id in logged.getMessage() and "already wait" in logged.getMessage()
    assert '"query":"SSO support"' in logged.getMessage()


class HeldBackground:
    """`waitUntil` work held until `release()`: a recall record still in flight."""

    def __init__(self) -> None:
        self.held: list[Any] = []

    def wait_until(self, work: Any) -> None:
        self.held.append(work)

    async def release(self) -> None:
        while self.held:
            await self.held.pop(0)


async def _retrieved_payloads(rt: LocalRuntime) -> list[dict[str, Any]]:
    rows = (
        await rt.db.prepare(
            "SELECT payload FROM memory_events WHERE tenant_id = 'acme' "
            "AND kind = 'memory_retrieved'"
        ).all()
    ).results
    return [json.loads(row["payload"]) for row in rows]


async def test_a_recall_record_in_flight_during_an_erase_keeps_no_query_text(
    rt: LocalRuntime, make_memory: MemoryFactory, clock: FixedClock
) -> None:
    background = HeldBackground()
    memory = make_memory(background=background)
    await memory.learn_many(FACTS)
    # The recall answers; its statistics and event are still to be written when the
    # operator erases the subject its query names.
    await memory.recall("what does dana prefer", 5)
    assert background.held
    report = await SubjectEraser("acme", db=rt.db, clock=rt.clock).erase("dana")
    assert report.complete
    await background.release()
    (payload,) = await _retrieved_payloads(rt)
    assert "query" not in payload and payload["query_redacted"] is True
    assert "dana" not in json.dumps(payload).lower()
    # Nor its hash, which anyone holding a guess of the query could confirm it with.
    assert hashlib.sha256(b"what does dana prefer").hexdigest() not in json.dumps(payload)
    # A recall after the erase's mark has aged out is recorded whole (control).
    clock.advance(2 * 86_400)
    await SubjectEraser("acme", db=rt.db, clock=rt.clock).erase("nobody-at-all")
    clock.advance(120)
    await memory.recall("who asked about SSO", 5)
    await background.release()
    queries = [p.get("query") for p in await _retrieved_payloads(rt)]
    assert "who asked about SSO" in queries
