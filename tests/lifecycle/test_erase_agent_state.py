"""Subject erase reaches the AgentRuntime Durable Objects: run logs, turn state, failed and
pending episodic writes of every instance of the tenant, found through D1 and reached
through the namespace port; and a queued write of an erased run never brings it back."""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import quote

from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.lifecycle.prune import Pruner
from agent_memory.tiers.episodic import EpisodicStore
from agent_runtime_do.core import AgentRuntimeCore
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.agents.test_episodic import FlakyD1
from tests.agents.test_outbox import DiesAfterAnswering
from tests.lifecycle.conftest import count
from worker.app import handle

ADA = "contact:ada-lovelace"
BOB = "contact:bob-builder"
OPS = "ops@example.com"


async def run_turn(rt: LocalRuntime, instance: str, subject: str, text: str) -> dict[str, Any]:
    token = mint_token(rt.state.access, OPS, now=rt.clock.now())
    body = {"input": text, "subject": subject, "instance_id": instance}
    response = await handle(
        build_request("POST", "/v1/agents/acme/assistant/run", body, token=token), rt.bindings()
    )
    assert response.status == 200, response.body
    await rt.background.drain()
    answer: dict[str, Any] = json.loads(response.body)
    return answer


async def erase_over_route(rt: LocalRuntime, subject: str) -> Any:
    token = mint_token(rt.state.access, "dpo@example.com", now=rt.clock.now())
    path = f"/admin/tenants/acme/subjects/{quote(subject)}"
    return await handle(build_request("DELETE", path, token=token), rt.bindings())


def rows_naming(rt: LocalRuntime, name: str, needle: str) -> dict[str, int]:
    sql = rt.durable_object_storage(name).sql
    found = {}
    for table, column in (
        ("run_log", "detail_json"),
        ("failed_writes", "payload_json"),
        ("pending_writes", "payload_json"),
        ("turn_state", "state_json"),
    ):
        rows = sql.exec(f"SELECT {column} AS text FROM {table}").to_array()
        found[table] = sum(needle in str(row["text"]) for row in rows)
    return found


async def test_erase_clears_the_subject_from_every_instance_and_keeps_others(
    rt: LocalRuntime,
) -> None:
    await run_turn(rt, "sales", BOB, f"book a demo for {BOB}")
    ada_run = await run_turn(rt, "sales", ADA, f"follow up with {ADA} about pricing")
    await run_turn(rt, "support", ADA, f"answer the ticket of {ADA}")
    sales = rt.durable_object_storage("acme:assistant:sales")
    # A write that exhausted its retries and one still queued, both naming Ada; Bob's
    # queued write must survive; working state naming Ada is scrubbed, the rest kept.
    sales.sql.exec(
        "INSERT INTO failed_writes (run_id, op, payload_json, error, attempts, created_at) "
        "VALUES (?, 'append_episode', ?, 'D1Error: down', 4, 1)",
        "01J00000000000000000000001",
        json.dumps({"subject": ADA, "content": f"called {ADA}"}),
    )
    sales.sql.exec(
        "INSERT INTO pending_writes (tenant_id, run_id, op, payload_json, created_at) "
        "VALUES ('acme', ?, 'append_episode', ?, 1), ('acme', ?, 'append_episode', ?, 1)",
        "01J00000000000000000000002",
        json.dumps({"subject": ADA}),
        "01J00000000000000000000003",
        json.dumps({"subject": BOB}),
    )
    sales.sql.exec(
        "UPDATE turn_state SET state_json = ?",
        json.dumps({"contact": ADA, "stage": "demo", ADA: 1}),
    )
    assert rows_naming(rt, "acme:assistant:sales", ADA)["run_log"] > 0

    response = await erase_over_route(rt, ADA)

    assert response.status == 200, response.body
    report = json.loads(response.body)
    state = report["agent_state"]
    assert state["instances"] == 2
    assert state["failed_writes"] == 1 and state["pending_writes"] == 1
    assert state["turn_state"] == 1 and state["run_log"] >= 4
    for name in ("acme:assistant:sales", "acme:assistant:support"):
        assert rows_naming(rt, name, ADA) == {
            "run_log": 0,
            "failed_writes": 0,
            "pending_writes": 0,
            "turn_state": 0,
        }
    assert rows_naming(rt, "acme:assistant:sales", BOB)["run_log"] > 0
    assert rows_naming(rt, "acme:assistant:sales", BOB)["pending_writes"] == 1
    assert json.loads(sales.sql.exec("SELECT state_json FROM turn_state").one()["state_json"]) == {
        "stage": "demo"
    }
    # D1 lost Ada's runs too; repeating the erase finds nothing more anywhere.
    assert await EpisodicStore(rt.db, "acme").get_run(ada_run["run_id"]) is None
    again = json.loads((await erase_over_route(rt, ADA)).body)
    assert again["agent_state"] == {
        "instances": 2,
        "wiped": 0,
        "run_log": 0,
        "turn_state": 0,
        "failed_writes": 0,
        "pending_writes": 0,
    }


