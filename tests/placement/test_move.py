"""Moving a tenant between databases online (issue 29): copy in bounded steps, fence, verify,
switch, wait, delete — with writes racing it and a crash at any step, nothing is lost or
duplicated."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from agent_memory.directory import (
    TenantTable,
    homes,
    on_shard,
    shard_db,
    shard_named,
    tenant_tables,
)
from agent_memory.lifecycle import move as move_module
from agent_memory.lifecycle.move import (
    GRACE_SECONDS,
    LEASE_MARGIN_SECONDS,
    MoveBudget,
    MoveStatus,
    advance,
    cancel_move,
    move_status,
    start_move,
)
from agent_memory.memory import Memory
from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Error, met_fence
from http_messages import ApiError
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.runtime import LocalRuntime
from tests.memory_api.conftest import Client
from worker.cron import DAILY_BRIEF, MOVE_STEPS, run_scheduled
from worker.lifecycle_jobs import advance_moves

T = "mover"
BASE_SKIPPED = {"semantic_terms", "semantic_term_stats", "semantic_index_stats"}


async def source_fence(bindings: Bindings, tenant: str, shard: str) -> str | None:
    """The fence `tenant` has on shard `shard`."""
    sql = "SELECT state FROM tenant_fences WHERE tenant_id = ?"
    return (
        await shard_db(shard_named(bindings, shard)).prepare(sql).bind(tenant).first_value("state")
    )


async def _seed(client: Client, tenant: str, count: int) -> str:
    token = await client.mint(tenant, "agent")
    for n in range(count):
        for tier in ("semantic", "episodic"):
            value = f"{tier} note {n} about the lantern festival number {n}"
            written = await client.write(token, "agent", tier=tier, key=f"k{n}", value=value)
            assert written.status == 201, written.json()
    await client.write(token, "agent", tier="working", key="page", value={"n": count})
    answer = await client.send(
        "PUT",
        f"/admin/tenants/{tenant}/lifecycle",
        {"episode_retention_days": 30},
        access=client.operator,
    )
    assert answer.status == 200, answer.json()
    return token


async def _rows(runtime: LocalRuntime, shard: str, tenant: str) -> dict[str, list[Any]]:
    """Every row of the tenant on `shard`, by table, without rowids (they differ per
    database)."""
    db = runtime.shard_db(shard)
    out: dict[str, list[Any]] = {}
    for table in await tenant_tables(db, shard):
        if table.name in BASE_SKIPPED:
            continue
        cols = [c for c in table.columns if c != "fts_rowid"]
        sql = f'SELECT {", ".join(cols)} FROM "{table.name}" WHERE tenant_id = ?'
        rows = (await db.prepare(sql).bind(tenant).all()).results
        out[table.name] = sorted(rows, key=lambda r: repr(sorted(r.items())))
    return out


def _vector_ids(runtime: LocalRuntime, shard: str) -> set[str]:
    return set(runtime.shard_vectors(shard)._records)


async def _drive(
    runtime: LocalRuntime,
    clock: FixedClock,
    tenant: str,
    budget: MoveBudget,
    between: Callable[[MoveStatus], Awaitable[None]] | None = None,
) -> MoveStatus:
    """Advance the move step by step (the grace period passing on the clock) until done."""
    for _ in range(2000):
        status = await advance(runtime.bindings(), tenant, budget)
        if between is not None:
            await between(status)
        if status.phase == "done":
            return status
        if status.phase == "switched":
            clock.advance(GRACE_SECONDS + 1)
    raise AssertionError("the move did not finish")


async def test_a_moved_tenant_keeps_every_memory_and_leaves_nothing_behind(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    token = await _seed(client, T, 12)
    before = await _rows(runtime, "primary", T)
    vectors = _vector_ids(runtime, "primary")
    assert len(before["semantic_facts"]) == 12 and len(vectors) == 12

    await start_move(runtime.bindings(), T, "s2")
    done = await _drive(runtime, clock, T, MoveBudget(max_calls=6))

    verified = done.progress["verified"]
    assert verified["semantic_facts"]["source_rows"] == 12
    assert all(t["source_sha256"] == t["target_sha256"] for t in verified.values())
    assert await homes(runtime.bindings()) == {T: "s2"}
    assert await _rows(runtime, "s2", T) == before
    assert all(rows == [] for rows in (await _rows(runtime, "primary", T)).values())
    assert _vector_ids(runtime, "s2") == vectors and _vector_ids(runtime, "primary") == set()
    assert await source_fence(runtime.bindings(), T, "primary") == "moved"
    # Recall on the new database: vectors and the keyword index (rebuilt by its triggers).
    found = (await client.read(token, "agent", tier="semantic", query="lantern 7")).json()
    assert "number 7" in found["items"][0]["value"]
    terms = (
        await runtime.shard_db("s2")
        .prepare(
            "SELECT COUNT(*) AS n FROM semantic_terms WHERE tenant_id = "
            "(SELECT code FROM keyword_tenants WHERE tenant_id = ?)"
        )
        .bind(T)
        .first_value("n")
    )
    assert terms and terms > 12


@pytest.fixture(params=["full", "replay"])
def fenced_check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the fenced step checks the copy: a full read of the tenant (the small tenants of
    these tests), or the replay of the change log and row counts (as for a large tenant)."""
    if request.param == "replay":
        monkeypatch.setattr(move_module, "FULL_VERIFY_ROWS", -1)
    return str(request.param)


