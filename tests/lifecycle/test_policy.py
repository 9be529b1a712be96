"""Write proposals and the write policy: pure rules, then every tier's write path (denied →
nothing written and the caller is told why; allowed → committed with a `memory_written`
event carrying the content's SHA-256)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from agent_memory.governance.agent_types import (
    BUILT_IN,
    AgentType,
    MemoryConfig,
)
from agent_memory.governance.writes import (
    EventLog,
    WriteDenied,
    WriteGate,
    WritePolicy,
    WriteProposal,
    canonical_json,
)
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import Episode, EpisodicStore, EpisodicWriter, ProceduralMemory
from agent_memory.tiers.working import WorkingMemory, WorkingMemoryWriteDenied
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.lifecycle.conftest import NOW_MS, count, ulid_at
from worker.app import handle

POLICY = WritePolicy()


def proposal(**fields: Any) -> WriteProposal:
    base: dict[str, Any] = {"tier": "semantic", "key": "k", "value": {"a": 1}, "source": "test"}
    base.update(fields)
    return WriteProposal(**base)


def codes(p: WriteProposal, policy: WritePolicy = POLICY) -> list[str]:
    return [v.code for v in policy.evaluate(p).violations]


# --- the rules, as pure functions ------------------------------------------------------


def test_a_plain_write_is_allowed() -> None:
    assert POLICY.evaluate(proposal()).allowed


@pytest.mark.parametrize(
    ("tier", "size", "ok"),
    [
        ("semantic", 24 * 1024 - 20, True),
        ("semantic", 24 * 1024, False),
        ("procedural", 17_000, False),
    ],
)
def test_size_limits_per_tier(tier: str, size: int, ok: bool) -> None:
    p = proposal(tier=tier, value="x" * size)
    assert (codes(p) == []) is ok
    if not ok:
        assert codes(p) == ["too_large"]


def test_agent_types_write_only_their_tiers() -> None:
    run = {"run_id": "01J0000000000000000000000A"}
    # `assistant` keeps working memory but has no long-term memory; `sdr` has both.
    assert codes(proposal(tier="semantic", agent_type="assistant", **run)) == ["tier_not_allowed"]
    assert codes(proposal(tier="semantic", agent_type="sdr", **run)) == []
    assert codes(proposal(tier="episodic", agent_type="assistant", **run)) == []
    # Outside a run the type is a label on a platform write (an operator, a backfill).
    assert codes(proposal(tier="semantic", agent_type="assistant")) == []
    quiet = AgentType(
        name="quiet",
        description="no working memory",
        system_prompt="x",
        memory=MemoryConfig(working_memory=False),
    )
    policy = WritePolicy(agent_types={**BUILT_IN, "quiet": quiet})
    decision = policy.evaluate(proposal(tier="working", agent_type="quiet", **run))
    assert [v.code for v in decision.violations] == ["tier_not_allowed"]
    # Not a registered agent type (MCP clients, operators, the reconciler): not limited here.
    assert codes(proposal(tier="semantic", agent_type="mcp", **run)) == []


def test_the_semantic_confidence_floor() -> None:
    assert codes(proposal(confidence=0.09)) == ["confidence_too_low"]
    assert codes(proposal(confidence=0.1)) == []
    assert codes(proposal(tier="working", confidence=0.0)) == []


def test_personal_data_rules() -> None:
    marked = {"email": "ada@example.com", "_personal": ["email"]}
    assert codes(proposal(value=marked, subject="contact:ada")) == []
    assert codes(proposal(value=marked)) == ["personal_data_without_subject"]
    assert codes(proposal(tier="working", value=marked, subject="contact:ada")) == [
        "personal_data_tier"
    ]
    assert codes(proposal(tier="procedural", value={"_personal": True}, subject="s")) == [
        "personal_data_tier"
    ]
    assert codes(proposal(value={"_personal": ["phone"]}, subject="s")) == [
        "personal_field_missing"
    ]
    # A mark one level down (an episode's data, a fact's metadata) counts too.
    nested = {"content": "x", "data": {"email": "a@b.c", "_personal": ["email"]}}
    assert codes(proposal(tier="episodic", value=nested)) == ["personal_data_without_subject"]


def test_every_violation_is_reported_at_once() -> None:
    p = proposal(
        tier="working",
        agent_type="quiet-unregistered",
        value={"_personal": True, "blob": "x" * 2_000_000},
        confidence=0.1,
        key="same",
        supersedes="same",
    )
    assert set(codes(p)) == {
        "too_large",
        "invalid_proposal",
        "personal_data_tier",
        "personal_data_without_subject",
    }


def test_the_content_hash_is_sha256_of_canonical_json() -> None:
    a = proposal(value={"b": 1, "a": [1, "é"]})
    b = proposal(value={"a": [1, "é"], "b": 1})
    assert a.content_hash == b.content_hash
    assert a.content_hash == hashlib.sha256('{"a":[1,"é"],"b":1}'.encode()).hexdigest()
    assert canonical_json({"b": 1, "a": 2}) == b'{"a":2,"b":1}'


def test_denied_tells_why() -> None:
    gate = WriteGate("t1")
    with pytest.raises(WriteDenied) as caught:
        gate.check(proposal(confidence=0.0))
    assert caught.value.code == "memory_write_denied"
    assert caught.value.details["violations"][0]["code"] == "confidence_too_low"


# --- every tier's write path -------------------------------------------------------------


async def written_events(rt: LocalRuntime, tenant: str) -> list[dict[str, Any]]:
    """The tenant's `memory_written` events, as the event log reads them (event rows and the
    rows that are their own event), by id."""
    rows = await EventLog(tenant, rt.db).rows("kind = 'memory_written'", limit=1000)
    return sorted(
        ({**r, "payload": json.loads(r["payload"])} for r in rows), key=lambda r: r["event_id"]
    )


def gate(rt: LocalRuntime, tenant: str = "t1") -> WriteGate:
    return WriteGate(tenant, clock=rt.clock, events=EventLog(tenant, rt.db))


async def test_working_memory_denied_writes_nothing_and_allowed_writes_record_an_event(
    rt: LocalRuntime,
) -> None:
    memory = WorkingMemory(rt.kv, "t1", "i1", gate=gate(rt), agent_type="assistant")
    with pytest.raises(WorkingMemoryWriteDenied, match="personal_data_tier"):
        await memory.set("contact", {"email": "ada@example.com", "_personal": ["email"]})
    assert await memory.entries() == []
    assert await written_events(rt, "t1") == []

    await memory.set("plan", {"step": 1})
    [event] = await written_events(rt, "t1")
    assert event["tier"] == "working"
    assert event["content_hash"] == hashlib.sha256(b'{"step":1}').hexdigest()
    assert event["payload"]["key"] == "i1:plan"


def episode(ms: int, **fields: Any) -> Episode:
    base: dict[str, Any] = {
        "episode_id": ulid_at(ms),
        "run_id": ulid_at(ms),
        "agent_type": "assistant",
        "instance_id": "default",
        "kind": "observation",
        "content": "Ada asked for a callback",
        "created_at": ms,
    }
    base.update(fields)
    return Episode(**base)


async def test_episodes_are_committed_with_their_event_once(rt: LocalRuntime) -> None:
    store = EpisodicStore(rt.db, "t1")
    item = episode(NOW_MS, subject="contact:ada")
    await store.append_episode(item)
    await store.append_episode(item)  # a retry
    [event] = await written_events(rt, "t1")
    assert event["event_id"] == item.episode_id  # idempotent: one event per episode
    assert event["content_hash"] == store.proposal(item).content_hash
    assert event["payload"]["subject"] == "contact:ada"
    assert "Ada asked" not in json.dumps(event)  # the audit trail holds no content


async def test_a_denied_episode_writes_nothing(rt: LocalRuntime) -> None:
    store = EpisodicStore(rt.db, "t1")
    bad = episode(NOW_MS, data={"phone": "+44 20", "_personal": ["phone"]})  # no subject
    with pytest.raises(WriteDenied, match="personal_data_without_subject"):
        await store.append_episode(bad)
    writer = EpisodicWriter(store, rt.background)
    with pytest.raises(WriteDenied):
        writer.append_episode(bad)  # refused synchronously: nothing is queued
    assert not writer.pending
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 0
    assert await written_events(rt, "t1") == []


async def test_procedural_writes_are_checked_and_recorded(rt: LocalRuntime) -> None:
    from agent_runtime_do.storage import create_schema
    from local_runtime.adapters.do_sql import LocalDurableObjectStorage

    storage = LocalDurableObjectStorage(":memory:")
    create_schema(storage.sql)
    memory = ProceduralMemory(storage.sql)
    g = WriteGate("t1", clock=rt.clock, events=EventLog("t1", rt.db), background=rt.background)
    memory.register(
        workflow_id="w1", agent_type="assistant", task_type="general", spec={}, now=1, gate=g
    )
    memory.register(  # already there: no write, no event
        workflow_id="w1", agent_type="assistant", task_type="general", spec={}, now=2, gate=g
    )
    memory.record_outcome("w1", 0.75, now=3, gate=g)
    with pytest.raises(WriteDenied, match="personal_data_tier"):
        memory.register(
            workflow_id="w2",
            agent_type="assistant",
            task_type="general",
            spec={"_personal": True},
            now=4,
            gate=g,
        )
    assert memory.get("w2") is None
    await rt.background.drain()
    events = await written_events(rt, "t1")
    assert sorted((e["tier"], e["payload"]["key"], e["payload"]["source"]) for e in events) == [
        ("procedural", "w1", "outcome"),
        ("procedural", "w1", "workflow_registry"),
    ]


async def test_an_agent_turn_records_memory_written_for_its_writes(rt: LocalRuntime) -> None:
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    request = build_request(
        "POST", "/v1/agents/acme/assistant/run", {"input": "call Ada back"}, token=token
    )
    response = await handle(request, rt.bindings())
    assert response.status == 200, response.body
    await rt.background.drain()
    events = await written_events(rt, "acme")
    tiers = sorted(e["tier"] for e in events)
    # The default script writes working memory; every turn writes its outcome episode; the
    # agent type's workflows are registered once.
    assert tiers.count("working") == 1 and tiers.count("episodic") == 1
    assert all(len(e["content_hash"]) == 64 for e in events)
    episode_event = next(e for e in events if e["tier"] == "episodic")
    stored = await rt.db.prepare(
        "SELECT episode_id FROM memory_episodes WHERE tenant_id = 'acme'"
    ).all()
    assert episode_event["event_id"] == stored.results[0]["episode_id"]


async def test_semantic_facts_are_policed_and_recorded(rt: LocalRuntime) -> None:
    from agent_memory.tiers.semantic.models import MemoryInputError

    memory = (await Memory.open(rt.bindings(), "t1")).semantic()
    with pytest.raises(MemoryInputError) as caught:
        await memory.learn_many(
            [
                {"content": "Ada's number is +44 20 7946 0000", "subject": "contact:ada"},
                # Marked personal, but about nobody in particular: refused, so the whole call is.
                {"content": "someone's email is x@y.z", "metadata": {"_personal": True}},
            ]
        )
    assert caught.value.code == "memory_write_denied"
    assert [p["field"] for p in caught.value.problems] == ["personal_data_without_subject"]
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM semantic_facts") == 0
    assert (await rt.vectors.describe()).vector_count == 0
    assert await written_events(rt, "t1") == []

    learned = await memory.learn(
        {
            "content": "Ada's number is +44 20 7946 0000",
            "subject": "contact:ada",
            "metadata": {"_personal": True},
        }
    )
    again = await memory.learn(
        {"content": "Ada's number is +44 20 7946 0000", "subject": "contact:ada"}
    )
    assert again.fact_id == learned.fact_id and not again.created
    [event] = await written_events(rt, "t1")
    assert event["event_id"] == learned.fact_id and event["tier"] == "semantic"
    # Compact: the fact's row holds its subject, source and confidence; not its marking.
    assert event["payload"] == {"personal_fields": ["metadata"]}
    assert "7946" not in json.dumps(event)
