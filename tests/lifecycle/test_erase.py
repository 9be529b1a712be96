"""Subject erase: seed one subject in every tier (working memory, episodes, runs, facts,
vectors, links, provenance, events, cold archives), erase it over the admin route, and
prove — by reading every store of the state folder raw — that nothing of it remains while
another subject is untouched."""

from __future__ import annotations

import dataclasses
import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agent_memory.lifecycle.erase import (
    EraseReport,
    SubjectEraser,
    SubjectMatcher,
    validate_subject,
)
from agent_memory.lifecycle.prune import Pruner
from agent_memory.lifecycle.reconciler import Reconciler
from agent_memory.memory import Memory
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.working import WorkingMemory
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.lifecycle.conftest import DAY_MS, NOW_MS, count, seed_episodes, seed_run
from tests.semantic.fakes import SpyD1
from worker.app import handle

ADA = "contact:ada"
BOB = "contact:bob"


def traces_in_state(root: Path, needle: str) -> list[str]:
    """Every place under the state folder whose live content contains `needle`: each
    SQLite database dumped row by row, each archive decompressed, every other file read."""
    hits: list[str] = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        raw = path.read_bytes()
        if raw.startswith(b"SQLite format 3"):
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                for line in conn.iterdump():
                    if needle in line:
                        hits.append(f"{path.name}: {line[:160]}")
            finally:
                conn.close()
            continue
        if raw[:2] == b"\x1f\x8b":
            # Archive rows by content, not by file: an erase may rename the object.
            for line in gzip.decompress(raw).decode().splitlines():
                if needle in line:
                    hits.append(f"archive row: {line}")
            continue
        if needle.encode() in raw:
            hits.append(str(path.relative_to(root)))
    return hits


async def seed_subject(rt: LocalRuntime, subject: str) -> dict[str, Any]:
    """One subject in every tier; returns ids to check afterwards."""
    # From the runtime's bindings: personal data is sealed under the folder's dev KEK.
    memory = (await Memory.open(rt.bindings(), "acme")).semantic()
    name = subject.split(":")[1]
    # Working memory: a key of an instance, and a value naming the subject.
    working = WorkingMemory(rt.kv, "acme", f"inst-{name}")
    await working.set("current", {"contact": subject, "note": f"call {name} back"})
    await WorkingMemory(rt.kv, "acme", "shared").set(f"draft-{name}", f"email to {subject}")
    # Episodes: recent ones, old ones (the prune archives them), a run that names it.
    run_id = await seed_run(rt.db, "acme", NOW_MS - 5_000, input={"text": f"follow up {subject}"})
    recent = await seed_episodes(
        rt.db,
        "acme",
        [NOW_MS - 3, NOW_MS - 2, NOW_MS - 1],
        subject=subject,
        run_id=run_id,
        data={
            "observations": [{"predicate": "prefers_channel", "object": "email", "confidence": 0.9}]
        },
    )
    old = await seed_episodes(
        rt.db,
        "acme",
        [NOW_MS - 100 * DAY_MS, NOW_MS - 99 * DAY_MS],
        subject=subject,
        content=f"met {subject} at the fair",
    )
    await seed_run(rt.db, "acme", NOW_MS - 100 * DAY_MS, input={"text": f"intro to {subject}"})
    # Facts about it, a fact naming it as object, personal data marked.
    about = await memory.learn(
        {"content": f"{name} prefers email", "subject": subject, "metadata": {"_personal": True}}
    )
    champion = await memory.learn(
        {
            "content": f"the champion at acme is {name}",
            "subject": f"acme-{name}",
            "predicate": "champion",
            "object": subject,
        }
    )
    # A recall that names it (a memory_retrieved event with the query and the ids).
    await memory.recall(f"what does {subject} prefer", 5)
    return {"recent": recent, "old": old, "facts": [about.fact_id, champion.fact_id], "run": run_id}


