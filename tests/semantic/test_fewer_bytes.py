"""Fewer bytes per fact (issue 29, item 4): what was cut must still be there when asked for.

A created fact is its own `memory_written` event (its row says all of it), yet the event log
lists it and the inspector shows it whole."""

from __future__ import annotations

import hashlib
import json

from agent_memory.governance.writes import (
    RETRIEVED_FIELDS,
    EventLog,
    WriteGate,
    canonical_json,
    loaded_payload,
)
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.lifecycle.inspect import MemoryInspector
from agent_memory.tiers.episodic import Episode, EpisodicStore
from bindings.ports.clock import FixedClock
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import NOW_MS, MemoryFactory

FACT = {
    "content": "Ada prefers a call on Tuesday mornings",
    "subject": "contact:ada",
    "predicate": "prefers",
    "confidence": 0.9,
    "source": "mcp",
}


async def test_a_created_fact_is_its_own_event_and_the_event_log_shows_it_whole(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    result = await make_memory(agent_type="sdr").learn(FACT)
    written = "SELECT * FROM memory_events WHERE kind = 'memory_written'"
    assert (await rt.db.prepare(written).all()).results == []  # no event row: the fact is it
    value = {
        "subject": "contact:ada",
        "predicate": "prefers",
        "object": "",
        "content": FACT["content"],
        "metadata": {},
    }
    payload = {
        "key": "contact:ada|prefers",
        "source": "mcp",
        "confidence": 0.9,
        "bytes": len(canonical_json(value)),
        "subject": "contact:ada",
    }
    digest = hashlib.sha256(canonical_json(value)).hexdigest()
    [row] = await EventLog("acme", rt.db).rows("kind = 'memory_written'", limit=10)
    assert (row["event_id"], row["tier"], row["agent_type"]) == (result.fact_id, "semantic", "sdr")
    assert (row["content_hash"], json.loads(row["payload"])) == (digest, payload)
    assert "Tuesday" not in json.dumps(row)  # still no content in the audit trail

    inspector = MemoryInspector(rt.db, "acme", now_ms=NOW_MS)
    detail = await inspector.fact_detail(result.fact_id)
    assert detail is not None
    [event] = detail.written
    assert (event.content_hash, event.payload) == (digest, payload)
    [listed] = (await inspector.list_events(kind="memory_written")).events
    assert (listed.event_id, listed.content_hash) == (result.fact_id, digest)


async def test_the_event_log_pages_through_event_rows_and_in_row_events_once_each(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    """Facts and episodes (their own events) and recalls (event rows) interleaved in time:
    every page is newest first and each event comes once, whichever table holds it."""
    memory = make_memory()
    clock = rt.clock
    assert isinstance(clock, FixedClock)
    episodes = EpisodicStore(rt.db, "acme", gate=WriteGate("acme", events=EventLog("acme", rt.db)))
    run_id = new_ulid(clock.now())
    await episodes.start_run(
        run_id=run_id, agent_type="sdr", instance_id="i1", input={}, started_at=NOW_MS
    )
    for i in range(7):
        await memory.learn({**FACT, "subject": f"contact:{i}", "content": f"Fact number {i}"})
        clock.advance(0.001 * (i % 2))  # some in the same millisecond as a recall
        await memory.recall(f"fact {i}", 3)
        await rt.background.drain()
        now_ms = int(clock.now() * 1000)
        await episodes.append_episode(
            Episode(
                episode_id=new_ulid(clock.now()),
                run_id=run_id,
                agent_type="sdr",
                instance_id="i1",
                kind="observation",
                content=f"Saw thing {i}",
                created_at=now_ms - 1 if i % 3 == 0 else now_ms,  # not always its id's time
            )
        )
        clock.advance(0.002)
    assert await count_rows(rt, "memory_events", "kind = 'memory_written'") == 0
    inspector = MemoryInspector(rt.db, "acme", now_ms=NOW_MS)
    seen: list[tuple[int, str]] = []
    cursor = None
    while True:
        page = await inspector.list_events(cursor=cursor, limit=3)
        seen += [(e.created_at, e.event_id) for e in page.events]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 21
    assert seen == sorted(seen, reverse=True)


async def count_rows(rt: LocalRuntime, table: str, where: str) -> int:
    return int(
        await rt.db.prepare(f"SELECT COUNT(*) AS n FROM {table} WHERE {where}").first_value("n")
    )


async def test_a_recall_event_stores_its_results_as_arrays_and_readers_show_objects(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    """A recall's event holds each result as an array (about 60 bytes fewer a result); the
    fact's history and the inspector show objects, and the subject erase scrubs it."""
    memory = make_memory()
    ada, bo = await memory.learn_many(
        [FACT, {**FACT, "subject": "contact:bo", "content": "Bo prefers a call on Fridays"}]
    )
    found = await memory.recall("a call on Tuesday or Friday", 5)
    await rt.background.drain()
    assert set(found.fact_ids) == {ada.fact_id, bo.fact_id}
    text = (
        await rt.db.prepare("SELECT payload FROM memory_events WHERE event_id = ?")
        .bind(found.event_id)
        .first_value("payload")
    )
    stored = json.loads(str(text))
    assert [r[0] for r in stored["results"]] == found.fact_ids
    assert all(isinstance(r, list) and len(r) == len(RETRIEVED_FIELDS) for r in stored["results"])
    as_objects = json.dumps(loaded_payload(str(text)), separators=(",", ":"))
    assert len(as_objects) - len(str(text)) >= 55 * len(found.fact_ids)

    inspector = MemoryInspector(rt.db, "acme", now_ms=NOW_MS + 1000)
    detail = await inspector.fact_detail(bo.fact_id)
    assert detail is not None
    assert [e.payload["query"] for e in detail.retrieved] == ["a call on Tuesday or Friday"]
    [event] = detail.retrieved  # the inspector shows the results as objects
    assert all(set(r) == set(RETRIEVED_FIELDS) for r in event.payload["results"])
    assert bo.fact_id in [r["id"] for r in event.payload["results"]]

    await SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=rt.vectors).erase("contact:ada")
    left = [
        loaded_payload(str(row["payload"]))
        for row in (
            await rt.db.prepare(
                "SELECT payload FROM memory_events WHERE kind = 'memory_retrieved'"
            ).all()
        ).results
    ]
    # The event kept, Ada's fact scrubbed out of it, Bo's still listed.
    assert [[r["id"] for r in p["results"]] for p in left] == [[bo.fact_id]]
    assert (await inspector.fact_detail(bo.fact_id)) is not None