async def test_writes_racing_the_move_are_neither_lost_nor_duplicated(
    client: Client, runtime: LocalRuntime, clock: FixedClock, fenced_check: str
) -> None:
    token = await _seed(client, T, 5)
    acknowledged: list[str] = []
    refused_while_fenced = 0
    counter = iter(range(10_000))

    async def write_during(status: MoveStatus) -> None:
        """A client writing between every step of the move, retrying a 503 later."""
        nonlocal refused_while_fenced
        n = next(counter)
        for tier in ("semantic", "episodic"):
            value = f"racing {tier} write {n}"
            answer = await client.write(token, "agent", tier=tier, key=f"race{n}", value=value)
            if answer.status == 503:
                assert answer.json()["error"]["code"] == "tenant_moving"
                assert answer.headers.get("retry-after") == "5"
                refused_while_fenced += 1
                continue
            assert answer.status == 201, answer.json()
            acknowledged.append(value)

    await start_move(runtime.bindings(), T, "s2")
    done = await _drive(runtime, clock, T, MoveBudget(max_calls=4), between=write_during)
    assert ("replayed" in done.progress) == (fenced_check == "replay")
    if fenced_check == "replay":  # checked row by row after the switch, racing writes aside
        assert done.progress["check"]["done"] and not done.progress["check"].get("differs")

    assert refused_while_fenced > 0  # the fenced pass did refuse writes...
    assert len(acknowledged) > 20  # ...and writes went on before and after it
    for shard, expected in (("s2", 1), ("primary", 0)):
        db = runtime.shard_db(shard)
        for value in acknowledged:
            table = "semantic_facts" if value.startswith("racing semantic") else "memory_episodes"
            sql = f"SELECT COUNT(*) AS n FROM {table} WHERE tenant_id = ? AND content = ?"
            n = await db.prepare(sql).bind(T, value).first_value("n")
            assert n == expected, (shard, value, n)


