"""Fewer bytes per fact (issue 29, item 4): what was cut must still be there when asked for.

A created fact is its own `memory_written` event (its row says all of it; migration 0019),
yet the event log lists it and the inspector shows it whole; migrations 0018 and 0019
upgrade a tenant's data in place."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from agent_memory.governance.writes import (
    RETRIEVED_FIELDS,
    EventLog,
    WriteGate,
    WriteProposal,
    canonical_json,
    loaded_payload,
    memory_retrieved,
)
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.lifecycle.inspect import MemoryInspector
from agent_memory.tiers.episodic import Episode, EpisodicStore
from agent_memory.tiers.semantic import keyword_index
from agent_memory.tiers.semantic.memory import SemanticMemory
from bindings.ports.clock import FixedClock
from local_runtime.migrations import apply_migrations, migration_files
from local_runtime.runtime import MIGRATIONS_DIR, LocalRuntime
from tests.fakes.embedder import HashingEmbedder
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


def _entry_json_0015(terms: dict[str, list[int]]) -> str:
    """How the code before 0018 stored a keyword entry (an object)."""
    return json.dumps({t: tf if not ctx else [tf, ctx] for t, (tf, ctx) in terms.items()})


async def test_a_database_at_0016_upgrades_and_still_recalls_inspects_and_erases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_migrations: None
) -> None:
    """Migration 0018 over a tenant written before it: its events (full ones and compact
    ones) still read, its keyword entries (the object form) still unindex, an erase finds
    them all."""
    old = tmp_path / "migrations"
    old.mkdir()
    for path in migration_files(MIGRATIONS_DIR):
        # ...and the one table today's writes read (`storage_format`, 0023): the learn below
        # stands for the code of then, which did not read it.
        if path.name < "0017" or path.name.startswith("0023_"):
            shutil.copy(path, old / path.name)
    rt = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(1e9))
    try:
        await apply_migrations(rt.db, old)
        monkeypatch.setattr(keyword_index, "_entry_json", _entry_json_0015)  # the old code
        monkeypatch.setattr(WriteGate, "event_in_row", lambda self, proposal: False)
        memory = SemanticMemory.from_bindings(rt.bindings(), "acme")
        [ada, bo] = await memory.learn_many([FACT, {**FACT, "subject": "contact:bo"}])
        # An event in the shape written before compact ones: full hash and payload.
        full = WriteGate("acme", clock=rt.clock, events=EventLog("acme", rt.db))
        await full.committed(
            [
                WriteProposal(
                    tier="semantic",
                    key="contact:ada|prefers",
                    value={"a": 1},
                    source="mcp",
                    subject="contact:ada",
                )
            ]
        )
        # A recall's event, as the code before wrote it (that code's reads are gone).
        await EventLog("acme", rt.db).record(
            memory_retrieved(
                tenant_id="acme",
                tier="semantic",
                now=rt.clock.now(),
                query="when does Ada like a call",
                top_k=5,
                results=[],
                candidates={},
            )
        )
        assert "0018_fewer_bytes.sql" in await apply_migrations(rt.db, MIGRATIONS_DIR)
        monkeypatch.undo()
        entries = "SELECT DISTINCT substr(index_terms, 1, 1) AS c FROM semantic_facts"
        assert (await rt.db.prepare(entries).all()).results == [{"c": "{"}]

        assert ada.fact_id in (await memory.recall("Ada Tuesday call", 5)).fact_ids
        await rt.background.drain()
        detail = await MemoryInspector(rt.db, "acme", now_ms=10**12).fact_detail(ada.fact_id)
        assert detail is not None and detail.written[0].payload["source"] == "mcp"
        assert [e.kind for e in await EventLog("acme", rt.db).recent("memory_retrieved")] == [
            "memory_retrieved",
            "memory_retrieved",
        ]
        later = {**FACT, "content": "Ada also wants email follow-ups after a call"}
        assert (await memory.learn(later)).created  # an entry in the array form
        report = await SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=rt.vectors).erase(
            "contact:ada"
        )
        assert report.facts == 2
        # Their keyword entries, of either form, took their postings and df with them.
        orphans = await rt.db.prepare(
            "SELECT COUNT(*) AS n FROM semantic_terms WHERE fts_rowid NOT IN "
            "(SELECT fts_rowid FROM semantic_facts)"
        ).first_value("n")
        df = await rt.db.prepare(
            "SELECT (SELECT SUM(df) FROM semantic_term_stats) - "
            "(SELECT COUNT(*) FROM semantic_terms) AS n"
        ).first_value("n")
        assert (orphans, df) == (0, 0)
        left = (await rt.db.prepare("SELECT event_id, payload FROM memory_events").all()).results
        assert {r["event_id"] for r in left} & {ada.fact_id, bo.fact_id} == {bo.fact_id}
        assert "contact:ada" not in json.dumps(left)
    finally:
        await rt.close()


async def test_a_recall_event_stores_its_results_as_arrays_and_every_reader_takes_both_forms(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    """A recall's event holds each result as an array (about 60 bytes fewer a result); the
    fact's history, the inspector and the subject erase read it and the object form that
    events written before hold alike."""
    memory = make_memory()
    ada, bo = await memory.learn_many(
        [FACT, {**FACT, "subject": "contact:bo", "content": "Bo prefers a call on Fridays"}]
    )
    parts = {"score": 0.5, "relevance": 0.5, "recency": 1.0, "confidence": 0.9, "density": 1.0}
    older = {
        "query": "who likes a call",
        "top_k": 2,
        "results": [{"id": ada.fact_id, **parts}, {"id": bo.fact_id, **parts}],
        "candidates": {"vector": 2},
        "dropped": [],
    }
    await (
        rt.db.prepare(
            "INSERT INTO memory_events (tenant_id, event_id, kind, tier, payload, created_at) "
            "VALUES ('acme', ?, 'memory_retrieved', 'semantic', ?, ?)"
        )
        .bind(new_ulid(NOW_MS / 1000 - 60), json.dumps(older), NOW_MS - 60_000)
        .run()
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
    assert [e.payload["query"] for e in detail.retrieved] == [
        "a call on Tuesday or Friday",
        "who likes a call",
    ]
    for event in detail.retrieved:  # the inspector shows both forms as objects
        assert all(set(r) == set(RETRIEVED_FIELDS) for r in event.payload["results"])
        assert bo.fact_id in [r["id"] for r in event.payload["results"]]

    await SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=rt.vectors).erase("contact:ada")
    left = [
        loaded_payload(str(row["payload"]))
        for row in (
            await rt.db.prepare(
                "SELECT payload FROM memory_events WHERE kind = 'memory_retrieved' "
                "ORDER BY event_id"
            ).all()
        ).results
    ]
    # Both events kept, Ada's fact scrubbed out of each, Bo's still listed.
    assert [[r["id"] for r in p["results"]] for p in left] == [[bo.fact_id], [bo.fact_id]]
    assert (await inspector.fact_detail(bo.fact_id)) is not None
