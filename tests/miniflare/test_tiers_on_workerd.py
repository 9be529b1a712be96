"""The project's real repositories, run on workerd's KV, D1 and Durable Object SQLite.

Every SQL statement these paths send goes through Miniflare to workerd (D1 on workerd's
SQLite, with the project's migrations applied; DO SQL on a SQLite-backed Durable Object),
and every KV call to workerd's KV, through the test adapters in tests/miniflare/adapters.py,
which hand Python the values Pyodide would (JS numbers, memoryviews, verbatim JS errors).

Covered, one end-to-end test (or more) per tier:

* tier 1, working memory: `WorkingMemory` on KV; `turn_state` and `run_log` on DO SQL;
* tier 2, episodic: `EpisodicStore` on D1 (idempotent writes, reads, keyset pagination,
  tenant scoping);
* tier 4, procedural: `ProceduralMemory` (the Thompson-sampling bandit) on DO SQL;
* a whole agent turn through `AgentRuntimeCore` (turn_state, run_log, run_workflows,
  working memory in KV, episodic writes off the response path, the outcome recorded
  inside `transaction_sync`), twice, so the second turn reads the first one's episode.

Tier 3 (semantic facts) is in `test_semantic_on_workerd.py`.
"""

from __future__ import annotations

import random
from typing import Any, cast

import pytest

from agent_memory.ids import new_ulid
from agent_memory.tiers.episodic import (
    Episode,
    EpisodicStore,
    FailedWrite,
    ProceduralMemory,
    RunRecord,
    UnknownWorkflowError,
)
from agent_memory.tiers.working import WorkingMemory, WorkingMemoryBudgetExceeded
from agent_runtime_do.core import AgentRuntimeCore
from agent_runtime_do.storage import (
    append_run_log,
    begin_turn,
    create_schema,
    finish_turn,
    read_run,
    read_turn_state,
)
from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from local_runtime.background import LocalBackgroundTasks
from tests.contracts.conftest import KVHarness
from tests.miniflare.adapters import MiniflareD1, MiniflareDurableObjectStorage

NOW_MS = 1_750_000_000_000


# --- tier 1: working memory ---------------------------------------------------------------


async def test_working_memory_on_workerd_kv(mf_kv: KVHarness) -> None:
    memory = WorkingMemory(mf_kv.kv, "acme", "inst-1", budget_bytes=64)
    write = await memory.set("plan", {"step": 2, "ok": True})
    assert write.used_after == len("plan") + len('{"step":2,"ok":true}')
    await memory.set("note", "hi")
    assert await memory.get("plan") == {"step": 2, "ok": True}
    assert await memory.snapshot() == {"note": "hi", "plan": {"step": 2, "ok": True}}
    entries = await memory.entries()
    assert [e.key for e in entries] == ["note", "plan"]
    # The TTL is real: workerd reports the absolute expiration of each key.
    assert all(e.expiration is not None and e.expiration > mf_kv.now() for e in entries)

    with pytest.raises(WorkingMemoryBudgetExceeded):
        await memory.set("big", "x" * 64)
    assert await memory.get("big") is None

    await memory.delete("plan")
    assert await memory.snapshot() == {"note": "hi"}
    # Another instance's prefix sees none of it.
    assert await WorkingMemory(mf_kv.kv, "acme", "inst-2").snapshot() == {}


def test_turn_state_and_run_log_on_workerd_do_sql(
    mf_do_storage: MiniflareDurableObjectStorage,
) -> None:
    sql = mf_do_storage.sql
    create_schema(sql)
    create_schema(sql)  # idempotent, as every object start runs it
    clock = FixedClock(1_750_000_000.25)
    first = begin_turn(
        sql, tenant="acme", agent_type="assistant", instance_id="i1", run_id="r1", now=clock.now()
    )
    assert (first["turn_count"], first["last_status"]) == (1, "running")
    finish_turn(sql, clock, "r1", "completed", {})
    second = begin_turn(
        sql, tenant="acme", agent_type="assistant", instance_id="i1", run_id="r2", now=clock.now()
    )
    assert (second["turn_count"], second["completed_count"], second["last_run_id"]) == (
        2,
        1,
        "r2",
    )
    finish_turn(sql, clock, "r2", "failed", {})
    state = read_turn_state(sql, "i1")
    assert state is not None
    assert (state["completed_count"], state["failed_count"], state["last_status"]) == (
        1,
        1,
        "failed",
    )
    # A REAL with a fraction stays a float through the JS number.
    assert state["created_at"] == 1_750_000_000.25

    # finish_turn logged each run's end (turn_end, with its status).
    assert [(r["kind"], r["detail"]) for r in read_run(sql, "r2")["run_log"]] == [
        ("turn_end", {"status": "failed"})
    ]
    for kind in ("turn_start", "llm_call", "turn_end"):
        append_run_log(sql, clock, "r3", kind, {"kind": kind, "n": 1.5})
    append_run_log(sql, clock, "r4", "turn_start", {})
    log = read_run(sql, "r3")["run_log"]
    assert [row["step"] for row in log] == [0, 1, 2]
    assert [row["kind"] for row in log] == ["turn_start", "llm_call", "turn_end"]
    assert log[1]["detail"] == {"kind": "llm_call", "n": 1.5}
    assert [row["step"] for row in read_run(sql, "r4")["run_log"]] == [0]


