"""The uniform memory API (ADR-29): one endpoint over the four tiers, per-agent tokens."""

from __future__ import annotations

from typing import Any

from agent_memory.governance.writes import loaded_payload
from bindings.ports.clock import FixedClock
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.memory_api.conftest import Client

TENANT = "acme"


def items(response: Any) -> list[dict[str, Any]]:
    assert response.status == 200, response.json()
    found: list[dict[str, Any]] = response.json()["items"]
    return found


def code(response: Any) -> str:
    value: str = response.json()["error"]["code"]
    return value


async def count(runtime: LocalRuntime, sql: str) -> int:
    row = await runtime.db.prepare(sql).first()
    assert row is not None
    return int(next(iter(row.values())))


async def test_tour_write_three_tiers_read_back_by_tier_and_across_tiers(
    client: Client, memory_runtime: LocalRuntime, clock: FixedClock
) -> None:
    a = await client.mint(TENANT, "agent-a")
    assert (
        await client.write(a, "agent-a", tier="working", key="page", value={"url": "/login"})
    ).status == 201
    assert (
        await client.write(
            a, "agent-a", tier="episodic", key="sso", value="the SSO button was at #login-sso"
        )
    ).status == 201
    assert (
        await client.write(
            a, "agent-a", tier="semantic", key="site:example", value="example.com login uses SSO"
        )
    ).status == 201

    assert [i["value"] for i in items(await client.read(a, "agent-a", tier="working"))] == [
        {"url": "/login"}
    ]
    clock.advance(1)  # newest first is by write time (ties within one millisecond: any order)
    await client.write(a, "agent-a", tier="episodic", key="tagged", value=1, metadata={"src": "t"})
    episodes = items(await client.read(a, "agent-a", tier="episodic"))
    assert [(i["key"], i["metadata"]) for i in episodes] == [("tagged", {"src": "t"}), ("sso", {})]
    semantic = items(await client.read(a, "agent-a", tier="semantic"))
    assert [i["value"] for i in semantic] == ["example.com login uses SSO"]

    found = items(await client.read(a, "agent-a", query="login sso"))
    assert {i["tier"] for i in found} == {"working", "episodic", "semantic"}
    scores = [i["score"] for i in found]
    assert scores == sorted(scores, reverse=True)
    for item in found:
        assert set(item["score_breakdown"]["weights"]) == {
            "relevance",
            "recency",
            "confidence",
            "density",
        }
    events = (
        await memory_runtime.db.prepare(
            "SELECT tier FROM memory_events WHERE tenant_id = ? AND kind = 'memory_retrieved'"
        )
        .bind(TENANT)
        .all()
    )
    assert sorted(r["tier"] for r in events.results) == ["episodic", "semantic", "working"]


async def test_another_agents_token_is_refused_and_sees_nothing_of_agent_a(client: Client) -> None:
    a = await client.mint(TENANT, "agent-a")
    b = await client.mint(TENANT, "agent-b")
    await client.write(a, "agent-a", tier="episodic", key="secret", value="only for a")
    refused = await client.read(b, "agent-a", tier="episodic")
    assert refused.status == 403 and code(refused) == "agent_forbidden"
    assert code(await client.delete(b, "agent-a", "secret", "episodic")) == "agent_forbidden"
    assert items(await client.read(b, "agent-b", tier="episodic")) == []
    # Agent A's episode survived B's attempt.
    assert [i["key"] for i in items(await client.read(a, "agent-a", tier="episodic"))] == ["secret"]


async def test_semantic_memory_is_shared_within_the_tenant_and_not_beyond(client: Client) -> None:
    a = await client.mint(TENANT, "agent-a")
    b = await client.mint(TENANT, "agent-b")
    other = await client.mint("globex", "agent-a")
    await client.write(
        a, "agent-a", tier="semantic", key="site:x", value="x.com rate limits at 10 rps"
    )
    assert [i["key"] for i in items(await client.read(b, "agent-b", tier="semantic"))] == ["site:x"]
    assert items(await client.read(other, "agent-a", tier="semantic")) == []
    assert items(await client.read(other, "agent-a", query="rate limits")) == []


