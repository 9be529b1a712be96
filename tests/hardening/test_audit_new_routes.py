"""Issue 47, point 4: the routes added after the second audit — restore and replay, tenant
moves and shards, the namespace backfill, the connected-client routes — audited as an
outsider would: every route by every identity (table-driven, over real loopback HTTP), ids of
another tenant, a non-supersession event or one event twice, an active fact, a tenant
already moving, a crash at each step of a restore and a replay.

`test_route_by_identity` is the table: route by identity -> expected status; a refused call
changes nothing (the rows each route writes are compared before and after). The cases are
counted in the report of issue 47.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_memory.agent.memory_tools import McpMemoryTools
from agent_memory.lifecycle import move as move_module
from agent_memory.lifecycle.move import start_move
from agent_memory.memory import Memory
from authorization import oauth_store
from authorization.operator_grants import grant
from bindings.ports.clock import FixedClock
from gateway.credentials import MCP_PATH
from http_messages import ApiError
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.agents.conftest import build_request
from tests.fakes.embedder import HashingEmbedder
from worker.app import handle
from worker.identity import ACCESS_HEADER, MintRequest, mint_memory_token
from worker.oauth.protocol import issue_tokens

pytestmark = pytest.mark.xdist_group("audit-new-routes")

NOW = 1_750_000_000.0
ACME, GLOBEX = "acme", "globex"
ULID = "01JAAAAAAAAAAAAAAAAAAAAAAA"  # a well-formed id nothing has
ORIGIN = "http://127.0.0.1:8790"


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    body: Any
    allowed: int  # the status an identity allowed to call it gets (ids nothing has: no change)
    platform: bool = False  # a route naming no tenant: platform admins only


CASES = [
    Case("POST", f"/admin/tenants/{ACME}/facts/{ULID}/restore", {}, 404),
    Case("POST", f"/admin/tenants/{ACME}/events/{ULID}/replay", {}, 404),
    Case("POST", f"/admin/tenants/{ACME}/namespace-backfill", {"dry_run": True}, 200),
    Case("GET", f"/admin/tenants/{ACME}/oauth-clients", None, 200),
    Case("DELETE", f"/admin/tenants/{ACME}/oauth-clients/{ULID}", None, 404),
    Case("GET", "/admin/shards", None, 200, platform=True),
    Case("GET", "/admin/moves", None, 200, platform=True),
    Case("POST", "/admin/moves", {"tenant": ACME, "to": "nowhere"}, 422, platform=True),
    Case("POST", "/admin/moves/advance", {"tenant": ACME}, 404, platform=True),
    Case("POST", "/admin/moves/cancel", {"tenant": ACME}, 404, platform=True),
    Case("POST", "/admin/moves/recheck", {"tenant": ACME}, 404, platform=True),
]

# identity -> (what it may do, the status a refusal gets)
#   "tenant": operates acme (a grant); "platform": a platform admin; None: nothing.
IDENTITIES: dict[str, tuple[str | None, int]] = {
    "none": (None, 401),
    "acme operator": ("tenant", 0),
    "globex operator": (None, 403),
    "signed in, no grant": (None, 403),
    "platform admin": ("platform", 0),
    "platform admin, expired": (None, 403),
    "memory token of another agent type (bearer)": (None, 401),
    "memory token as the Access header": (None, 403),
    "OAuth token for another resource (bearer)": (None, 401),
    "OAuth token with fewer scopes as the Access header": (None, 403),
}


def expected(case: Case, identity: str) -> int:
    role, refused = IDENTITIES[identity]
    if role == "platform" or (role == "tenant" and not case.platform):
        return case.allowed
    return refused or 403


@dataclass
class World:
    base: str
    d1: Path
    headers: dict[str, dict[str, str]]
    seeded: dict[str, dict[str, str]]  # tenant -> loser, winner, event, grant

    def call(self, identity: str, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = self.headers[identity]
        return httpx.request(method, self.base + path, headers=headers, json=body, timeout=30)


async def seed_tenant(rt: LocalRuntime, tenant: str) -> dict[str, str]:
    """Two facts, the first superseded by the second (a reconciler supersession and its
    event); returns their ids and the event's."""
    tools = McpMemoryTools(rt.bindings())
    for text in ("Dana lives in Leeds.", "Dana moved to York."):
        assert await tools.call(tenant, "store_memory", {"content": text}) == {"stored": True}
    rows = (
        await rt.db.prepare(
            "SELECT fact_id, content FROM semantic_facts WHERE tenant_id = ? ORDER BY content"
        )
        .bind(tenant)
        .all()
    )
    ids = {str(r["content"]): str(r["fact_id"]) for r in rows.results}
    leeds, york = ids["Dana lives in Leeds."], ids["Dana moved to York."]
    reconciler = (await Memory.open(rt.bindings(), tenant)).reconciler()
    assert reconciler is not None
    why = {"op": "superseded", "decision": "update", "reason": "same_predicate_newer"}
    ms = int(rt.clock.now() * 1000)
    assert await reconciler._supersede(leeds, york, ms, relation=None, why=why)
    event = (
        await rt.db.prepare(
            "SELECT event_id FROM memory_events WHERE tenant_id = ? "
            "AND json_extract(payload, '$.supersedes') = ?"
        )
        .bind(tenant, leeds)
        .first()
    )
    assert event is not None
    return {"loser": leeds, "winner": york, "event": str(event["event_id"])}