async def test_erase_removes_every_trace_and_leaves_other_subjects_intact(rt: LocalRuntime) -> None:
    ada = await seed_subject(rt, ADA)
    bob = await seed_subject(rt, BOB)
    # Bob's and Ada's old episodes share archive objects (same week): the prune writes
    # them, then the reconciler links, promotes and summarises across both.
    prune = await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("job", NOW_MS)
    assert prune.tenants[0].episodes_deleted == 4
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    report = await Reconciler(
        "acme",
        db=rt.db,
        vectors=rt.vectors,
        memory=memory,
        embedding_key=rt.embedder.config.key,
        clock=rt.clock,
    ).run()
    assert report.promoted == 2  # one "prefers email" per contact, with provenance
    await rt.db.batch(
        [
            rt.db.prepare(
                "INSERT INTO memory_links (tenant_id, from_fact_id, to_fact_id, score, created_at) "
                "VALUES ('acme', ?, ?, 0.9, 1)"
            ).bind(a, b)
            for a, b in ((ada["facts"][0], bob["facts"][0]), (bob["facts"][0], ada["facts"][0]))
        ]
    )
    await rt.background.drain()
    assert traces_in_state(rt.state.root, ADA)  # it is everywhere before the erase
    bob_before = {
        "traces": sorted(traces_in_state(rt.state.root, BOB)),
        "episodes": await count(
            rt.db, "SELECT COUNT(*) AS n FROM memory_episodes WHERE subject = ?", BOB
        ),
        "facts": await count(
            rt.db,
            "SELECT COUNT(*) AS n FROM semantic_facts WHERE subject = ? OR object = ?",
            BOB,
            BOB,
        ),
    }

    token = mint_token(rt.state.access, "dpo@example.com", now=rt.clock.now())
    response = await handle(
        build_request("DELETE", f"/admin/tenants/acme/subjects/{quote(ADA)}", token=token),
        rt.bindings(),
    )
    assert response.status == 200, response.body
    body = json.loads(response.body)

    assert body["subject"] == ADA and body["complete"] and body["erased_by"] == "dpo@example.com"
    assert body["episodes"] == 3 and body["runs"] == 1  # the old run is in the archive
    assert body["facts"] == 3  # its fact, the fact naming it, the promoted fact
    assert body["vectors"] == 3 and body["links"] >= 2 and body["provenance"] >= 3
    assert body["working_keys"] == 2 and body["events"] > 0
    assert body["archived_rows"]["episodes"] == 2 and body["archived_rows"]["runs"] == 1
    # Nothing of Ada is left anywhere in the state folder (D1, KV, vectors, archives).
    assert traces_in_state(rt.state.root, ADA) == []
    assert await rt.vectors.get_by_ids(ada["facts"]) == []
    # Bob is untouched: every trace of him is still there (the shared archive rewritten).
    # (Links touching an erased fact are gone from both ends; Bob's fact itself stays.)
    assert (
        await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes WHERE subject = ?", BOB)
        == bob_before["episodes"]
    )
    assert (
        await count(
            rt.db,
            "SELECT COUNT(*) AS n FROM semantic_facts WHERE subject = ? OR object = ?",
            BOB,
            BOB,
        )
        == bob_before["facts"]
    )
    assert len(await rt.vectors.get_by_ids(bob["facts"])) == 2
    after = sorted(traces_in_state(rt.state.root, BOB))
    lost = [t for t in bob_before["traces"] if t not in after]
    # Only the erased fact was cut out of Bob's recall event: the event itself stays.
    assert [t for t in lost if "memory_retrieved" not in t] == []
    assert len(after) == len(bob_before["traces"])
    assert body["events_scrubbed"] >= 1
    found = await memory.recall(f"what does {BOB} prefer", 5)
    assert found.results

    # Erasing again is a no-op that reports zeros.
    again = await SubjectEraser(
        "acme", db=rt.db, clock=rt.clock, kv=rt.kv, vectors=rt.vectors, cold=rt.cold
    ).erase(ADA)
    tidied = again.keyword_index_optimized
    assert again == EraseReport(tenant_id="acme", subject=ADA, keyword_index_optimized=tidied)


async def test_a_failed_vector_delete_keeps_the_rows_so_a_retry_finds_everything(
    rt: LocalRuntime,
) -> None:
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    learned = await memory.learn({"content": "ada likes tea", "subject": ADA})

    class BrokenVectors:
        async def get_by_ids(self, ids: Any) -> Any:
            raise OSError("Vectorize unavailable")

    broken = SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=BrokenVectors())  # type: ignore[arg-type]
    report = await broken.erase(ADA)
    assert not report.complete and "Vectorize unavailable" in report.errors[0]
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM semantic_facts") == 1  # kept
    fixed = await SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=rt.vectors).erase(ADA)
    assert fixed.complete and (fixed.facts, fixed.vectors) == (1, 1)
    assert await rt.vectors.get_by_ids([learned.fact_id]) == []


async def test_an_incomplete_erase_is_an_error_response(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "acme", [NOW_MS], subject=ADA)

    class BrokenCold:
        async def list(self, **kwargs: Any) -> Any:
            raise OSError("R2 unavailable")

    bindings = dataclasses.replace(rt.bindings(), cold=BrokenCold())  # type: ignore[arg-type]
    token = mint_token(rt.state.access, "dpo@example.com", now=rt.clock.now())
    response = await handle(
        build_request("DELETE", f"/admin/tenants/acme/subjects/{quote(ADA)}", token=token), bindings
    )
    assert response.status == 502
    error = json.loads(response.body)["error"]
    assert error["code"] == "erase_incomplete"
    assert error["details"]["episodes"] == 1 and "R2 unavailable" in error["details"]["errors"][0]


