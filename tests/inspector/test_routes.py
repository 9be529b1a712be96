"""The inspector's read routes over real HTTP: what the page is built on."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from agent_memory.memory import Memory
from agent_memory.tiers.semantic.models import LearnResult
from local_runtime.runtime import LocalRuntime
from tests.inspector.seed import NEW_FACT, OLD_FACT, OTHER_FACT, SUBJECT, TENANT, Seeded
from worker.identity import ACCESS_HEADER

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# seeded server starts once, not once per worker.
pytestmark = pytest.mark.xdist_group("inspector-routes")

FACTS = f"/admin/tenants/{TENANT}/facts"
EVENTS = f"/admin/tenants/{TENANT}/events"
EXPLAIN = f"/admin/tenants/{TENANT}/recall/explain"
EPISODES = f"/admin/tenants/{TENANT}/episodes"


def facts(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    response = client.get(FACTS, params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["facts"]
    return found


def by_content(client: httpx.Client, content: str) -> dict[str, Any]:
    (view,) = [v for v in facts(client, limit=100) if v["fact"]["content"] == content]
    return view


def test_tenants_lists_the_seeded_tenant(seeded_server: Seeded) -> None:
    with seeded_server.admin() as client:
        listed = client.get("/admin/tenants").json()
    assert listed == {"tenants": [TENANT], "scope": "platform"}


def test_a_tenant_scoped_operator_lists_the_tenants_of_its_grants(seeded_server: Seeded) -> None:
    # Issue 26: the listing was platform-only, so a scoped operator's inspector had no
    # tenant to pick. It lists its grants (one with no data yet too), and nothing else.
    scoped = seeded_server.operator("tess@example.com", "globex", TENANT)
    nobody = seeded_server.operator("nora@example.com")
    answers = {
        who: httpx.get(f"{seeded_server.base}/admin/tenants", headers={ACCESS_HEADER: token})
        for who, token in (("tess", scoped), ("nora", nobody))
    }
    assert answers["tess"].status_code == 200, answers["tess"].text
    assert answers["tess"].json() == {"tenants": [TENANT, "globex"], "scope": "granted"}
    assert answers["nora"].json() == {"tenants": [], "scope": "granted"}
    assert answers["nora"].headers["cache-control"] == "no-store"
    # The grants still gate every tenant route: another tenant stays closed.
    other = httpx.get(
        f"{seeded_server.base}/admin/tenants/initech/facts", headers={ACCESS_HEADER: scoped}
    )
    assert (other.status_code, other.json()["error"]["code"]) == (403, "tenant_forbidden")


def test_facts_carry_status_and_filter_by_status_subject_agent_and_text(
    seeded_server: Seeded,
) -> None:
    with seeded_server.admin() as client:
        everything = facts(client)
        assert {v["fact"]["content"]: v["status"] for v in everything} == {
            OLD_FACT: "superseded",
            NEW_FACT: "active",
            OTHER_FACT: "active",
        }
        assert [v["fact"]["content"] for v in facts(client, status="superseded")] == [OLD_FACT]
        assert {v["fact"]["content"] for v in facts(client, subject=SUBJECT)} == {
            OLD_FACT,
            NEW_FACT,
        }
        assert len(facts(client, agent_type="mcp")) == 3
        assert facts(client, agent_type="assistant") == []
        assert [v["fact"]["content"] for v in facts(client, q="BERLIN")] == [OTHER_FACT]
        assert facts(client, status="decayed") == []


def test_facts_pages_cover_everything_once(seeded_server: Seeded) -> None:
    with seeded_server.admin() as client:
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            params: dict[str, Any] = {"limit": 1}
            if cursor:
                params["cursor"] = cursor
            page = client.get(FACTS, params=params).json()
            seen += [v["fact"]["fact_id"] for v in page["facts"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 3 and len(set(seen)) == 3
        assert seen == [v["fact"]["fact_id"] for v in facts(client)]


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        (f"{FACTS}?limit=0", 422, "validation_error"),
        (f"{FACTS}?status=gone", 422, "validation_error"),
        (f"{FACTS}?nope=1", 422, "validation_error"),
        (f"{FACTS}?cursor=zz", 422, "invalid_cursor"),
        (f"{EVENTS}?cursor=eyJ4IjoxfQ", 422, "invalid_cursor"),
        (f"{EVENTS}?kind=memory_deleted", 422, "validation_error"),
        (f"{FACTS}/not-a-ulid", 422, "invalid_path"),
        (f"{FACTS}/{'0' * 26}", 404, "fact_not_found"),
        ("/admin/tenants/ACME!/facts", 422, "invalid_path"),
        (EPISODES, 422, "validation_error"),
        (f"{EPISODES}?ids=nope,{'0' * 26}", 422, "validation_error"),
    ],
)
def test_bad_input_gets_a_stable_json_error(
    seeded_server: Seeded, path: str, status: int, code: str
) -> None:
    with seeded_server.admin() as client:
        response = client.get(path)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/tenants"),
        ("GET", FACTS),
        ("GET", f"{FACTS}/{'0' * 26}"),
        ("GET", EVENTS),
        ("POST", EXPLAIN),
        ("GET", f"{EPISODES}?ids={'0' * 26}"),
    ],
)
def test_every_inspector_route_is_access_gated(
    seeded_server: Seeded, method: str, path: str
) -> None:
    missing = httpx.request(method, seeded_server.base + path, json={"query": "Ada"})
    forged = httpx.request(
        method,
        seeded_server.base + path,
        json={"query": "Ada"},
        headers={ACCESS_HEADER: seeded_server.token[:-6] + "AAAAAA"},
    )
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "access_token_missing"
    assert forged.status_code == 403
    assert forged.json()["error"]["code"] == "access_token_invalid"


def test_a_superseded_fact_shows_its_successor_links_and_history(seeded_server: Seeded) -> None:
    with seeded_server.admin() as client:
        old, new = by_content(client, OLD_FACT), by_content(client, NEW_FACT)
        detail = client.get(f"{FACTS}/{old['fact']['fact_id']}").json()
        assert [v["fact"]["content"] for v in detail["replaced_by"]] == [NEW_FACT]
        assert detail["replaced"] == []
        assert [v["status"] for v in detail["timeline"]] == ["superseded", "active"]
        # The old fact's window ends where the successor took over.
        assert detail["fact"]["fact"]["valid_to"] is not None
        # It was written over MCP and returned by the seeded recall.
        assert [e["kind"] for e in detail["written"]] == ["memory_written"]
        assert detail["written"][0]["payload"]["source"] == "mcp"
        assert [e["payload"]["query"] for e in detail["retrieved"]] == [
            "how does Ada like to be contacted"
        ]
        back = client.get(f"{FACTS}/{new['fact']['fact_id']}").json()
        assert [v["fact"]["content"] for v in back["replaced"]] == [OLD_FACT]
        assert back["replaced_by"] == []
        (event,) = detail["retrieved"]
        assert old["fact"]["fact_id"] in [r["id"] for r in event["payload"]["results"]]


def test_another_tenants_listings_show_nothing_of_this_one(seeded_server: Seeded) -> None:
    """Tenant isolation of every inspector listing: the seeded tenant's facts and events
    never appear under another tenant's path (the operator here may read both)."""
    with seeded_server.admin() as client:
        assert facts(client)  # the seeded tenant has facts
        for status in (None, "active", "superseded", "pending", "decayed"):
            params = {} if status is None else {"status": status}
            other = client.get("/admin/tenants/globex/facts", params=params).json()
            assert other["facts"] == [], status
        assert client.get("/admin/tenants/globex/events").json()["events"] == []