# --- tier 2: episodic -------------------------------------------------------------------------


def _episode(run_id: str, n: int, created_at: int) -> Episode:
    return Episode(
        episode_id=new_ulid(created_at / 1000),
        run_id=run_id,
        agent_type="assistant",
        instance_id="i1",
        kind="outcome",
        subject="contact:1" if n % 2 else None,
        content=f"episode {n}: café ☕",
        data={"n": n, "score": 0.5 + n, "tags": ["a"]},
        importance=0.25 * (n % 4),
        created_at=created_at,
    )


async def test_episodic_store_on_workerd_d1(mf_migrated_d1: MiniflareD1) -> None:
    store = EpisodicStore(mf_migrated_d1, "acme")
    runs = [new_ulid((NOW_MS + i * 1000) / 1000) for i in range(3)]
    for i, run_id in enumerate(runs):
        await store.start_run(
            run_id=run_id,
            agent_type="assistant",
            instance_id="i1",
            input={"text": f"job {i}"},
            started_at=NOW_MS + i * 1000,
        )
    # Retried start: ON CONFLICT DO NOTHING, no error, nothing changes.
    await store.start_run(
        run_id=runs[0], agent_type="assistant", instance_id="i1", input={}, started_at=NOW_MS
    )
    episodes = [_episode(runs[i], i, NOW_MS + i * 1000 + 5) for i in range(3)]
    for episode in episodes:
        await store.append_episode(episode)
    await store.append_episode(episodes[0])  # idempotent retry
    finished = RunRecord(
        run_id=runs[0],
        agent_type="assistant",
        instance_id="i1",
        status="completed",
        input={"text": "job 0"},
        output={"text": "done"},
        steps=3,
        started_at=NOW_MS,
        finished_at=NOW_MS + 500,
    )
    await store.finish_run(finished)

    assert await store.get_run(runs[0]) == finished
    pending = await store.get_run(runs[1])
    assert pending is not None and pending.status == "running" and pending.finished_at is None

    recent = await store.recent_episodes("assistant")
    assert [e.episode_id for e in recent] == [e.episode_id for e in reversed(episodes)]
    assert recent[-1] == episodes[0]  # every field survives D1 and the JS number rules
    assert await store.episodes_for_run(runs[2]) == [episodes[2]]

    first = await store.list_runs(limit=2)
    assert [r.run_id for r in first.runs] == [runs[2], runs[1]]
    assert first.next_cursor is not None
    rest = await store.list_runs(limit=2, cursor=first.next_cursor)
    assert [r.run_id for r in rest.runs] == [runs[0]]
    assert rest.next_cursor is None
    completed = await store.list_runs(status="completed")
    assert [r.run_id for r in completed.runs] == [runs[0]]

    # Tenant scope: another tenant's store sees none of it.
    other = EpisodicStore(mf_migrated_d1, "globex")
    assert await other.recent_episodes("assistant") == []
    assert await other.get_run(runs[0]) is None


# --- tier 4: procedural -------------------------------------------------------------------------


def test_procedural_bandit_on_workerd_do_sql(
    mf_do_storage: MiniflareDurableObjectStorage,
) -> None:
    create_schema(mf_do_storage.sql)
    bandit = ProceduralMemory(mf_do_storage.sql)
    for workflow_id in ("wf-a", "wf-b"):
        bandit.register(
            workflow_id=workflow_id,
            agent_type="assistant",
            task_type="general",
            spec={"instructions": workflow_id},
            now=1.0,
        )
    bandit.register(  # an existing id is left as it is
        workflow_id="wf-a", agent_type="assistant", task_type="general", spec={}, now=2.0
    )
    workflows = bandit.workflows("assistant", "general")
    assert [(w.workflow_id, w.alpha, w.beta, w.pulls) for w in workflows] == [
        ("wf-a", 1.0, 1.0, 0),
        ("wf-b", 1.0, 1.0, 0),
    ]

    for _ in range(20):
        bandit.record_outcome("wf-a", 1.0, now=3.0)
    updated = bandit.record_outcome("wf-b", 0.25, now=3.0)
    assert (updated.alpha, updated.beta, updated.pulls) == (1.25, 1.75, 1)
    with pytest.raises(UnknownWorkflowError):
        bandit.record_outcome("wf-missing", 0.5, now=3.0)

    selection = bandit.select_workflow("assistant", "general", random.Random(7))
    assert selection is not None and selection.workflow.workflow_id == "wf-a"
    assert [w.workflow_id for w in bandit.pack_candidates("assistant")] == ["wf-a"]
    assert [w.workflow_id for w in bandit.workflows("assistant")] == ["wf-a", "wf-b"]