async def test_tiers_and_scopes_in_the_token_bound_what_it_may_do(client: Client) -> None:
    working_only = await client.mint(TENANT, "agent-a", tiers=["working"])
    refused = await client.read(working_only, "agent-a", tier="episodic")
    assert (refused.status, code(refused)) == (403, "tier_forbidden")
    refused = await client.write(working_only, "agent-a", tier="semantic", key="k", value="v")
    assert (refused.status, code(refused)) == (403, "tier_forbidden")
    reader = await client.mint(TENANT, "agent-a", scopes=["read"])
    refused = await client.write(reader, "agent-a", tier="working", key="k", value=1)
    assert (refused.status, code(refused)) == (403, "scope_forbidden")
    # A query without a tier searches only the token's tiers.
    body = (await client.read(working_only, "agent-a", query="anything")).json()
    assert body["tiers_searched"] == ["working"]


async def test_working_memory_ttl_budget_and_keys_are_enforced_with_nothing_written(
    client: Client, memory_runtime: LocalRuntime, clock: FixedClock
) -> None:
    a = await client.mint(TENANT, "agent-a")
    too_long = await client.write(a, "agent-a", tier="working", key="k", value=1, ttl=3601)
    assert (too_long.status, code(too_long)) == (422, "invalid_ttl")
    null = await client.write(a, "agent-a", tier="working", key="k", value=None)
    assert (null.status, code(null)) == (422, "validation_error")
    bad_key = await client.write(a, "agent-a", tier="working", key="a*b", value=1)
    assert (bad_key.status, code(bad_key)) == (422, "invalid_key")
    assert (
        await client.write(a, "agent-a", tier="working", key="big1", value="x" * 30_000)
    ).status == 201
    for n in range(2, 5):
        assert (
            await client.write(a, "agent-a", tier="working", key=f"big{n}", value="x" * 30_000)
        ).status == 201
    over = await client.write(a, "agent-a", tier="working", key="big5", value="x" * 30_000)
    assert (over.status, code(over)) == (413, "working_memory_budget_exceeded")
    keys = [i["key"] for i in items(await client.read(a, "agent-a", tier="working"))]
    assert keys == ["big1", "big2", "big3", "big4"]
    # A short TTL is honoured.
    await client.write(a, "agent-a", tier="working", key="brief", value=1, ttl=60)
    clock.advance(61)
    keys = [i["key"] for i in items(await client.read(a, "agent-a", tier="working"))]
    assert "brief" not in keys


async def test_episodic_lists_newest_first_rewrites_replace_and_ttl_expires(
    client: Client, clock: FixedClock
) -> None:
    a = await client.mint(TENANT, "agent-a", ttl_seconds=86_400)
    for key in ("first", "second", "third"):
        await client.write(a, "agent-a", tier="episodic", key=key, value=key)
        clock.advance(1)
    await client.write(a, "agent-a", tier="episodic", key="first", value="first again")
    listed = items(await client.read(a, "agent-a", tier="episodic"))
    assert [(i["key"], i["value"]) for i in listed] == [
        ("first", "first again"),
        ("third", "third"),
        ("second", "second"),
    ]
    await client.write(a, "agent-a", tier="episodic", key="short", value="gone soon", ttl=60)
    clock.advance(61)
    assert "short" not in [
        i["key"] for i in items(await client.read(a, "agent-a", tier="episodic"))
    ]
    too_long = await client.write(a, "agent-a", tier="episodic", key="k", value=1, ttl=10**9)
    assert (too_long.status, code(too_long)) == (422, "invalid_ttl")
    deleted = await client.delete(a, "agent-a", "second", "episodic")
    assert deleted.json()["deleted"] is True
    assert (await client.delete(a, "agent-a", "second", "episodic")).json()["deleted"] is False
    assert [i["key"] for i in items(await client.read(a, "agent-a", tier="episodic"))] == [
        "first",
        "third",
    ]