async def oauth_token(
    rt: LocalRuntime, tenant: str, scopes: tuple[str, ...], resource: str, grant_id: bool = False
) -> str:
    """An access token of a new grant of `tenant` (or, with `grant_id`, the grant's id)."""
    g = oauth_store.Grant(
        tenant=tenant,
        grant_id=f"grant-{tenant}-{len(scopes)}-{len(resource)}",
        client_id="https://client.example.test/oauth/client.json",
        principal="ann@acme.example",
        scopes=scopes,
        resource=resource,
        created_at=int(NOW),
    )
    assert rt.db is not None and rt.kv is not None
    await oauth_store.create_grant(rt.db, g, code_hash="")
    token = str((await issue_tokens(rt.db, rt.kv, g, int(NOW)))["access_token"])
    return g.grant_id if grant_id else token


def state_of(d1: Path) -> list[Any]:
    """What the audited routes could change: fact statuses, events, OAuth grants, moves."""
    with sqlite3.connect(f"file:{d1}?mode=ro", uri=True) as db:
        return [
            db.execute(sql).fetchall()
            for sql in (
                "SELECT tenant_id, fact_id, status, superseded_by FROM semantic_facts ORDER BY 2",
                "SELECT tenant_id, event_id FROM memory_events ORDER BY 2",
                "SELECT tenant_id, grant_id, revoked_at FROM oauth_grants ORDER BY 2",
                "SELECT * FROM tenant_moves ORDER BY 1",
            )
        ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    state = tmp_path_factory.mktemp("audit") / "state"
    rt = LocalRuntime.open(state, embedder=HashingEmbedder(), clock=FixedClock(time.time()))

    seeded: dict[str, dict[str, str]] = {}

    async def seed() -> dict[str, dict[str, str]]:
        await rt.migrate()
        await grant(rt.bindings(), ACME, "email", "ann@acme.example", "audit")
        await grant(rt.bindings(), GLOBEX, "email", "gus@globex.example", "audit")
        for tenant in (ACME, GLOBEX):
            seeded[tenant] = await seed_tenant(rt, tenant)
        seeded[GLOBEX]["grant"] = await oauth_token(rt, GLOBEX, ("tools",), ORIGIN, grant_id=True)
        memory = await mint_memory_token(
            rt.bindings(), ACME, MintRequest(agent_type="sdr", agent_id="agent-x")
        )
        other_resource = await oauth_token(rt, ACME, ("tools", "memory:read"), ORIGIN)
        fewer = await oauth_token(rt, ACME, ("memory:read",), f"{ORIGIN}{MCP_PATH}")
        now = rt.clock.now()

        def access(email: str, at: float = now) -> dict[str, str]:
            return {ACCESS_HEADER: mint_token(rt.state.access, email, now=at, ttl=3600)}

        return {
            "none": {},
            "acme operator": access("ann@acme.example"),
            "globex operator": access("gus@globex.example"),
            "signed in, no grant": access("eve@nowhere.example"),
            "platform admin": access("ops@example.com"),
            "platform admin, expired": access("ops@example.com", now - 7200),
            "memory token of another agent type (bearer)": {
                "authorization": f"Bearer {memory.token}"
            },
            "memory token as the Access header": {ACCESS_HEADER: memory.token},
            "OAuth token for another resource (bearer)": {
                "authorization": f"Bearer {other_resource}"
            },
            "OAuth token with fewer scopes as the Access header": {ACCESS_HEADER: fewer},
        }

    headers = asyncio.run(seed())
    with running_server(rt) as base:
        yield World(base, state / "d1.sqlite", headers, seeded)


@pytest.mark.parametrize("identity", list(IDENTITIES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.method} {c.path}")
def test_route_by_identity(world: World, case: Case, identity: str) -> None:
    before = state_of(world.d1)
    answer = httpx.request(
        case.method,
        world.base + case.path,
        headers=world.headers[identity],
        json=case.body if case.body is not None else None,
        timeout=30,
    )
    assert answer.status_code == expected(case, identity), answer.text
    if answer.status_code >= 400:
        assert set(answer.json()["error"]) >= {"code", "message"}
    assert state_of(world.d1) == before


@pytest.mark.parametrize("identity", ["platform admin", "acme operator"])
def test_ids_of_another_tenant_are_not_found_and_change_nothing(
    world: World, identity: str
) -> None:
    other = world.seeded[GLOBEX]
    before = state_of(world.d1)
    tried = [
        ("POST", f"/admin/tenants/{ACME}/facts/{other['loser']}/restore", {}, 404),
        ("POST", f"/admin/tenants/{ACME}/events/{other['event']}/replay", {}, 404),
        ("DELETE", f"/admin/tenants/{ACME}/oauth-clients/{other['grant']}", None, 404),
    ]
    if identity == "acme operator":  # and through the other tenant's own paths
        tried += [
            ("POST", f"/admin/tenants/{GLOBEX}/facts/{other['loser']}/restore", {}, 403),
            ("POST", f"/admin/tenants/{GLOBEX}/events/{other['event']}/replay", {}, 403),
            ("DELETE", f"/admin/tenants/{GLOBEX}/oauth-clients/{other['grant']}", None, 403),
            ("POST", f"/admin/tenants/{GLOBEX}/namespace-backfill", {}, 403),
        ]
    for method, path, body, status in tried:
        answer = world.call(identity, method, path, body)
        assert answer.status_code == status, (path, answer.text)
    assert state_of(world.d1) == before
    listed = world.call(identity, "GET", f"/admin/tenants/{ACME}/oauth-clients").json()
    assert other["grant"] not in json.dumps(listed) and listed["clients"]


def test_restoring_an_active_fact_or_replaying_what_is_no_supersession_is_refused(
    world: World,
) -> None:
    acme = world.seeded[ACME]
    before = state_of(world.d1)
    restore = world.call(
        "acme operator", "POST", f"/admin/tenants/{ACME}/facts/{acme['winner']}/restore", {}
    )
    assert (restore.status_code, restore.json()["error"]["code"]) == (409, "not_superseded")
    # A fact's creation is its own memory_written event (in its row): it records no supersession.
    created = world.call(
        "acme operator", "POST", f"/admin/tenants/{ACME}/events/{acme['winner']}/replay", {}
    )
    assert (created.status_code, created.json()["error"]["code"]) == (422, "not_a_supersession")
    assert state_of(world.d1) == before


class Crash(Exception):
    pass


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(NOW)
    )
    await runtime.migrate()
    yield runtime
    await runtime.close()


async def send(rt: LocalRuntime, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    request = build_request(method, path, body or {}, token=token)
    response = await handle(request, rt.bindings())
    return response.status, json.loads(response.body)


async def facts_and_events(rt: LocalRuntime, tenant: str) -> tuple[dict[str, Any], list[Any]]:
    facts = (
        await rt.db.prepare(
            "SELECT fact_id, status, superseded_by FROM semantic_facts WHERE tenant_id = ?"
        )
        .bind(tenant)
        .all()
    )
    events = (
        await rt.db.prepare(
            "SELECT json_extract(payload, '$.op') AS op, "
            "json_extract(payload, '$.fact_id') AS fact FROM memory_events WHERE tenant_id = ? "
            "AND json_extract(payload, '$.by') IS NOT NULL"
        )
        .bind(tenant)
        .all()
    )
    return (
        {str(r["fact_id"]): (r["status"], r["superseded_by"]) for r in facts.results},
        sorted((r["op"], r["fact"]) for r in events.results),
    )


def crashing(rt: LocalRuntime) -> dict[str, int]:
    """Counts the primary database's D1 calls (`n`) and raises `Crash` at `crash_at`."""
    calls = {"n": 0, "crash_at": -1}
    run = rt.db._execute

    def crash(statements: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == calls["crash_at"]:
            raise Crash(f"crash at D1 call {calls['n']}")
        return run(statements, **kwargs)

    rt.db._execute = crash  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("action", ["restore", "replay"])
async def test_a_crash_at_each_step_of_a_restore_or_replay_is_finished_by_repeating_it(
    rt: LocalRuntime, action: str
) -> None:
    """Whatever D1 call a restore (or a replay after an undo) dies at, repeating the request
    leaves the same state as one that never crashed: the fact live (or superseded) with its
    vector, and exactly one event saying who did it."""
    calls = crashing(rt)
    crashes = 0
    for crash_at in range(1, 60):
        tenant = f"t{crash_at}"
        seeded = await seed_tenant(rt, tenant)
        loser = seeded["loser"]
        if action == "restore":
            path, after = f"/admin/tenants/{tenant}/facts/{loser}/restore", "active"
        else:
            assert (await send(rt, "POST", f"/admin/tenants/{tenant}/facts/{loser}/restore"))[
                0
            ] == 200
            path, after = f"/admin/tenants/{tenant}/events/{seeded['event']}/replay", "superseded"
        calls["n"], calls["crash_at"] = 0, crash_at
        try:
            status, _ = await send(rt, "POST", path)
        except Crash:
            status = 0
        calls["crash_at"] = -1
        if status == 200:
            break  # past the last D1 call: every step has been crashed at
        crashes += 1
        assert status in (0, 500), crash_at
        repeated, body = await send(rt, "POST", path)  # the operator tries again
        assert repeated in (200, 409), (crash_at, body)
        facts, events = await facts_and_events(rt, tenant)
        assert facts[loser][0] == after, (crash_at, facts)
        ops = ["supersession_undone"] + (["supersession_replayed"] if action == "replay" else [])
        assert events == sorted((op, loser) for op in ops), (crash_at, events)
        assert (loser in rt.vectors._records) == (after == "active"), crash_at
    assert crashes >= 2


async def test_replaying_an_event_twice_or_after_its_winner_went_changes_nothing(
    rt: LocalRuntime,
) -> None:
    seeded = await seed_tenant(rt, ACME)
    loser, winner = seeded["loser"], seeded["winner"]
    restore = f"/admin/tenants/{ACME}/facts/{loser}/restore"
    replay = f"/admin/tenants/{ACME}/events/{seeded['event']}/replay"
    assert (await send(rt, "POST", restore))[0] == 200
    assert (await send(rt, "POST", replay))[0] == 200
    twice = await send(rt, "POST", replay)
    assert (twice[0], twice[1]["error"]["code"]) == (409, "not_active")
    # Undone again, and the fact that superseded it deleted: a replay would supersede a live
    # fact by one that no longer exists, and neither would be recalled any more.
    assert (await send(rt, "POST", restore))[0] == 200
    assert (await send(rt, "DELETE", f"/admin/tenants/{ACME}/facts/{winner}"))[0] == 200
    before = await facts_and_events(rt, ACME)
    gone = await send(rt, "POST", replay)
    assert (gone[0], gone[1]["error"]["code"]) == (409, "not_active"), gone
    assert await facts_and_events(rt, ACME) == before
    assert loser in rt.vectors._records


async def test_a_tenant_already_moving_cannot_be_moved_again_even_by_two_requests_at_once(
    rt: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed_tenant(rt, ACME)
    assert (await send(rt, "POST", "/admin/moves", {"tenant": ACME, "to": "s2"}))[0] == 202
    again = await send(rt, "POST", "/admin/moves", {"tenant": ACME, "to": "s2"})
    assert (again[0], again[1]["error"]["code"]) == (409, "move_in_progress")
    # Two starts at once for another tenant: both find no move, then both write theirs. The
    # second used to reset the first (its progress and its lease: two advances at once).
    await seed_tenant(rt, GLOBEX)
    arrived: list[str] = []
    both = asyncio.Event()
    home = move_module.directory_home

    async def together(bindings: Any, tenant: str) -> str:
        arrived.append(tenant)
        if len(arrived) == 2:
            both.set()
        await both.wait()
        return await home(bindings, tenant)

    monkeypatch.setattr(move_module, "directory_home", together)
    starts = await asyncio.gather(
        *(start_move(rt.bindings(), GLOBEX, "s2") for _ in range(2)), return_exceptions=True
    )
    refused = [s for s in starts if isinstance(s, ApiError)]
    assert len(refused) == 1 and refused[0].code == "move_in_progress", starts