async def test_erased_text_is_overwritten_in_the_object_file_not_only_unlinked(
    rt: LocalRuntime,
) -> None:
    # The local object storage keeps secure_delete off, as workerd's SQLite does: a plain
    # DELETE would leave the text in free space (the outbox deletes each settled write).
    await run_turn(rt, "sales", BOB, f"book a demo for {BOB}")
    await run_turn(rt, "sales", ADA, f"follow up with {ADA} about pricing")

    response = await erase_over_route(rt, ADA)

    assert response.status == 200
    rt.evict_durable_objects()  # closes the files: the write-ahead log is checkpointed
    files = [p for p in rt.state.durable_objects.iterdir() if p.suffix == ".sqlite"]
    assert len(files) == 1 and not list(rt.state.durable_objects.glob("*-wal"))
    raw = files[0].read_bytes()
    assert ADA.encode() not in raw
    assert BOB.encode() in raw  # the file is readable as bytes: the check can fail


ZELDA, ZELDA_MAIL, PASSPORT = "Zelda Quixote", "zelda.quixote@example.net", "X99218734"


async def test_no_page_of_an_instance_keeps_the_subject_after_the_erase_and_the_rest_stays(
    rt: LocalRuntime,
) -> None:
    # Issue 47: enough turns that SQLite rebalances the run log's pages; the rows naming
    # Zelda were overwritten and deleted, but copies of them SQLite left in the pages it
    # rebuilt stayed in the file (workerd allows no secure_delete or VACUUM).
    for i in range(6):
        await run_turn(rt, "desk", BOB, f"note {i} on the quarterly plan for {BOB} " * 3)
        if i % 2 == 0:
            text = f"{ZELDA} ({ZELDA_MAIL}, passport {PASSPORT}) asked about item {i}"
            await run_turn(rt, "desk", ZELDA, text)
    name = "acme:assistant:desk"
    storage = rt.durable_object_storage(name)
    storage.sql.exec(
        "INSERT INTO failed_writes (run_id, op, payload_json, error, attempts, created_at, "
        "next_retry_at) VALUES ('01J00000000000000000000004', 'append_episode', ?, 'down', 4, "
        "1, 2)",
        json.dumps({"subject": BOB}),
    )
    storage.sql.exec("UPDATE procedural_workflows SET alpha = 7.5, pulls = 9")
    tables = ("turn_state", "run_workflows", "procedural_workflows", "failed_writes")
    before = {t: storage.sql.exec(f"SELECT * FROM {t}").to_array() for t in tables}
    log = "SELECT * FROM run_log ORDER BY seq"
    logged = storage.sql.exec(log).to_array()
    zelda_runs = {r["run_id"] for r in logged if ZELDA in r["detail_json"]}
    unrelated = [r for r in logged if r["run_id"] not in zelda_runs]
    alarm = await rt.agents.alarms.for_object(name).get_alarm()

    response = await erase_over_route(rt, ZELDA)

    assert response.status == 200, response.body
    assert json.loads(response.body)["agent_state"]["run_log"] > 0
    await rt.purge_residue()
    rt.evict_durable_objects()  # closes the files: nothing is left in a -wal
    files = [p for p in rt.state.durable_objects.iterdir() if p.is_file()]
    assert [p.suffix for p in files] == [".sqlite"]
    raw = files[0].read_bytes()
    assert [s for s in (ZELDA, ZELDA_MAIL, PASSPORT) if s.encode() in raw] == []
    assert BOB.encode() in raw  # the scan reads live data: it can fail
    # Everything else the object held is there as it was, and its alarm too.
    storage = rt.durable_object_storage(name)
    kept = {t: storage.sql.exec(f"SELECT * FROM {t}").to_array() for t in tables}
    assert kept == before
    assert storage.sql.exec(log).to_array() == unrelated and unrelated
    assert await rt.agents.alarms.for_object(name).get_alarm() == alarm is not None
    later = await run_turn(rt, "desk", BOB, "and one more turn")
    assert later["turn_count"] == before["turn_state"][0]["turn_count"] + 1


async def test_a_rebuild_that_fails_leaves_the_old_database_whole(rt: LocalRuntime) -> None:
    await run_turn(rt, "desk", ADA, f"note on {ADA}")
    storage = rt.durable_object_storage("acme:assistant:desk")
    rows = storage.sql.exec("SELECT * FROM run_log").to_array()

    def fill() -> None:
        storage.sql.exec("CREATE TABLE half (x)")
        raise RuntimeError("the isolate died")

    try:
        await storage.replace_all(fill)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failing fill was not reported")
    assert storage.sql.exec("SELECT * FROM run_log").to_array() == rows
    rt.evict_durable_objects()
    assert not list(rt.state.durable_objects.glob("*.new*"))
    again = rt.durable_object_storage("acme:assistant:desk")
    assert again.sql.exec("SELECT * FROM run_log").to_array() == rows