# --- a whole turn -------------------------------------------------------------------------------

SCOPE = {"tenant": "acme", "agent_type": "assistant", "instance_id": "inst-1"}


async def test_agent_turns_on_workerd_bindings(
    mf_bindings: Bindings,
    mf_do_storage: MiniflareDurableObjectStorage,
    mf_migrated_d1: MiniflareD1,
    mf_kv: KVHarness,
) -> None:
    core = AgentRuntimeCore(mf_do_storage, mf_bindings)
    await core.initialize()
    core.rng = random.Random(1)
    background = cast(LocalBackgroundTasks, mf_bindings.background)

    first = await core.call("run", {**SCOPE, "input": "remember the blue door"})
    assert first["status"] == "completed", first
    await background.drain()
    second = await core.call("run", {**SCOPE, "input": "what did I say?"})
    assert second["status"] == "completed", second
    await background.drain()

    # The second turn read the first turn's episode from D1 (tier 2 on workerd).
    assert second["turn_count"] == 2
    assert first["episode_id"] in second["context_episode_ids"]
    assert "remember the blue door" in second["output"]

    # Tier 1 on DO SQL and KV.
    state = (await core.call("state", SCOPE))["turn_state"]
    assert (state["turn_count"], state["completed_count"], state["failed_count"]) == (2, 2, 0)
    log = (await core.call("run_log", {**SCOPE, "run_id": second["run_id"]}))["run_log"]
    kinds = [row["kind"] for row in log]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_end"
    assert "memory_write" in kinds and "tool_call" in kinds
    assert [row["step"] for row in log] == list(range(len(log)))
    working = WorkingMemory(mf_kv.kv, "acme", "assistant.inst-1")
    assert await working.get("last_input") == "what did I say?"

    # Tier 2 rows as workerd's D1 holds them.
    runs = (
        await mf_migrated_d1.prepare(
            "SELECT run_id, status, steps FROM agent_runs WHERE tenant_id = ? ORDER BY run_id"
        )
        .bind("acme")
        .all()
    )
    assert [(r["run_id"], r["status"]) for r in runs.results] == [
        (first["run_id"], "completed"),
        (second["run_id"], "completed"),
    ]
    count = (
        await mf_migrated_d1.prepare(
            "SELECT COUNT(*) AS n FROM memory_episodes WHERE tenant_id = ?"
        )
        .bind("acme")
        .first_value("n")
    )
    assert count == 2

    # Tier 4: the outcome goes through transaction_sync (run_workflows + the bandit).
    assert first["workflow_id"] is not None
    scored = await core.call("record_outcome", {**SCOPE, "run_id": first["run_id"], "score": 1})
    workflow: dict[str, Any] = scored["workflow"]
    assert workflow["workflow_id"] == first["workflow_id"]
    assert workflow["pulls"] == 1
    again = await core.call("record_outcome", {**SCOPE, "run_id": first["run_id"], "score": 0})
    assert again["error"]["code"] == "outcome_already_recorded"
    stored = core.procedural.get(first["workflow_id"])
    assert stored is not None and stored.pulls == 1 and stored.alpha == 2.0

    # An episodic write that exhausted its retries is kept in the object's failed_writes
    # table and shown with the run (the sink the EpisodicWriter calls on final failure).
    core._record_failed_write(
        FailedWrite(
            op="complete_run",
            run_id=second["run_id"],
            payload={"status": "completed", "steps": 2},
            error="D1_ERROR: injected: SQLITE_BUSY",
            attempts=4,
        )
    )
    shown = await core.call("run_log", {**SCOPE, "run_id": second["run_id"]})
    assert [(f["op"], f["attempts"], f["payload"]) for f in shown["failed_writes"]] == [
        ("complete_run", 4, {"status": "completed", "steps": 2})
    ]