async def test_cursor_pages_cover_the_listing_once_and_refuse_other_listings(
    client: Client,
) -> None:
    a = await client.mint(TENANT, "agent-a")
    for n in range(5):
        await client.write(a, "agent-a", tier="working", key=f"k{n}", value=n)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query: dict[str, Any] = {"tier": "working", "limit": 2}
        if cursor:
            query["cursor"] = cursor
        body = (await client.read(a, "agent-a", **query)).json()
        seen += [i["key"] for i in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
        foreign = await client.read(a, "agent-a", tier="episodic", limit=2, cursor=cursor)
        assert (foreign.status, code(foreign)) == (422, "invalid_cursor")
    assert seen == [f"k{n}" for n in range(5)] and pages == 3
    garbage = await client.read(a, "agent-a", tier="working", cursor="not-a-cursor")
    assert (garbage.status, code(garbage)) == (422, "invalid_cursor")


async def test_procedural_is_read_only_and_semantic_deletes_are_for_operators(
    client: Client,
) -> None:
    a = await client.mint(TENANT, "agent-a")
    refused = await client.write(a, "agent-a", tier="procedural", key="w", value="x")
    assert (refused.status, code(refused)) == (405, "procedural_read_only")
    assert "/packs" in refused.json()["error"]["details"]["promotion_route"]
    refused = await client.delete(a, "agent-a", "w", "procedural")
    assert (refused.status, code(refused)) == (405, "procedural_read_only")
    refused = await client.delete(a, "agent-a", "site:x", "semantic")
    assert (refused.status, code(refused)) == (405, "semantic_delete_admin_only")
    missing = await client.read(a, "agent-a", tier="procedural")
    assert (missing.status, code(missing)) == (422, "agent_type_required")
    # Workflows are an agent type's: a memory-API agent's token does not reach the assistant's.
    other = await client.read(a, "agent-a", tier="procedural", agent_type="assistant")
    assert (other.status, code(other)) == (403, "agent_forbidden")
    assistant = await client.mint(TENANT, "agent-a", agent_type="assistant")
    workflows = items(
        await client.read(assistant, "agent-a", tier="procedural", agent_type="assistant")
    )
    assert workflows and all(i["tier"] == "procedural" for i in workflows)
    assert all("posterior_mean" in i["value"] for i in workflows)


async def test_the_tiers_405s_name_the_methods_they_allow(client: Client) -> None:
    """Issue 26: every 405 carries `Allow`."""
    a = await client.mint(TENANT, "agent-a")
    refused = await client.write(a, "agent-a", tier="procedural", key="w", value="x")
    assert (refused.status, refused.headers.get("allow")) == (405, "GET")
    refused = await client.delete(a, "agent-a", "site:x", "semantic")
    assert (refused.status, refused.headers.get("allow")) == (405, "GET, POST")


async def test_refused_semantic_writes_write_nothing(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    a = await client.mint(TENANT, "agent-a")
    refused = await client.write(a, "agent-a", tier="semantic", key="k", value={"not": "text"})
    assert (refused.status, code(refused)) == (422, "validation_error")
    assert await count(memory_runtime, "SELECT COUNT(*) FROM semantic_facts") == 0
    refused = await client.read(a, "agent-a")
    assert (refused.status, code(refused)) == (422, "tier_or_query_required")


async def test_episodic_ttl_is_bounded_by_the_tenants_own_retention(client: Client) -> None:
    operator = client.operator
    set_days = await client.send(
        "PUT", f"/admin/tenants/{TENANT}/lifecycle", {"episode_retention_days": 1}, access=operator
    )
    assert set_days.status == 200, set_days.json()
    a = await client.mint(TENANT, "agent-a")
    refused = await client.write(a, "agent-a", tier="episodic", key="k", value=1, ttl=2 * 86_400)
    assert (refused.status, code(refused)) == (422, "invalid_ttl")
    written = await client.write(a, "agent-a", tier="episodic", key="k", value=1)
    item = written.json()["item"]
    assert item["expires_at"] - item["created_at"] == 86_400_000


async def test_a_search_ranks_the_period_its_query_names_first_from_the_reference_date(
    client: Client, clock: FixedClock
) -> None:
    a = await client.mint(TENANT, "agent-a")
    await client.write(a, "agent-a", tier="semantic", key="old", value="renewal call went well")
    clock.advance(40 * 86_400)
    client.operator = mint_token(client.runtime.state.access, "ops@example.com", now=clock.now())
    a = await client.mint(TENANT, "agent-a")  # the first tokens have expired by now
    await client.write(a, "agent-a", tier="semantic", key="new", value="renewal call went well")
    query = {"tier": "semantic", "query": "renewal call two months ago"}
    # asked now, "two months ago" (one month either side) holds "old", written 40 days ago
    now = items(await client.read(a, "agent-a", **query))
    assert now[0]["key"] == "old"
    asked = clock.now() + 60 * 86_400  # asked two months from now, it holds "new"
    then = items(await client.read(a, "agent-a", **query, reference_date=asked))
    assert then[0]["key"] == "new"
    assert {i["key"]: i["metadata"]["valid_from"] for i in then}["new"] == clock.now() * 1000


async def test_a_semantic_search_can_be_limited_to_a_time_window(
    client: Client, clock: FixedClock
) -> None:
    a = await client.mint(TENANT, "agent-a")
    await client.write(a, "agent-a", tier="semantic", key="old", value="renewal call went well")
    clock.advance(600)
    since = clock.now()
    await client.write(a, "agent-a", tier="semantic", key="new", value="renewal call was tense")
    window = {"tier": "semantic", "query": "renewal call", "valid_from_after": since - 1}
    assert [i["key"] for i in items(await client.read(a, "agent-a", **window))] == ["new"]
    both = items(await client.read(a, "agent-a", tier="semantic", query="renewal call"))
    assert {i["key"] for i in both} == {"old", "new"}
    # An empty window is refused before anything is read.
    bad = await client.read(
        a, "agent-a", tier="semantic", query="renewal", valid_from_after=since, valid_from_before=1
    )
    assert bad.status == 422


async def test_a_search_records_what_each_page_gave_not_what_it_read_past(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    """A page of a search reads one item past it (is there a next page?) and, from page
    two, the ranks before it; its `memory_retrieved` events and the facts' recall
    statistics list only the items the page returned, so the audit says what the caller
    was given."""
    a = await client.mint(TENANT, "agent-a")
    for n in range(3):
        fact = f"the lantern festival number {n} opens at dusk"
        written = await client.write(a, "agent-a", tier="semantic", key=f"f{n}", value=fact)
        assert written.status == 201, written.json()
        seen = f"saw lantern {n} being lit"
        written = await client.write(a, "agent-a", tier="episodic", key=f"e{n}", value=seen)
        assert written.status == 201, written.json()
    await memory_runtime.background.drain()

    given: list[list[str]] = []
    cursor = None
    while True:
        query: dict[str, Any] = {"query": "lantern", "limit": 2}
        if cursor:
            query["cursor"] = cursor
        body = (await client.read(a, "agent-a", **query)).json()
        given.append([i["metadata"].get("fact_id", i["key"]) for i in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    await memory_runtime.background.drain()
    assert [len(page) for page in given] == [2, 2, 2]

    rows = await memory_runtime.db.prepare(
        "SELECT payload FROM memory_events WHERE kind = 'memory_retrieved' ORDER BY event_id"
    ).all()
    recorded = [
        [r["id"] for r in loaded_payload(str(row["payload"]))["results"]] for row in rows.results
    ]
    # Each page's events (one a tier searched) list exactly the page's items, once each.
    assert sorted(i for ids in recorded for i in ids) == sorted(i for page in given for i in page)
    assert all(ids == [] or any(set(ids) <= set(page) for page in given) for ids in recorded)
    recalls = await count(memory_runtime, "SELECT SUM(recall_count) FROM semantic_facts")
    assert recalls == 3  # each fact once: on the page that returned it