@pytest.mark.parametrize("subject", ["", "ab", " padded ", "x" * 257])
async def test_subjects_that_would_match_too_much_are_refused(
    rt: LocalRuntime, subject: str
) -> None:
    with pytest.raises(ValueError):
        validate_subject(subject)
    token = mint_token(rt.state.access, "dpo@example.com", now=rt.clock.now())
    path = f"/admin/tenants/acme/subjects/{quote(subject) or '%20'}"
    response = await handle(build_request("DELETE", path, token=token), rt.bindings())
    assert response.status in (404, 422)


async def test_erase_is_access_gated(rt: LocalRuntime) -> None:
    await seed_episodes(rt.db, "acme", [NOW_MS], subject=ADA)
    response = await handle(
        build_request("DELETE", f"/admin/tenants/acme/subjects/{quote(ADA)}"), rt.bindings()
    )
    assert response.status == 401
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 1


def test_the_matcher_reads_rows_as_stored_and_as_archived() -> None:
    matcher = SubjectMatcher(ADA)
    assert matcher.episode({"subject": ADA, "content": "x", "data": "{}"})
    assert matcher.episode({"subject": None, "content": "x", "data": {"who": ADA}})
    assert not matcher.episode({"subject": BOB, "content": "x", "data": {}})
    assert matcher.run({"run_id": "r", "input": {"text": f"call {ADA}"}})
    assert matcher.event({"event_id": "e", "payload": json.dumps({"query": f"where is {ADA}"})})
    assert not matcher.event({"event_id": "e", "payload": {"query": "weather"}})


async def test_a_free_text_fact_about_the_subject_is_erased_by_its_derived_entity(
    rt: LocalRuntime,
) -> None:
    # Stored as an MCP client would: no structured subject, so the row's subject is the
    # catch-all and only the derived key (entity "alice") says whom the fact is about.
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    about = await memory.learn({"content": "Alice prefers dark mode in every editor"})
    other = await memory.learn({"content": "Bob prefers light mode in every editor"})
    row = (
        await rt.db.prepare("SELECT subject, key_entity FROM semantic_facts WHERE fact_id = ?")
        .bind(about.fact_id)
        .first()
    )
    assert row is not None and (row["subject"], row["key_entity"]) == ("general", "alice")

    report = await SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=rt.vectors).erase(
        "alice"
    )

    assert report.complete and report.facts == 1
    assert await memory.get(about.fact_id) is None
    assert await rt.vectors.get_by_ids([about.fact_id]) == []
    assert await memory.get(other.fact_id) is not None


async def test_recall_records_waiting_in_kv_that_name_the_subject_are_erased(
    rt: LocalRuntime,
) -> None:
    failing = SpyD1(rt.db)
    memory = SemanticMemory(
        "acme", db=failing, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock, kv=rt.kv
    )
    await memory.learn_many([{"content": f"{ADA} prefers calls"}, {"content": "Office hours"}])
    failing.fail_pattern = "INSERT INTO memory_events"  # D1 refuses: the records go to KV
    named = await memory.recall(f"what does {ADA} prefer", 1)
    other = await memory.recall("office hours", 1)

    report = await SubjectEraser(
        "acme", db=rt.db, clock=rt.clock, kv=rt.kv, vectors=rt.vectors, cold=rt.cold
    ).erase(ADA)

    assert report.complete
    waiting = [key.name for key in (await rt.kv.list(prefix="recall-pending:acme:")).keys]
    assert waiting == [f"recall-pending:acme:{other.event_id}"]
    assert named.event_id not in " ".join(waiting)


async def test_a_pack_promoted_from_an_instance_named_after_the_subject_forgets_that_id(
    rt: LocalRuntime,
) -> None:
    """Issue 26 item 7: the pack keeps its workflow (the tenant's now), not the instance id
    that names the erased subject; another instance's pack is untouched."""
    from agent_memory.tiers.episodic import ERASED_SOURCE, Workflow, WorkflowPacks

    packs = WorkflowPacks(rt.db, "acme")
    for name, instance in (("ada-flow", "ada@example.com"), ("bob-flow", "bob@example.com")):
        workflow = Workflow(
            workflow_id=f"wf-{name}", agent_type="assistant", task_type="follow_up", spec={},
            alpha=9.0, beta=2.0, pulls=10, status="active", created_at=1.0, updated_at=1.0,
        )  # fmt: skip
        await packs.promote(name, workflow, instance_id=instance, by="ops", now_ms=NOW_MS)
    report = await SubjectEraser("acme", db=rt.db, clock=rt.clock, vectors=rt.vectors).erase(
        "ada@example.com"
    )
    assert report.complete
    sources = {p.name: p.source_instance_id for p in await packs.list("assistant")}
    assert sources == {"ada-flow": ERASED_SOURCE, "bob-flow": "bob@example.com"}