async def test_a_write_that_still_believes_the_old_home_is_refused_not_lost(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    await _seed(client, T, 2)
    stale = Memory(on_shard(runtime.bindings(), "primary"), T)  # an isolate's old answer
    await start_move(runtime.bindings(), T, "s2")

    async def stale_write(status: MoveStatus) -> None:
        if status.phase in ("switched", "deleting", "done"):
            with pytest.raises(D1Error) as refused:
                await stale.semantic().learn({"content": f"stale write in {status.phase}"})
            assert met_fence(refused.value)

    await _drive(runtime, clock, T, MoveBudget(max_calls=50), between=stale_write)
    for shard in ("primary", "s2"):
        rows = (
            await runtime.shard_db(shard)
            .prepare("SELECT COUNT(*) AS n FROM semantic_facts WHERE content LIKE 'stale write%'")
            .first_value("n")
        )
        assert rows == 0


class Crash(Exception):
    pass


def _crashing(runtime: LocalRuntime) -> dict[str, int]:
    """Counts every D1 call of the runtime's databases (`n`) and raises `Crash` at the call
    numbered `crash_at` (-1: never)."""
    calls = {"n": 0, "crash_at": -1}
    for shard in runtime.shards:
        db = runtime.shard_db(shard.name)
        run = db._execute

        def crashing(statements: Any, run: Any = run, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == calls["crash_at"]:
                raise Crash(f"crash at D1 call {calls['n']}")
            return run(statements, **kwargs)

        db._execute = crashing  # type: ignore[method-assign]
    return calls


async def test_a_crash_at_any_step_resumes_to_the_same_result(
    client: Client,
    runtime: LocalRuntime,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
    fenced_check: str,
) -> None:
    monkeypatch.setattr(move_module, "CHUNK_ROWS", 3)
    await _seed(client, T, 7)
    original = await _rows(runtime, "primary", T)
    vectors = _vector_ids(runtime, "primary")
    calls = _crashing(runtime)

    here, there = "primary", "s2"
    crashes = 0
    for crash_at in range(1, 400, 7):  # a crash at a different step of each move
        calls["n"], calls["crash_at"] = 0, crash_at
        try:
            await start_move(runtime.bindings(), T, there)
            await _drive(runtime, clock, T, MoveBudget(max_calls=10))
            finished_without_crash = True
        except Crash:
            crashes += 1
            finished_without_crash = False
            calls["crash_at"] = -1
            # A crash can leave the advance's lease behind (the release was the crashed
            # call): the resume waits it out, as the next cron or operator would.
            clock.advance(MoveBudget().max_seconds + LEASE_MARGIN_SECONDS)
            found = await move_status(runtime.bindings(), T)
            if found is None or found.target != there:  # it crashed before the move began
                await start_move(runtime.bindings(), T, there)
            await _drive(runtime, clock, T, MoveBudget(max_calls=10))  # the resume
        calls["crash_at"] = -1
        assert await homes(runtime.bindings()) == {T: there}, crash_at
        assert await _rows(runtime, there, T) == original, crash_at
        assert all(r == [] for r in (await _rows(runtime, here, T)).values()), crash_at
        assert _vector_ids(runtime, there) == vectors, crash_at
        here, there = there, here
        if finished_without_crash:
            break  # past the last D1 call of a move: every step has been crashed at
    assert crashes >= 10


async def test_the_fenced_step_replays_what_changed_and_a_crash_in_it_loses_nothing(
    client: Client, runtime: LocalRuntime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large tenant's fenced step copies only the rows written during the copy (logged by
    triggers on the source) and compares row counts, instead of reading the whole tenant on
    both sides while its writes are refused; a crash anywhere in it replays again."""
    monkeypatch.setattr(move_module, "FULL_VERIFY_ROWS", -1)
    monkeypatch.setattr(move_module, "CHUNK_ROWS", 3)
    monkeypatch.setattr(move_module, "CATCH_UP_ROWS", 0)  # three passes, each forgetting
    token = await _seed(client, T, 6)
    await start_move(runtime.bindings(), T, "s2")
    written = 0
    while (await advance(runtime.bindings(), T, MoveBudget(max_calls=4))).phase == "copying":
        for tier in ("semantic", "episodic"):  # racing writes: logged, some after their chunk
            answer = await client.write(token, "agent", tier=tier, key=f"w{written}", value="x")
            assert answer.status == 201, answer.json()
        written += 1
    # The writes of the last pass wait in the log; those before it were copied by it.
    ever = "SELECT MAX(n) AS n FROM tenant_move_changes"
    last = await runtime.shard_db("primary").prepare(ever).first_value("n")
    assert 0 < await _logged(runtime) < int(last)
    calls = _crashing(runtime)
    crashes = 0
    for attempt in range(200):
        # Every other step crashes, at a later call each time (the lease, the log, the copy).
        calls["crash_at"] = calls["n"] + 1 + attempt // 2 % 12 if attempt % 2 == 0 else -1
        try:
            status = await advance(runtime.bindings(), T, MoveBudget(max_calls=4))
        except Crash:
            crashes += 1
            clock.advance(MoveBudget().max_seconds + LEASE_MARGIN_SECONDS)
            continue
        if status.phase != "fenced":
            break
    calls["crash_at"] = -1
    assert crashes >= 3
    assert status.phase == "switched", status
    assert status.progress["replayed"] >= 1, status
    if "resumed" not in status.progress:  # (a crash inside the switch skips its record)
        counts = status.progress["verified"].values()
        assert all(c["source_rows"] == c["target_rows"] for c in counts)
    assert await _rows(runtime, "s2", T) == await _rows(runtime, "primary", T)
    assert await _logged(runtime) == 0  # the source stopped logging at the switch


async def test_a_crash_inside_the_switch_never_copies_the_source_over_new_writes(
    client: Client, runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch, fenced_check: str
) -> None:
    """The switch names the target in the directory, then lifts the target's fence and saves
    the phase. A crash between leaves the phase `fenced` while the tenant already writes to
    the target; the next step must finish the switch, not run a pass that copies the frozen
    source over those writes (before this check a full pass did: the write was lost)."""
    token = await _seed(client, T, 3)
    await start_move(runtime.bindings(), T, "s2")
    while (await advance(runtime.bindings(), T, MoveBudget(max_calls=400))).phase == "copying":
        pass
    original = move_module.clear_fence

    async def crash(*args: Any) -> None:
        raise Crash("crash after the directory named the target")

    monkeypatch.setattr(move_module, "clear_fence", crash)
    with pytest.raises(Crash):
        await advance(runtime.bindings(), T, MoveBudget(max_calls=400))
    monkeypatch.setattr(move_module, "clear_fence", original)
    crashed = await move_status(runtime.bindings(), T)
    assert crashed is not None and crashed.phase == "fenced"
    answer = await client.write(token, "agent", tier="semantic", key="new", value="after the crash")
    assert answer.status == 201, answer.json()  # on the target: the directory names it
    runtime.clock.advance(MoveBudget().max_seconds + LEASE_MARGIN_SECONDS)  # type: ignore[attr-defined]
    status = await advance(runtime.bindings(), T, MoveBudget(max_calls=400))
    assert status.phase in ("switched", "deleting", "done"), status
    sql = "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = ? AND content = ?"
    kept = runtime.shard_db("s2").prepare(sql).bind(T, "after the crash")
    assert await kept.first_value("n") == 1


async def test_a_replayed_move_keeps_its_source_when_a_row_differs_after_the_switch(
    client: Client, runtime: LocalRuntime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row counts cannot see a row whose content the copy got wrong: after a replayed switch
    every row the tenant has not written on the target since is compared with the frozen
    source before the source is deleted. A difference stops the move there, source kept."""
    monkeypatch.setattr(move_module, "FULL_VERIFY_ROWS", -1)
    token = await _seed(client, T, 3)
    await start_move(runtime.bindings(), T, "s2")
    while (await advance(runtime.bindings(), T, MoveBudget(max_calls=400))).phase == "copying":
        pass
    # A copy bug, planted: one target row no longer equals its source (no log sees it).
    sql = "UPDATE memory_episodes SET content = 'garbled' WHERE tenant_id = ? AND rowid = ("
    sql += "SELECT MIN(rowid) FROM memory_episodes WHERE tenant_id = ?)"
    await runtime.shard_db("s2").prepare(sql).bind(T, T).run()
    status = await advance(runtime.bindings(), T, MoveBudget(max_calls=400))
    assert status.phase == "switched" and status.progress["replayed"] == 0
    # A write on the target after the switch is the tenant's, not a difference.
    answer = await client.write(token, "agent", tier="episodic", key="later", value="after")
    assert answer.status == 201, answer.json()
    clock.advance(GRACE_SECONDS + 1)
    for _ in range(5):
        status = await advance(runtime.bindings(), T, MoveBudget(max_calls=400))
    assert status.phase == "switched", status
    assert status.progress["check"]["differs"] == ["memory_episodes"]
    assert status.error is not None and "source is kept" in status.error
    assert await advance_moves(runtime.bindings()) == []  # the cron leaves it to an operator
    brief = (await run_scheduled(DAILY_BRIEF, clock.now(), runtime.bindings()))["result"]
    assert any("source is kept" in w for w in brief["brief"]["warnings"])  # and says so daily
    source = await _rows(runtime, "primary", T)
    assert len(source["memory_episodes"]) == 3  # nothing of the source was deleted

    # Checked again as it is, the row still differs; repaired from the frozen source (a write
    # on the target, so the check leaves it out like any of the tenant's), the move goes on.
    still = await client.send("POST", "/admin/moves/recheck", {"tenant": T}, access=client.operator)
    assert still.status == 200 and "source is kept" in still.json()["error"], still.json()
    repair = "UPDATE memory_episodes SET content = ? WHERE tenant_id = ? AND content = 'garbled'"
    [episode] = [
        r
        for r in source["memory_episodes"]
        if r["content"]
        not in ({r2["content"] for r2 in (await _rows(runtime, "s2", T))["memory_episodes"]})
    ]
    await runtime.shard_db("s2").prepare(repair).bind(episode["content"], T).run()
    answer = await client.send(
        "POST", "/admin/moves/recheck", {"tenant": T}, access=client.operator
    )
    assert answer.status == 200, answer.json()
    assert (await _drive(runtime, clock, T, MoveBudget(max_calls=400))).phase == "done"
    assert all(rows == [] for rows in (await _rows(runtime, "primary", T)).values())
    again = await client.send("POST", "/admin/moves/recheck", {"tenant": T}, access=client.operator)
    assert (again.status, again.json()["error"]["code"]) == (409, "nothing_to_recheck")


async def test_a_check_reads_the_change_log_of_its_own_chunk_not_the_whole_table(
    client: Client, runtime: LocalRuntime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a replayed switch the tenant keeps writing on the target while the check runs
    (or waits for an operator); each chunk of the check reads only the log entries in its
    own key range, so every entry is read once, and the check still leaves them all out."""
    monkeypatch.setattr(move_module, "FULL_VERIFY_ROWS", -1)
    monkeypatch.setattr(move_module, "CHUNK_ROWS", 2)
    token = await _seed(client, T, 6)
    await start_move(runtime.bindings(), T, "s2")
    while (status := await advance(runtime.bindings(), T, MoveBudget(max_calls=6))).phase != (
        "switched"
    ):
        pass
    assert not status.progress.get("check", {}).get("done")
    for n in range(8):  # the tenant's writes on its new home, logged there
        answer = await client.write(token, "agent", tier="episodic", key=f"new{n}", value=f"v{n}")
        assert answer.status == 201, answer.json()
    logged = (
        await runtime.shard_db("s2")
        .prepare("SELECT COUNT(*) AS n FROM tenant_move_changes WHERE tenant_id = ? AND tbl = ?")
        .bind(T, "memory_episodes")
        .first_value("n")
    )
    assert logged is not None and logged >= 8

    read: list[int] = []  # entries each of the check's log reads returned
    run = SqliteD1._execute

    def counting(db: SqliteD1, statements: Any, **kwargs: Any) -> Any:
        results = run(db, statements, **kwargs)
        for statement, result in zip(statements, results, strict=True):
            log_read = statement.sql.startswith("SELECT key FROM tenant_move_changes")
            if log_read and statement.params[1] == "memory_episodes":
                read.append(len(result.results))
        return results

    monkeypatch.setattr(SqliteD1, "_execute", counting)
    clock.advance(GRACE_SECONDS + 1)
    done = await _drive(runtime, clock, T, MoveBudget(max_calls=6))
    assert done.progress["check"]["done"] and not done.progress["check"].get("differs")
    assert len(read) > 3  # the episodes were checked in several chunks...
    assert sum(read) <= logged  # ...each reading its own entries (each entry at most once)
    assert all(rows == [] for rows in (await _rows(runtime, "primary", T)).values())


async def _logged(runtime: LocalRuntime) -> int:
    sql = "SELECT COUNT(*) AS n FROM tenant_move_changes WHERE tenant_id = ?"
    return int(await runtime.shard_db("primary").prepare(sql).bind(T).first_value("n"))


async def test_a_change_the_log_missed_is_caught_by_the_counts_and_verified_in_full(
    client: Client, runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(move_module, "FULL_VERIFY_ROWS", -1)
    await _seed(client, T, 3)
    await start_move(runtime.bindings(), T, "s2")
    while (await advance(runtime.bindings(), T, MoveBudget(max_calls=4))).phase == "copying":
        pass
    # A row the triggers never saw (as if written by something the log does not cover).
    db = runtime.shard_db("primary")
    await db.prepare("DELETE FROM tenant_move_tracking WHERE tenant_id = ?").bind(T).run()
    await (
        Memory(on_shard(runtime.bindings(), "primary"), T)
        .semantic()
        .learn({"content": "written past the log"})
    )
    status = await advance(runtime.bindings(), T, MoveBudget(max_calls=400))
    assert status.phase == "switched", status
    assert "replayed" not in status.progress  # the counts differed: every row was compared
    verified = status.progress["verified"].values()
    assert all(t["source_sha256"] == t["target_sha256"] for t in verified)
    sql = "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = ? AND content = ?"
    found = runtime.shard_db("s2").prepare(sql).bind(T, "written past the log")
    assert await found.first_value("n") == 1


async def test_an_operator_starts_watches_and_resumes_a_move_over_http(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    await _seed(client, T, 3)
    admin = client.operator
    refusals = [
        ({"tenant": T, "to": "nowhere"}, 422, "unknown_shard"),
        ({"tenant": T, "to": "primary"}, 422, "already_there"),
        ({"tenant": T}, 422, "validation_error"),
    ]
    for body, status, code in refusals:
        answer = await client.send("POST", "/admin/moves", body, access=admin)
        assert (answer.status, answer.json()["error"]["code"]) == (status, code), body
    started = await client.send("POST", "/admin/moves", {"tenant": T, "to": "s2"}, access=admin)
    assert started.status == 202, started.json()
    again = await client.send("POST", "/admin/moves", {"tenant": T, "to": "s2"}, access=admin)
    assert (again.status, again.json()["error"]["code"]) == (409, "move_in_progress")
    listed = (await client.send("GET", "/admin/moves", access=admin)).json()["moves"]
    assert [(m["tenant_id"], m["source"], m["target"]) for m in listed] == [(T, "primary", "s2")]
    phases = []
    for _ in range(50):
        step = await client.send("POST", "/admin/moves/advance", {"tenant": T}, access=admin)
        assert step.status == 200, step.json()
        phases.append(step.json()["phase"])
        if phases[-1] == "switched":
            clock.advance(GRACE_SECONDS + 1)
        if phases[-1] == "done":
            break
    assert phases[-1] == "done" and "switched" in phases
    missing = await client.send("POST", "/admin/moves/advance", {"tenant": "ghost"}, access=admin)
    assert (missing.status, missing.json()["error"]["code"]) == (404, "no_move")


async def test_a_fenced_pass_that_keeps_changing_stops_then_resumes_and_clears_its_error(
    client: Client, runtime: LocalRuntime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(move_module, "MAX_FENCED_PASSES", 1)
    await _seed(client, T, 3)
    await start_move(runtime.bindings(), T, "s2")
    errors: list[str | None] = []

    async def vector_not_yet_visible(status: MoveStatus) -> None:
        errors.append(status.error)
        if status.phase == "fenced" and len(errors) < 40 and not any(errors):
            # As if the target index had not yet processed an upsert: the pass must copy it.
            target = runtime.shard_vectors("s2")
            await target.delete_by_ids(list(target._records)[:1])

    done = await _drive(runtime, clock, T, MoveBudget(max_calls=3), between=vector_not_yet_visible)
    assert any(errors)  # it stopped once with the reason...
    assert done.error is None  # ...and the finished move no longer reports it
    assert len(_vector_ids(runtime, "s2")) == 3  # the deleted vector was copied again


async def test_two_advances_at_once_never_undo_a_switch_or_lose_a_write(
    client: Client, runtime: LocalRuntime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cron and an operator's watch advancing the same move at once: one of them holds
    the move's lease and carries it; the other is refused (409 `move_busy`) while it lasts,
    so a pass that began before the switch never copies the frozen source over writes that
    landed on the target after it."""
    token = await _seed(client, T, 4)
    await start_move(runtime.bindings(), T, "s2")
    while (await advance(runtime.bindings(), T, MoveBudget(max_calls=2))).phase != "fenced":
        pass
    # The first advance stops in its first step until the second has had its go.
    original = move_module._sync_step
    gate, paused, armed = asyncio.Event(), asyncio.Event(), [True]

    async def held(*args: Any, **kwargs: Any) -> Any:
        if armed.pop() if armed else False:
            paused.set()
            await gate.wait()
        return await original(*args, **kwargs)

    monkeypatch.setattr(move_module, "_sync_step", held)
    first = asyncio.ensure_future(advance(runtime.bindings(), T, MoveBudget(max_calls=400)))
    await paused.wait()
    with pytest.raises(ApiError) as busy:  # the cron, meanwhile
        await advance(runtime.bindings(), T, MoveBudget(max_calls=400))
    assert (busy.value.status, busy.value.code) == (409, "move_busy")
    answer = await client.send(
        "POST", "/admin/moves/advance", {"tenant": T}, access=client.operator
    )
    assert (answer.status, answer.json()["error"]["code"]) == (409, "move_busy")
    listed = (await client.send("GET", "/admin/moves", access=client.operator)).json()["moves"]
    assert listed[0]["lease_until"] is not None  # the operator sees the move is being carried
    cron = await advance_moves(runtime.bindings())
    assert cron == [{"tenant_id": T, "phase": "fenced", "busy": True}]
    gate.set()
    assert (await first).phase == "switched"
    written = await client.write(token, "agent", tier="semantic", key="b", value="after")
    assert written.status == 201, written.json()
    assert (await _drive(runtime, clock, T, MoveBudget(max_calls=50))).phase == "done"
    sql = "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = ? AND content = 'after'"
    assert await runtime.shard_db("s2").prepare(sql).bind(T).first_value("n") == 1


@pytest.mark.parametrize("calls", [20, 40, 60, 120])
async def test_an_unwatched_move_never_leaves_its_tenant_frozen_between_steps_it_did_not_need(
    client: Client, runtime: LocalRuntime, calls: int
) -> None:
    """The cron steps a move once a minute. The step that finishes the copy must not also
    fence the tenant: with what is left of its budget the verifying pass may not finish, and
    the tenant's writes would be refused until the next step. The next step fences first,
    with its whole budget, so a pass that fits in a step freezes the tenant for that step."""
    await _seed(client, T, 4)
    await start_move(runtime.bindings(), T, "s2")
    ends: list[tuple[str, str | None]] = []
    while not ends or ends[-1][0] != "switched":
        [stepped] = await advance_moves(runtime.bindings(), MoveBudget(max_calls=calls))
        ends.append((stepped["phase"], await source_fence(runtime.bindings(), T, "primary")))
        assert len(ends) < 50, ends
    for before, after in zip([("copying", None), *ends], ends, strict=False):
        if before[0] == "copying" and after[0] == "fenced":
            assert after[1] is None, ends  # entered at a step's end, fenced by the next one
    if calls >= 120:  # the verifying pass fits in one step: frozen during that step only
        assert ends == [("fenced", None), ("switched", "frozen")]


async def test_the_minute_cron_carries_a_move_to_its_end_fenced_moves_first(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    bindings = runtime.bindings()
    assert (await run_scheduled(MOVE_STEPS, clock.now(), bindings))["result"] == {
        "ran": True,
        "moves": [],
    }
    await _seed(client, T, 2)
    await _seed(client, "waiter", 2)
    await start_move(bindings, "waiter", "s2")
    await start_move(bindings, T, "s2")
    # T is fenced (its writes wait on it): it goes first although "waiter" waited longer.
    while (await advance(bindings, T, MoveBudget(max_calls=6))).phase != "fenced":
        pass
    await advance(bindings, T, MoveBudget(max_calls=6))
    assert await source_fence(bindings, T, "primary") == "frozen"
    first = (await run_scheduled(MOVE_STEPS, clock.now(), bindings))["result"]["moves"]
    assert [m["tenant_id"] for m in first] == [T]
    for _ in range(20):
        stepped = (await run_scheduled(MOVE_STEPS, clock.now(), bindings))["result"]["moves"]
        clock.advance(GRACE_SECONDS + 1)
        if not stepped:
            break
    statuses = {t: await move_status(bindings, t) for t in (T, "waiter")}
    assert {t: s.phase if s else None for t, s in statuses.items()} == {
        T: "done",
        "waiter": "done",
    }
    assert await source_fence(bindings, "waiter", "primary") == "moved"


async def test_a_step_spends_what_move_step_calls_allows(
    client: Client, runtime: LocalRuntime
) -> None:
    """An invocation's D1 queries are capped (1,000 paid, 50 free): the operator sets a step's
    metered calls (`MOVE_STEP_CALLS`); the D1 queries a step makes stay within about 1.5 times
    that, with the lease, fences and log set-up on top."""
    await _seed(client, T, 8)
    await start_move(runtime.bindings(), T, "s2")
    settings = runtime.settings.model_copy(update={"move_step_calls": 12})
    bindings = replace(runtime.bindings(), settings=settings)
    calls = _crashing(runtime)
    most, steps = 0, 0
    while True:
        before = calls["n"]
        [stepped] = await advance_moves(bindings)
        most, steps = max(most, calls["n"] - before), steps + 1
        if stepped["phase"] == "switched":
            break
    assert most <= 12 * 1.5 + 12
    assert steps > 3  # the default budget (400) does this tenant in two


async def test_the_lease_of_an_advance_that_died_ends_on_its_own(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    await _seed(client, T, 2)
    await start_move(runtime.bindings(), T, "s2")
    budget = MoveBudget(max_calls=3)
    until = int((clock.now() + budget.max_seconds + LEASE_MARGIN_SECONDS) * 1000)
    # An isolate took the lease and was evicted before it gave it back.
    sql = "UPDATE tenant_moves SET lease_owner = 'gone', lease_until = ? WHERE tenant_id = ?"
    await runtime.shard_db("primary").prepare(sql).bind(until, T).run()
    with pytest.raises(ApiError) as busy:
        await advance(runtime.bindings(), T, budget)
    assert busy.value.code == "move_busy" and str(until) in busy.value.message
    clock.advance(budget.max_seconds + LEASE_MARGIN_SECONDS)
    assert (await _drive(runtime, clock, T, budget)).phase == "done"


async def test_a_cancelled_move_leaves_the_tenant_whole_where_it_was(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    """Cancelled while fenced: the source takes writes again from the first step,
    the target's copy goes (rows, postings, vectors) in bounded steps with writes racing
    them, and a new move can start afterwards and finish."""
    token = await _seed(client, T, 6)
    original = await _rows(runtime, "primary", T)
    vectors = _vector_ids(runtime, "primary")
    admin = client.operator
    await start_move(runtime.bindings(), T, "s2")
    while (await advance(runtime.bindings(), T, MoveBudget(max_calls=8))).phase != "fenced":
        pass
    await advance(runtime.bindings(), T, MoveBudget(max_calls=8))  # the target holds a copy
    assert (await _rows(runtime, "s2", T))["semantic_facts"]
    refused = await client.write(token, "agent", tier="semantic", key="x", value="fenced")
    assert refused.status == 503  # the fenced pass refuses writes...

    cancelled = await cancel_move(runtime.bindings(), T, MoveBudget(max_calls=3))
    assert cancelled.phase == "cancelling"
    written: list[str] = []
    n = 0
    while (status := await advance(runtime.bindings(), T, MoveBudget(max_calls=3))).phase != (
        "cancelled"
    ):
        n += 1  # ...and from the cancel on, every write lands on the source
        answer = await client.write(token, "agent", tier="semantic", key=f"c{n}", value=f"c{n}")
        assert answer.status == 201, answer.json()
        written.append(f"c{n}")
    assert written and status.finished_at is not None
    assert await homes(runtime.bindings()) == {T: "primary"}
    kept = await _rows(runtime, "primary", T)
    contents = {r["content"] for r in kept["semantic_facts"]}
    assert set(written) <= contents
    assert {k: v for k, v in kept.items() if k != "semantic_facts" and k != "memory_events"} == {
        k: v for k, v in original.items() if k != "semantic_facts" and k != "memory_events"
    }
    assert all(rows == [] for rows in (await _rows(runtime, "s2", T)).values())
    for table in BASE_SKIPPED:  # the target's keyword postings and counters went too
        sql = f'SELECT COUNT(*) AS n FROM "{table}" WHERE tenant_id = ? OR tenant_id = ?'
        assert await runtime.shard_db("s2").prepare(sql).bind(T, "A").first_value("n") == 0
    assert not _vector_ids(runtime, "s2") and vectors <= _vector_ids(runtime, "primary")
    assert await source_fence(runtime.bindings(), T, "s2") == "moved"
    assert await source_fence(runtime.bindings(), T, "primary") is None
    again = await client.send("POST", "/admin/moves/cancel", {"tenant": T}, access=admin)
    assert (again.status, again.json()["phase"]) == (200, "cancelled")  # idempotent

    await start_move(runtime.bindings(), T, "s2")  # a cancelled move can be started again
    assert (await _drive(runtime, clock, T, MoveBudget(max_calls=50))).phase == "done"
    moved = {r["content"] for r in (await _rows(runtime, "s2", T))["semantic_facts"]}
    assert moved == contents


async def test_a_move_cannot_be_cancelled_once_the_tenant_lives_on_its_target(
    client: Client, runtime: LocalRuntime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither after the switch nor after a crash inside it: the directory already named the
    target, whose writes a cancel would delete."""
    token = await _seed(client, T, 2)
    await start_move(runtime.bindings(), T, "s2")
    original = move_module.clear_fence

    async def crash_in_the_switch(db: Any, tenant: str) -> None:
        raise Crash("after the directory's write, before the move's save")

    monkeypatch.setattr(move_module, "clear_fence", crash_in_the_switch)
    with pytest.raises(Crash):
        while True:
            await advance(runtime.bindings(), T, MoveBudget(max_calls=50))
    monkeypatch.setattr(move_module, "clear_fence", original)
    clock.advance(MoveBudget().max_seconds + LEASE_MARGIN_SECONDS)  # the crashed lease ends
    assert (await move_status(runtime.bindings(), T)).phase == "fenced"  # type: ignore[union-attr]
    assert await homes(runtime.bindings()) == {T: "s2"}
    with pytest.raises(ApiError) as refused:
        await cancel_move(runtime.bindings(), T)
    assert (refused.value.status, refused.value.code) == (409, "move_switched")
    assert (await advance(runtime.bindings(), T)).phase == "switched"  # the switch completes
    written = await client.write(token, "agent", tier="semantic", key="n", value="on the target")
    assert written.status == 201, written.json()
    with pytest.raises(ApiError) as refused:
        await cancel_move(runtime.bindings(), T)
    assert (refused.value.status, refused.value.code) == (409, "move_switched")
    sql = "SELECT COUNT(*) AS n FROM semantic_facts WHERE content = 'on the target'"
    assert await runtime.shard_db("s2").prepare(sql).first_value("n") == 1
    missing = await client.send(
        "POST", "/admin/moves/cancel", {"tenant": "ghost"}, access=client.operator
    )
    assert (missing.status, missing.json()["error"]["code"]) == (404, "no_move")


def test_a_table_keyed_by_a_blob_is_refused_before_its_writes_could_fail() -> None:
    """The change log's triggers store keys as JSON, which cannot hold a BLOB: a trigger on
    such a table would fail every write of the moving tenant, so the move refuses it first."""
    table = TenantTable("blobs", ("tenant_id", "k", "v"), ("tenant_id", "k"), {"k": "BLOB"})
    with pytest.raises(ApiError) as refused:
        move_module._tracking_trigger_sql(table, "INSERT")
    assert refused.value.code == "table_not_movable"


async def test_a_tenant_moved_away_and_back_keeps_its_facts_whole(
    client: Client, runtime: LocalRuntime, clock: FixedClock
) -> None:
    """A moved fact keeps its id and content hash, and learning it again on the target
    finds it rather than storing a second one."""
    token = await _seed(client, T, 3)
    facts = "SELECT fact_id, content, content_hash FROM semantic_facts WHERE tenant_id = ?"

    async def stored(shard: str) -> list[dict[str, Any]]:
        rows = (await runtime.shard_db(shard).prepare(facts).bind(T).all()).results
        return sorted(rows, key=lambda r: str(r["fact_id"]))

    before = await stored("primary")

    await start_move(runtime.bindings(), T, "s2")
    await _drive(runtime, clock, T, MoveBudget(max_calls=6))
    assert await stored("s2") == before
    value = "semantic note 1 about the lantern festival number 1"
    again = await client.write(token, "agent", tier="semantic", key="k1", value=value)
    assert again.status in (200, 201), again.json()
    assert len(await stored("s2")) == 3  # the same fact, not a second one

    await start_move(runtime.bindings(), T, "primary")
    await _drive(runtime, clock, T, MoveBudget(max_calls=6))
    assert await stored("primary") == before
    assert await stored("s2") == []
