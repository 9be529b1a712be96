"""Tier-aware retrieval at turn start (issue 16, item 5): working memory and the episodic
context are scored with their tier's weights from MEMORY_RETRIEVAL_CONFIG, and each read
records a `memory_retrieved` event, like semantic recall."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_memory.agent.turn import assemble_context
from agent_memory.governance.agent_types import AgentType, MemoryConfig
from agent_memory.governance.writes import loaded_payload
from agent_memory.ids import new_ulid
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import Episode, EpisodicStore
from agent_memory.tiers.working import WorkingMemory
from bindings.ports.clock import FixedClock
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder

NOW = 1_750_000_000.0
QUESTION = "what did the plumber say about the leak?"
AGENT = AgentType(
    name="assistant",
    description="test",
    system_prompt="test",
    memory=MemoryConfig(recent_episodes=2),
)


def episode(run_id: str, created_at_ms: int, content: str) -> Episode:
    return Episode(
        episode_id=new_ulid(created_at_ms / 1000),
        run_id=run_id,
        agent_type="assistant",
        instance_id="default",
        kind="outcome",
        content=content,
        created_at=created_at_ms,
    )


async def setup(tmp_path: Path, vars: dict[str, str] | None = None) -> LocalRuntime:
    clock = FixedClock(NOW - 1200)
    runtime = LocalRuntime.open(tmp_path / "s", embedder=HashingEmbedder(), clock=clock, vars=vars)
    await runtime.migrate()
    working = WorkingMemory(runtime.kv, "acme", "assistant.default")
    await working.set("zz_todo", "call the plumber back about the leak")  # older, relevant
    clock.advance(600)
    await working.set("shopping", "buy oat milk")  # newer, unrelated
    store = EpisodicStore(runtime.db, "acme")
    run_id = new_ulid(NOW - 86_400)
    day_ms = 86_400_000
    now_ms = int(NOW * 1000)
    await store.append_episode(
        episode(run_id, now_ms - 5 * day_ms, "The plumber said the leak is in the kitchen pipe")
    )
    for age in (4, 3, 2, 1):
        await store.append_episode(
            episode(run_id, now_ms - age * day_ms, f"Sent the weekly report, draft {age}")
        )
    clock.advance(600)
    return runtime


async def context_and_events(runtime: LocalRuntime) -> tuple[Any, list[dict[str, Any]]]:
    memory = await Memory.open(runtime.bindings(), "acme")
    context = await assemble_context(
        memory,
        agent_type=AGENT,
        turn_state={},
        working=memory.working("default", agent_type="assistant"),
        input_text=QUESTION,
    )
    await runtime.background.drain()
    rows = await runtime.db.prepare(
        "SELECT tier, payload FROM memory_events WHERE tenant_id = 'acme' "
        "AND kind = 'memory_retrieved' ORDER BY tier"
    ).all()
    return context, [{"tier": r["tier"], **loaded_payload(r["payload"])} for r in rows.results]


async def test_turn_start_ranks_working_memory_and_episodes_for_the_input(
    tmp_path: Path,
) -> None:
    runtime = await setup(tmp_path)
    try:
        context, events = await context_and_events(runtime)
    finally:
        await runtime.close()
    # Relevance to the input beats both key order and recency.
    assert list(context.working_memory) == ["zz_todo", "shopping"]
    contents = [e.content for e in context.episodes]
    # The plumber episode is older than the two newest, yet it is retrieved; the context
    # lists the chosen episodes newest first.
    assert len(contents) == 2
    assert "The plumber said the leak is in the kitchen pipe" in contents
    assert contents[0] == "Sent the weekly report, draft 1"
    assert [e["tier"] for e in events] == ["episodic", "working"]
    episodic, working = events
    assert episodic["query"] == QUESTION
    assert episodic["candidates"] == {"pool": 5}
    assert len(episodic["results"]) == 2
    assert episodic["results"][0]["relevance"] > 0
    assert [r["id"] for r in working["results"]] == ["zz_todo", "shopping"]
    scores = [r["score"] for r in working["results"]]
    assert scores == sorted(scores, reverse=True)


async def test_the_configured_tier_weights_are_the_ones_used(tmp_path: Path) -> None:
    recency_only = {
        "relevance": 0,
        "recency": 1,
        "confidence": 0,
        "density": 0,
        "recency_half_life_days": 7,
    }
    config = json.dumps({"tiers": {"episodic": recency_only, "working": recency_only}})
    runtime = await setup(tmp_path, {"MEMORY_RETRIEVAL_CONFIG": config})
    try:
        context, events = await context_and_events(runtime)
    finally:
        await runtime.close()
    # With relevance weighted 0 the newest win: the plumber is left out.
    assert [e.content for e in context.episodes] == [
        "Sent the weekly report, draft 1",
        "Sent the weekly report, draft 2",
    ]
    assert list(context.working_memory) == ["shopping", "zz_todo"]
    assert all(r["relevance"] >= 0 for e in events for r in e["results"])


async def test_a_working_memory_get_is_scored_and_recorded(tmp_path: Path) -> None:
    from agent_memory.agent.turn import ToolContext, platform_tools
    from agent_memory.governance.agent_types import BUILT_IN

    clock = FixedClock(NOW)
    runtime = LocalRuntime.open(tmp_path / "s", embedder=HashingEmbedder(), clock=clock)
    await runtime.migrate()
    working = WorkingMemory(runtime.kv, "acme", "assistant.default", clock=clock)
    await working.set("plan", "ship on friday")
    clock.advance(1800)  # half an hour later the model reads it back
    agent = BUILT_IN.get("assistant")
    assert agent is not None
    context = ToolContext(
        agent_type=agent,
        instance_id="default",
        run_id=new_ulid(NOW),
        memory=(await Memory.open(runtime.bindings(), "acme")),
        working=working,
    )
    (get,) = [t for t in platform_tools(agent, context) if t.name == "working_memory_get"]

    answer = await get.call({"key": "plan"}, context)
    missing = await get.call({"key": "nothing"}, context)
    await runtime.background.drain()

    assert answer == {"key": "plan", "found": True, "value": "ship on friday"}
    assert missing["found"] is False
    rows = await runtime.db.prepare(
        "SELECT tier, payload FROM memory_events WHERE tenant_id = 'acme' "
        "AND kind = 'memory_retrieved'"
    ).all()
    (row,) = rows.results  # one event: the hit; a miss retrieves nothing
    payload = loaded_payload(row["payload"])
    assert row["tier"] == "working" and payload["query"] == "plan"
    (item,) = payload["results"]
    assert item["id"] == "plan" and item["relevance"] == 1.0
    # Recency comes from the recorded write time (30 min ago), not from "now".
    assert 0.0 < item["recency"] < 1.0
