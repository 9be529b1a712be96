"""Tier 1 working memory in KV: key layout, TTL, the 128 KB budget and key validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_memory.tiers.working import (
    WORKING_MEMORY_BUDGET_BYTES,
    InvalidWorkingMemoryKey,
    WorkingMemory,
    WorkingMemoryBudgetExceeded,
    WorkingMemoryError,
)
from bindings.ports.clock import FixedClock
from local_runtime.adapters.kv import SqliteKV


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def kv(clock: FixedClock) -> SqliteKV:
    return SqliteKV(":memory:", clock=clock)


async def all_keys(kv: SqliteKV) -> list[str]:
    return [key.name for key in (await kv.list(prefix="")).keys]


async def test_values_live_under_the_documented_key_as_json(kv: SqliteKV) -> None:
    memory = WorkingMemory(kv, "acme", "contact-42")
    await memory.set("current_contact_id", {"id": 42, "name": "Ada"})
    assert await all_keys(kv) == ["agent_working:acme:contact-42:current_contact_id"]
    assert await kv.get("agent_working:acme:contact-42:current_contact_id") == (
        '{"id":42,"name":"Ada"}'
    )
    assert await memory.get("current_contact_id") == {"id": 42, "name": "Ada"}
    assert await memory.get("missing") is None


async def test_entries_expire_after_one_hour(kv: SqliteKV, clock: FixedClock) -> None:
    memory = WorkingMemory(kv, "acme", "i1")
    await memory.set("draft", "v1")
    clock.advance(3599)
    assert await memory.get("draft") == "v1"
    clock.advance(2)
    assert await memory.get("draft") is None
    assert await memory.entries() == []


async def test_instances_do_not_see_each_other(kv: SqliteKV) -> None:
    await WorkingMemory(kv, "acme", "a").set("k", 1)
    await WorkingMemory(kv, "acme", "b").set("k", 2)
    await WorkingMemory(kv, "other", "a").set("k", 3)
    assert await WorkingMemory(kv, "acme", "a").snapshot() == {"k": 1}
    assert await WorkingMemory(kv, "other", "a").snapshot() == {"k": 3}


async def test_the_budget_is_enforced_on_write_and_nothing_is_written(kv: SqliteKV) -> None:
    memory = WorkingMemory(kv, "acme", "i1")
    chunk = "x" * 40_000
    for name in ("a", "b", "c"):
        await memory.set(name, chunk)
    used = sum(entry.bytes for entry in await memory.entries())
    assert used == 3 * (1 + 40_002)
    with pytest.raises(WorkingMemoryBudgetExceeded) as caught:
        await memory.set("d", chunk)
    assert "budget exceeded" in str(caught.value)
    assert caught.value.budget == WORKING_MEMORY_BUDGET_BYTES == 128 * 1024
    assert await memory.get("d") is None
    assert sum(entry.bytes for entry in await memory.entries()) == used
    # Replacing a key counts its new size, not old + new.
    await memory.set("a", "y" * 40_000)
    assert await memory.get("a") == "y" * 40_000
    # A smaller value still fits; the budget is across keys, per instance.
    await memory.set("d", "small")
    await WorkingMemory(kv, "acme", "i2").set("d", chunk)


async def test_a_single_value_larger_than_the_budget_is_refused(kv: SqliteKV) -> None:
    memory = WorkingMemory(kv, "acme", "i1")
    with pytest.raises(WorkingMemoryBudgetExceeded):
        await memory.set("huge", "z" * (WORKING_MEMORY_BUDGET_BYTES + 1))
    assert await all_keys(kv) == []


@pytest.mark.parametrize(
    "key",
    ["", ":", "a::b", "a:", ":a", "*", "a:*", "user?", "100%", "a b", "ключ", "x" * 129],
)
async def test_bad_keys_are_refused_before_any_write(kv: SqliteKV, key: str) -> None:
    memory = WorkingMemory(kv, "acme", "i1")
    with pytest.raises(InvalidWorkingMemoryKey):
        await memory.set(key, 1)
    with pytest.raises(InvalidWorkingMemoryKey):
        await memory.get(key)
    assert await all_keys(kv) == []


async def test_multi_segment_keys_are_fine(kv: SqliteKV) -> None:
    memory = WorkingMemory(kv, "acme", "i1")
    await memory.set("contact:hubspot:123", {"stage": "warm"})
    assert await memory.get("contact:hubspot:123") == {"stage": "warm"}


@pytest.mark.parametrize(
    ("tenant", "instance"),
    [("", "i1"), ("ac:me", "i1"), ("*", "i1"), ("acme", ""), ("acme", "a:b")],
)
def test_bad_tenant_or_instance_segments_are_refused(
    kv: SqliteKV, tenant: str, instance: str
) -> None:
    with pytest.raises(InvalidWorkingMemoryKey):
        WorkingMemory(kv, tenant, instance)


async def test_values_must_be_json(kv: SqliteKV) -> None:
    memory = WorkingMemory(kv, "acme", "i1")
    with pytest.raises(WorkingMemoryError):
        await memory.set("k", float("nan"))
    with pytest.raises(WorkingMemoryError):
        await memory.set("k", {1, 2})
    assert await all_keys(kv) == []


class YieldingKV:
    """A KV whose calls yield to the event loop, as real network calls do."""

    def __init__(self, inner: SqliteKV) -> None:
        self._inner = inner

    async def list(self, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await self._inner.list(**kwargs)

    async def put(self, key: str, value: str, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        await self._inner.put(key, value, **kwargs)

    async def get(self, key: str) -> str | None:
        return await self._inner.get(key)


async def test_interleaved_writers_sharing_the_objects_lock_cannot_overshoot(
    kv: SqliteKV,
) -> None:
    """Two turns of one Durable Object interleave at every await; with the object's lock
    the budget check and the write happen as one, so only one 70 KB value fits."""
    lock = asyncio.Lock()
    slow = YieldingKV(kv)
    writers = [WorkingMemory(slow, "acme", "i1", write_lock=lock) for _ in range(2)]  # type: ignore[arg-type]
    results = await asyncio.gather(
        writers[0].set("a", "x" * 70_000),
        writers[1].set("b", "y" * 70_000),
        return_exceptions=True,
    )
    assert sum(isinstance(r, WorkingMemoryBudgetExceeded) for r in results) == 1
    listed = await WorkingMemory(kv, "acme", "i1").entries()
    assert sum(entry.bytes for entry in listed) <= WORKING_MEMORY_BUDGET_BYTES