def test_episodes_by_id_are_what_a_run_recalled(seeded_server: Seeded) -> None:
    with seeded_server.admin() as client:
        runs = client.get(f"/admin/agents/{TENANT}/runs").json()["runs"]
        recalled = runs[0]["input"]["context_episode_ids"]
        assert len(recalled) == 1
        missing = "0" * 26
        found = client.get(EPISODES, params={"ids": f"{missing},{recalled[0]}"}).json()
        (episode,) = found["episodes"]
        assert episode["episode_id"] == recalled[0] and episode["run_id"] == runs[1]["run_id"]
        assert episode["subject"] == SUBJECT and episode["content"].startswith("Input: Note for")
        other_tenant = client.get(
            "/admin/tenants/globex/episodes", params={"ids": recalled[0]}
        ).json()
        assert other_tenant == {"episodes": []}


def test_events_filter_by_kind_tier_and_time_and_page(seeded_server: Seeded) -> None:
    with seeded_server.admin() as client:
        everything = client.get(EVENTS, params={"limit": 100}).json()["events"]
        retrieved = client.get(EVENTS, params={"kind": "memory_retrieved"}).json()["events"]
        semantic = client.get(EVENTS, params={"tier": "semantic", "limit": 100}).json()["events"]
        # One semantic recall; agent turns also record their working and episodic reads.
        assert {e["kind"] for e in retrieved} == {"memory_retrieved"}
        assert [e["tier"] for e in retrieved].count("semantic") == 1
        assert {e["tier"] for e in retrieved} <= {"semantic", "working", "episodic"}
        assert {e["tier"] for e in semantic} == {"semantic"} and len(semantic) >= 4
        times = [e["created_at"] for e in everything]
        assert times == sorted(times, reverse=True)
        middle = times[len(times) // 2]
        window = client.get(EVENTS, params={"since": middle, "limit": 100}).json()["events"]
        assert window and all(e["created_at"] >= middle for e in window)
        before = client.get(EVENTS, params={"until": middle, "limit": 100}).json()["events"]
        assert len(window) + len(before) == len(everything)
        first = client.get(EVENTS, params={"limit": 2}).json()
        second = client.get(EVENTS, params={"limit": 2, "cursor": first["next_cursor"]}).json()
        ids = [e["event_id"] for e in first["events"] + second["events"]]
        assert ids == [e["event_id"] for e in everything[:4]]


def test_explain_ranks_with_channel_scores_and_records_nothing(seeded_server: Seeded) -> None:
    with seeded_server.admin() as client:
        before = client.get(EVENTS, params={"limit": 100}).json()["events"]
        stats_before = by_content(client, NEW_FACT)["fact"]["recall_count"]
        response = client.post(EXPLAIN, json={"query": "Ada phone calls", "limit": 5})
        assert response.status_code == 200, response.text
        body = response.json()
        top = body["results"][0]
        assert top["content"] == NEW_FACT and top["rank"] == 1
        # The superseded fact is not live: recall would not return it.
        assert OLD_FACT not in [r["content"] for r in body["results"]]
        weighted = sum(part["weighted"] for part in top["parts"].values())
        assert weighted == pytest.approx(top["score"], abs=1e-9)
        for part in top["parts"].values():
            assert part["weighted"] == pytest.approx(part["value"] * part["weight"])
        assert top["channels"]["vector"]["rank"] == 1 and top["channels"]["keyword"]["raw"] > 0
        assert body["recorded"] is False
        assert client.get(EVENTS, params={"limit": 100}).json()["events"] == before
        assert by_content(client, NEW_FACT)["fact"]["recall_count"] == stats_before
        bad = client.post(EXPLAIN, json={"query": "", "limit": 5})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"


def test_a_fact_past_its_validity_window_is_listed_as_decayed(
    fresh_server: tuple[Seeded, LocalRuntime],
) -> None:
    seeded, runtime = fresh_server
    now = runtime.clock.now()

    async def learn() -> LearnResult:
        memory = (await Memory.open(runtime.bindings(), TENANT)).semantic()
        window = {"valid_from": now - 100, "valid_to": now - 10}
        return await memory.learn({"content": "The spring promotion runs", **window})

    learned = asyncio.run(learn())
    with seeded.admin() as client:
        decayed = facts(client, status="decayed")
        assert [v["fact"]["fact_id"] for v in decayed] == [learned.fact_id]
        assert learned.fact_id not in [v["fact"]["fact_id"] for v in facts(client, status="active")]


def test_the_page_is_served_like_workers_static_assets(seeded_server: Seeded) -> None:
    base = seeded_server.base
    redirect = httpx.get(f"{base}/admin/ui")
    assert redirect.status_code == 307 and redirect.headers["location"] == "/admin/ui/"
    page = httpx.get(f"{base}/admin/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Memory inspector" in page.text and "agent-memory token" in page.text
    script = httpx.get(f"{base}/admin/ui/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert "Cf-Access-Jwt-Assertion" in script.text
    for path in ("/admin/ui/../../pyproject.toml", "/admin/ui/%2e%2e/x", "/admin/ui/nope.js"):
        missing = httpx.get(f"{base}{path}")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    # Only GET/HEAD read assets; anything else is the Worker's.
    assert httpx.post(f"{base}/admin/ui/").status_code == 404


def test_detail_lists_links_and_provenance_with_their_sources(
    fresh_server: tuple[Seeded, LocalRuntime],
) -> None:
    seeded, runtime = fresh_server
    with seeded.admin() as client:
        new, other = by_content(client, NEW_FACT), by_content(client, OTHER_FACT)
        runs = client.get(f"/admin/agents/{TENANT}/runs").json()["runs"]
        run_id = runs[-1]["run_id"]
        episode = client.get(f"/admin/agents/{TENANT}/runs/{run_id}").json()["episodes"][0]
    new_id, other_id = new["fact"]["fact_id"], other["fact"]["fact_id"]
    now_ms = int(runtime.clock.now() * 1000)
    db = runtime.bindings().db
    assert db is not None

    async def write() -> None:
        # What the reconciler writes when it promotes an episode and links neighbours.
        await db.batch(
            [
                db.prepare(
                    "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                    "relation, created_at) VALUES (?, ?, 'episode', ?, 'promoted_from', ?)"
                ).bind(TENANT, new_id, episode["episode_id"], now_ms),
                db.prepare(
                    "INSERT INTO memory_links (tenant_id, from_fact_id, to_fact_id, score, "
                    "created_at) VALUES (?, ?, ?, 0.8, ?)"
                ).bind(TENANT, new_id, other_id, now_ms),
            ]
        )

    asyncio.run(write())
    with seeded.admin() as client:
        detail = client.get(f"{FACTS}/{new_id}").json()
        back = client.get(f"{FACTS}/{other_id}").json()
    (source,) = detail["provenance"]
    assert source["relation"] == "promoted_from" and source["run_id"] == run_id
    assert source["content"] == episode["content"]
    assert detail["links"] == [
        {
            "fact_id": other_id,
            "direction": "outgoing",
            "score": 0.8,
            "content": OTHER_FACT,
            "status": "active",
        }
    ]
    assert [(link["fact_id"], link["direction"]) for link in back["links"]] == [
        (new_id, "incoming")
    ]
