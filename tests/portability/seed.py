"""A tenant with one of everything the export format holds, written through the tiers: facts
(one superseded by a newer statement, one merged into its duplicate, one restored by an
operator so the pair is kept apart, one with a personal field), links, provenance, events,
runs and episodes (one with a personal field), a workflow pack and a lifecycle override."""

from __future__ import annotations

from typing import Any

from agent_memory.lifecycle.retention import LifecycleUpdate, set_lifecycle
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import Episode, RunRecord, Workflow
from agent_memory.tiers.semantic.models import FactInput
from local_runtime.runtime import LocalRuntime

DAY = 86_400.0
QUESTIONS = ("where does Ada live", "what does Bo drink", "the invoice", "Cyrus's boat")


def facts(now: float) -> list[FactInput]:
    texts: list[tuple[str, str, dict[str, Any]]] = [
        ("ada", "Ada lives in Paris", {}),
        ("ada", "Ada lives in Berlin", {}),
        ("general", "Bo drinks green tea every morning", {}),
        ("bo", "Bo drinks green tea every morning", {}),
        ("general", "Dee rides a red bike to work", {}),
        ("dee", "Dee rides a red bike to work", {}),
        ("cyrus", "Cyrus owns a small boat called Wren", {"source_doc": "notes.md"}),
        ("cyrus", "Cyrus's phone number is on file", {"_personal": ["phone"], "phone": "+44 1"}),
        ("acct:7", "The invoice INV-1001 was paid in May", {}),
        ("acct:7", "The invoice INV-1005 is still open", {}),
    ]
    return [
        FactInput(content=text, subject=subject, metadata=meta, valid_from=now - DAY * (9 - i))
        for i, (subject, text, meta) in enumerate(texts)
    ]


async def seed_tenant(runtime: LocalRuntime, tenant: str) -> None:
    memory = await Memory.open(runtime.bindings(), tenant)
    now = runtime.clock.now()
    await memory.semantic().learn_many(facts(now))
    reconciler = memory.reconciler()
    assert reconciler is not None
    report = await reconciler.run()
    assert len(report.merges) == 2 and report.superseded_updates, report
    # An operator undoes the merge: the pair is kept apart for good.
    await reconciler.undo(report.merges[0].drop, "ops@example.com")
    store, now_ms = memory.episodic, int(now * 1000)
    await store.start_run(
        run_id="01J0000000000000000000RUN1",
        agent_type="assistant",
        instance_id="i1",
        input={"task": "renewal"},
        started_at=now_ms - 5000,
    )
    for n, (subject, data) in enumerate(
        [("cyrus", {"_personal": ["email"], "email": "cy@example.com"}), (None, {"step": 2})]
    ):
        await store.append_episode(
            Episode(
                episode_id=f"01J0000000000000000000EP0{n}",
                run_id="01J0000000000000000000RUN1",
                agent_type="assistant",
                instance_id="i1",
                kind="observation",
                subject=subject,
                content=f"observed step {n} of the renewal",
                data=data,
                created_at=now_ms - 4000 + n,
            )
        )
    await store.finish_run(
        RunRecord(
            run_id="01J0000000000000000000RUN1",
            agent_type="assistant",
            instance_id="i1",
            status="completed",
            input={"task": "renewal"},
            output={"answer": "done"},
            steps=2,
            started_at=now_ms - 5000,
            finished_at=now_ms - 1000,
        )
    )
    workflow = Workflow(
        workflow_id="wf-triage",
        agent_type="assistant",
        task_type="triage",
        spec={},
        alpha=9.0,
        beta=2.0,
        pulls=11,
        status="active",
        created_at=now,
        updated_at=now,
    )
    await memory.packs.promote("triage", workflow, instance_id="i1", by="ops", now_ms=now_ms)
    update = LifecycleUpdate(episode_retention_days=30)
    await set_lifecycle(
        memory.bindings.db, tenant, update, default_days=90, now_ms=now_ms, updated_by="ops"
    )
    await runtime.background.drain()
