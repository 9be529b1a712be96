"""Tier 3, semantic facts, with its D1 side on workerd.

`SemanticMemory` keeps facts in D1 (the source of truth, with a per-tenant keyword index kept
in step by triggers, and a `memory_events` audit row per recall) and one vector per fact in
Vectorize. Here every D1 statement — the hash lookups, the inserts, the activation, the
keyword channel, the exact-match channel, the recall-stat batch, deletes, the index triggers
on insert, update and delete — runs on workerd's SQLite with the project's migrations, and
so do the maintenance paths (facts left `pending_vector` and completed later, ranking,
reconciliation of stray vectors). Vectorize has no local simulator in workerd, so vectors
live in the local index (`LocalVectorIndex`), as in `mf_bindings`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import cast

import pytest

from agent_memory.memory import Memory
from agent_memory.tiers.semantic import recall as recall_record
from bindings.environment import Bindings
from local_runtime.background import LocalBackgroundTasks
from tests.miniflare.adapters import MiniflareD1
from tests.semantic.conftest import index_state, insert_unindexed, retrieved_events
from tests.semantic.fakes import SpyD1, SpyVectors

FACTS = [
    {
        "content": "Contact 1 responded positively to direct ROI framing",
        "subject": "contact:1",
        "predicate": "responded_positively_to",
        "object": "direct_roi_framing",
        "confidence": 0.9,
        "metadata": {"channel": "email", "weight": 1.0},
    },
    {
        "content": "The blue door in the office needs a new lock",
        "subject": "office",
        "predicate": "needs",
        "object": "lock",
        "confidence": 0.6,
    },
    {"content": "Quarterly reports are due on the fifth working day", "confidence": 0.75},
]


async def test_learn_recall_and_delete_facts_with_d1_on_workerd(
    mf_bindings: Bindings, mf_migrated_d1: MiniflareD1
) -> None:
    memory = (await Memory.open(mf_bindings, "acme")).semantic(agent_type="assistant")
    learned = await memory.learn_many(FACTS)
    assert [r.created for r in learned] == [True, True, True]
    assert all(r.status == "active" for r in learned)
    # Idempotent per (tenant, subject, content hash): the same fact is found, not re-added.
    again = await memory.learn(FACTS[0])
    assert (again.fact_id, again.created) == (learned[0].fact_id, False)
    assert await memory.count() == 3

    stored = await memory.get(learned[0].fact_id)
    assert stored is not None
    assert stored.metadata == {"channel": "email", "weight": 1}  # through a JS number
    assert stored.confidence == 0.9 and stored.recall_count == 0

    # The keyword channel (BM25F over the tenant's postings): a stemmed word finds the lock.
    result = await memory.recall("locks on doors", top_k=3)
    assert result.candidates["keyword"] == 1
    [lock] = [r for r in result.results if r.fact.fact_id == learned[1].fact_id]
    assert "keyword" in lock.channels
    assert result.event_id is not None
    # Recall statistics and the event are written after the response (`recall_record`).
    await mf_bindings.background.drain()  # type: ignore[attr-defined]
    event = (
        await mf_migrated_d1.prepare(
            "SELECT kind, tier, payload FROM memory_events WHERE tenant_id = ? AND event_id = ?"
        )
        .bind("acme", result.event_id)
        .first()
    )
    assert event is not None and (event["kind"], event["tier"]) == ("memory_retrieved", "semantic")
    recalled = await memory.get(learned[1].fact_id)
    assert recalled is not None and recalled.recall_count == 1

    # The exact-match channel: a subject named in the query.
    by_subject = await memory.recall("what about contact:1?", top_k=1)
    assert by_subject.fact_ids == [learned[0].fact_id]

    # Filters narrow every channel (each adds its own clause to the D1 queries).
    filtered = await memory.recall(
        "contact:1 office lock ROI",
        top_k=5,
        filters={"subject": "contact:1", "agent_type": "assistant", "min_confidence": 0.8},
    )
    assert filtered.fact_ids == [learned[0].fact_id]

    # The audit trail, read back from D1 once the after-response writes landed: newest
    # recall first, with the ids it returned.
    await mf_bindings.background.drain()  # type: ignore[attr-defined]
    events = await retrieved_events(mf_migrated_d1)
    assert len(events) == 3
    assert events[0].event_id == filtered.event_id
    assert events[0].payload  # ids and scores of what was returned

    # Another tenant sees nothing of it, in D1 or in the vectors.
    other = (await Memory.open(mf_bindings, "globex")).semantic()
    assert await other.count() == 0
    assert (await other.recall("blue door lock", top_k=3)).fact_ids == []

    deleted = await memory.delete(learned[1].fact_id)
    assert deleted.row_deleted and deleted.vector_deleted
    assert await memory.get(learned[1].fact_id) is None
    assert learned[1].fact_id not in (await memory.recall("blue door lock", top_k=3)).fact_ids
    # The delete trigger (migration 0009) ran on workerd's D1: the deleted fact's postings
    # and its document count are gone from the tenant's keyword index.
    indexed = await (
        mf_migrated_d1.prepare(
            "SELECT COUNT(DISTINCT fts_rowid) AS n FROM semantic_terms WHERE tenant_id = "
            "(SELECT code FROM keyword_tenants WHERE tenant_id = ?)"
        )
        .bind("acme")
        .first_value("n")
    )
    docs = await (
        mf_migrated_d1.prepare("SELECT docs FROM semantic_index_stats WHERE tenant_id = ?")
        .bind("acme")
        .first_value("docs")
    )
    assert (indexed, docs) == (2, 2)


async def test_pending_vectors_and_maintenance_with_d1_on_workerd(
    mf_bindings: Bindings, mf_migrated_d1: MiniflareD1
) -> None:
    assert mf_bindings.vectors is not None
    vectors = SpyVectors(mf_bindings.vectors)
    memory = (
        await Memory.open(dataclasses.replace(mf_bindings, vectors=vectors), "acme")
    ).semantic()
    # A failed vector write leaves the row pending_vector: recall must not return it.
    vectors.fail_upserts = True
    pending = await memory.learn(FACTS[1])
    assert pending.status == "pending_vector"
    assert await memory.count("pending_vector") == 1
    assert (await memory.recall("blue door lock", top_k=3)).fact_ids == []

    vectors.fail_upserts = False
    assert await memory.complete_pending() == 1
    assert await memory.count() == 1
    ranked = await memory.rank("blue door lock", 10)
    assert ranked.fact_ids == [pending.fact_id]

    # A vector whose row is gone is removed by deleting the fact again.
    await (
        mf_migrated_d1.prepare("DELETE FROM semantic_facts WHERE tenant_id = ? AND fact_id = ?")
        .bind("acme", pending.fact_id)
        .run()
    )
    assert (await memory.delete(pending.fact_id)).vector_deleted
    assert await vectors.get_by_ids([pending.fact_id]) == []


async def test_the_index_update_trigger_on_workerd(
    mf_bindings: Bindings, mf_migrated_d1: MiniflareD1
) -> None:
    db = mf_migrated_d1
    # Facts without an entry (no postings), on workerd's D1.
    await insert_unindexed(db, "acme", ["The blue door needs a lock", "Lee paints doors"])
    assert await index_state(db, "acme") == {"postings": [], "df": {}, "stats": None}

    # An entry written into `index_terms` fires the UPDATE OF index_terms trigger:
    # postings, df and the document count appear.
    entries = {
        "The blue door needs a lock": ('["blue door need lock"]', 4),
        "Lee paints doors": ('["lee paint door"]', 3),
    }
    for content, (terms, length) in entries.items():
        await (
            db.prepare(
                "UPDATE semantic_facts SET index_terms = ?, index_length = ? "
                "WHERE tenant_id = 'acme' AND content = ?"
            )
            .bind(terms, length, content)
            .run()
        )
    state = await index_state(db, "acme")
    assert state["df"]["door"] == 2 and state["df"]["lock"] == 1 and state["df"]["paint"] == 1
    assert state["stats"]["docs"] == 2
    memory = (await Memory.open(mf_bindings, "acme")).semantic()
    ranked = await memory.rank("lock", 5)
    assert [r.fact.content for r in ranked.results] == ["The blue door needs a lock"]

    # A changed entry: the old terms leave (postings gone, df down), the new ones arrive, and
    # the document count and lengths follow.
    fresh = '{"lee":[1,0],"paint":[1,0],"fenc":[1,1]}'  # "Lee paints fences" + context
    lee = "SELECT fts_rowid FROM semantic_facts WHERE tenant_id = 'acme' AND content = ?"
    rowid = await db.prepare(lee).bind("Lee paints doors").first_value("fts_rowid")
    await (
        db.prepare(
            "UPDATE semantic_facts SET index_terms = ?, index_length = ?, context_length = ? "
            "WHERE tenant_id = ? AND fts_rowid = ?"
        )
        .bind(fresh, 3, 1, "acme", rowid)
        .run()
    )
    after = await index_state(db, "acme")
    assert after["df"]["door"] == 1 and after["df"]["fenc"] == 1 and after["df"]["paint"] == 1
    lee_terms = sorted(p[1] for p in after["postings"] if p[0] == "Lee paints doors")
    assert lee_terms == sorted(json.loads(fresh))
    assert after["stats"]["docs"] == 2
    lengths = await db.prepare(
        "SELECT SUM(index_length) AS own, SUM(context_length) AS ctx FROM semantic_facts "
        "WHERE tenant_id = 'acme'"
    ).first()
    assert (after["stats"]["total_length"], after["stats"]["total_context_length"]) == (
        lengths["own"],
        lengths["ctx"],
    )
    # Every posting's df matches the postings that hold it.
    held: dict[str, int] = {}
    for posting in after["postings"]:
        held[posting[1]] = held.get(posting[1], 0) + 1
    assert held == after["df"]


async def test_a_recall_record_d1_refuses_waits_in_workerd_kv_until_written_back(
    mf_bindings: Bindings, mf_migrated_d1: MiniflareD1, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall_record, "RECORD_BASE_DELAY", 0.0)
    recall_record._CHECKED.clear()
    refusing = SpyD1(mf_migrated_d1)
    memory = (await Memory.open(dataclasses.replace(mf_bindings, db=refusing), "acme")).semantic()
    await memory.learn_many(FACTS)
    refusing.fail_pattern = "INSERT INTO memory_events"
    found = await memory.recall("blue door lock", top_k=1)
    # The recall record is written after the response: D1 refuses it, KV keeps it.
    await cast(LocalBackgroundTasks, mf_bindings.background).drain()
    assert mf_bindings.kv is not None
    waiting = await mf_bindings.kv.list(prefix="recall-pending:acme:")
    assert [key.name for key in waiting.keys] == [f"recall-pending:acme:{found.event_id}"]

    refusing.fail_pattern = None
    recall_record._CHECKED.clear()  # a new isolate
    assert await memory.write_back_recall_records() == 1
    events = await retrieved_events(mf_migrated_d1)
    assert [e.event_id for e in events] == [found.event_id]
    assert (await mf_bindings.kv.list(prefix="recall-pending:acme:")).keys == []