async def test_a_queued_write_of_an_erased_run_is_not_replayed_after_the_erase(
    rt: LocalRuntime,
) -> None:
    scope = {"tenant": "acme", "agent_type": "assistant", "instance_id": "crashy"}
    storage = rt.durable_object_storage("acme:assistant:crashy")
    first_life = AgentRuntimeCore(
        storage, dataclasses.replace(rt.bindings(), background=DiesAfterAnswering())
    )
    await first_life.initialize()
    # The isolate died after answering: Ada's run is only in the object's outbox, and
    # D1 knows the instance from an earlier run.
    await EpisodicStore(rt.db, "acme").start_run(
        run_id="01J00000000000000000000009",
        agent_type="assistant",
        instance_id="crashy",
        input={"text": "earlier"},
        started_at=1,
    )
    answered = await first_life.call("run", {**scope, "input": f"email {ADA}", "subject": ADA})
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM pending_writes").one()["n"] == 3

    # The erase starts the object again (it replays its outbox into D1 when it starts):
    # the rows that land are found and erased too.
    report = await SubjectEraser("acme", db=rt.db, clock=rt.clock, agents=rt.agents).erase(ADA)

    assert report.complete and report.runs == 1 and report.episodes == 1
    rt.evict_durable_objects()
    storage = rt.durable_object_storage("acme:assistant:crashy")
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM pending_writes").one()["n"] == 0
    second_life = AgentRuntimeCore(storage, rt.bindings())
    await second_life.initialize()  # replays whatever the outbox still holds
    await rt.background.drain()
    assert await EpisodicStore(rt.db, "acme").get_run(answered["run_id"]) is None
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 0


class RefusingNamespace:
    def __init__(self) -> None:
        self.called: list[str] = []

    def get_by_name(self, name: str) -> Any:
        namespace = self

        class Stub:
            async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
                namespace.called.append(name)
                return {"error": {"status": 503, "code": "writes_in_flight", "message": "busy"}}

        return Stub()


async def test_an_instance_that_cannot_erase_stops_the_erase_before_d1_rows_go(
    rt: LocalRuntime,
) -> None:
    await run_turn(rt, "sales", ADA, f"follow up with {ADA}")
    episodes = await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes")
    refusing = RefusingNamespace()
    bindings = dataclasses.replace(rt.bindings(), agents=refusing)
    token = mint_token(rt.state.access, "dpo@example.com", now=rt.clock.now())

    response = await handle(
        build_request("DELETE", f"/admin/tenants/acme/subjects/{quote(ADA)}", token=token),
        bindings,
    )

    assert response.status == 502
    error = json.loads(response.body)["error"]
    assert error["code"] == "erase_incomplete"
    assert "writes_in_flight" in error["details"]["errors"][0]
    assert refusing.called == ["acme:assistant:sales"]
    # Nothing in D1 was deleted, so a repeat finds the instance and every row again.
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == episodes
    assert (await erase_over_route(rt, ADA)).status == 200
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 0


async def test_an_instance_whose_runs_were_pruned_before_it_reported_is_still_reached(
    rt: LocalRuntime,
) -> None:
    # The instance never reported from its alarm (no agent_instances row), and the prune
    # takes every agent_runs row that named it: the prune registers it as it deletes them.
    await run_turn(rt, "archive", ADA, f"note the address of {ADA}")
    instances = "SELECT COUNT(*) AS n FROM agent_instances"
    assert await count(rt.db, instances) == 0
    later = int(rt.clock.now() * 1000) + 100 * 86_400_000
    report = await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("p", later)
    assert report.complete
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM agent_runs") == 0
    assert await count(rt.db, instances) == 1
    assert rows_naming(rt, "acme:assistant:archive", ADA)["run_log"] > 0

    response = await erase_over_route(rt, ADA)

    assert response.status == 200, response.body
    assert json.loads(response.body)["agent_state"]["instances"] == 1
    assert rows_naming(rt, "acme:assistant:archive", ADA)["run_log"] == 0


async def no_sleep(_: float) -> None:
    return None


async def test_a_failed_write_naming_a_subject_with_accents_is_erased(rt: LocalRuntime) -> None:
    # D1 refused the run's writes, so they wait in failed_writes for the alarm's retry and D1
    # names no run to erase: the erase must find the subject in the payload itself (an
    # escaped "\u00eb" would hide it, and the retry would bring the subject back to D1).
    zoe = "contact:zoë-brontë"
    scope = {"tenant": "acme", "agent_type": "assistant", "instance_id": "offline"}
    storage = rt.durable_object_storage("acme:assistant:offline")
    flaky = FlakyD1(rt.db, target="INSERT INTO agent_runs", failures=-1)
    core = AgentRuntimeCore(
        storage, dataclasses.replace(rt.bindings(), db=flaky), retry_sleep=no_sleep
    )
    await core.initialize()
    await core.call("run", {**scope, "input": f"email {zoe}", "subject": zoe})
    await rt.background.drain()
    failed = "SELECT COUNT(*) AS n FROM failed_writes"
    assert storage.sql.exec(failed).one()["n"] == 2  # start_run and complete_run

    erased = await core.call("erase_subject", {**scope, "subject": zoe})

    assert erased["erased"]["failed_writes"] == 2
    assert storage.sql.exec(failed).one()["n"] == 0
