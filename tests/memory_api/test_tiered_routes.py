"""The memory API over the hot/warm/cold client: one episode by id from whichever tier holds
it, and the agent's archived history — each tenant only ever reaching its own namespace."""

from __future__ import annotations

from typing import Any

from agent_memory.governance.personal_data import PersonalData
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.prune import Pruner
from agent_memory.namespace import ItemKey
from agent_memory.tiers.episodic import Episode, EpisodicStore
from local_runtime.runtime import LocalRuntime
from tests.memory_api.conftest import Client

DAY_MS = 86_400_000


async def seed(
    rt: LocalRuntime,
    tenant: str,
    subject: str,
    content: str,
    *,
    episode_id: str | None = None,
    data: dict[str, Any] | None = None,
    offset: float = 0.0,
) -> Episode:
    now = rt.clock.now() + offset
    episode = Episode(
        episode_id=episode_id or new_ulid(now),
        run_id=new_ulid(now),
        agent_type="assistant",
        instance_id="agent-7",
        kind="message",
        subject=subject,
        content=content,
        data=data or {},
        created_at=int(now * 1000),
    )
    personal = PersonalData.from_bindings(rt.bindings(), tenant)
    await EpisodicStore(rt.db, tenant, personal=personal).append_episode(episode)
    return episode


async def prune_all(rt: LocalRuntime) -> None:
    later = int(rt.clock.now() * 1000) + 100 * DAY_MS  # everything is past 90 days by then
    report = await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("t", later)
    assert report.complete


async def get_episode(client: Client, token: str, episode_id: str) -> Any:
    return await client.send("GET", f"/api/v1/memory/agent-7/episodes/{episode_id}", token=token)


async def test_an_episode_is_read_from_warm_then_hot_then_cold(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    rt = memory_runtime
    token = await client.mint(
        "acme", "agent-7", tiers=["episodic"], scopes=["read"], agent_type="assistant"
    )
    first = await seed(rt, "acme", "contact:ada", "Ada asked about pricing")
    second = await seed(rt, "acme", "contact:ada", "Ada accepted the offer", offset=1)
    other = await seed(rt, "acme", "contact:bob", "Bob said hello", offset=2)

    answer = await get_episode(client, token, first.episode_id)
    assert answer.status == 200, answer.json()
    body = answer.json()
    assert (body["found_in"], body["promoted_to"]) == ("warm", ["hot"])
    assert body["namespace_key"] == "agent-memory:acme:agent-7"
    assert body["item_key"] == f"agent-memory:acme:agent-7:episode:{first.episode_id}"
    assert body["episode"]["content"] == "Ada asked about pricing"
    assert (await get_episode(client, token, first.episode_id)).json()["found_in"] == "hot"

    await prune_all(rt)
    answer = await get_episode(client, token, second.episode_id)
    assert answer.status == 200
    body = answer.json()
    assert (body["found_in"], body["promoted_to"]) == ("cold", ["hot"])
    assert body["episode"] == Episode.model_validate(second.model_dump()).model_dump(mode="json")

    history = await client.send(
        "GET", "/api/v1/memory/agent-7/archive", token=token, query={"subject": "contact:ada"}
    )
    assert history.status == 200
    assert [i["episode"]["episode_id"] for i in history.json()["items"]] == [
        second.episode_id,
        first.episode_id,
    ]
    page = await client.send(
        "GET", "/api/v1/memory/agent-7/archive", token=token, query={"limit": 2}
    )
    assert [i["episode"]["content"] for i in page.json()["items"]] == [
        other.content,
        second.content,
    ]
    rest = await client.send(
        "GET",
        "/api/v1/memory/agent-7/archive",
        token=token,
        query={"limit": 2, "cursor": page.json()["next_cursor"]},
    )
    assert [i["episode"]["content"] for i in rest.json()["items"]] == [first.content]
    assert rest.json()["next_cursor"] is None


async def test_a_tenant_never_reaches_another_tenants_namespace(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    rt = memory_runtime
    acme = await client.mint(
        "acme", "agent-7", tiers=["episodic"], scopes=["read"], agent_type="assistant"
    )
    globex = await client.mint(
        "globex", "agent-7", tiers=["episodic"], scopes=["read"], agent_type="assistant"
    )
    mine = await seed(rt, "acme", "contact:ada", "acme's secret")
    archived = await seed(rt, "acme", "contact:ada", "acme's archived secret", offset=1)
    # The same episode id in globex: each tenant reads its own.
    await seed(rt, "globex", "contact:ada", "globex's own", episode_id=mine.episode_id)
    await prune_all(rt)

    own = await get_episode(client, globex, mine.episode_id)
    assert own.status == 200 and own.json()["episode"]["content"] == "globex's own"
    assert own.json()["namespace_key"] == "agent-memory:globex:agent-7"
    missing = await get_episode(client, globex, archived.episode_id)
    assert missing.status == 404 and missing.json()["error"]["code"] == "episode_not_found"
    history = await client.send(
        "GET", "/api/v1/memory/agent-7/archive", token=globex, query={"subject": "contact:ada"}
    )
    assert [i["episode"]["content"] for i in history.json()["items"]] == ["globex's own"]
    # No path names another tenant: a namespace-looking id is just an id in the caller's own.
    forged = f"agent-memory:acme:agent-7:episode:{archived.episode_id}"
    sneaky = await get_episode(client, globex, forged)
    assert sneaky.status == 404
    # Another agent of the same tenant is refused before anything is read.
    other_agent = await client.send(
        "GET", f"/api/v1/memory/agent-8/episodes/{mine.episode_id}", token=acme
    )
    assert other_agent.status == 403 and other_agent.json()["error"]["code"] == "agent_forbidden"


async def test_bad_ids_and_personal_episodes(client: Client, memory_runtime: LocalRuntime) -> None:
    rt = memory_runtime
    token = await client.mint(
        "acme", "agent-7", tiers=["episodic"], scopes=["read"], agent_type="assistant"
    )
    for bad in ("a%2Ab", "a%3A%3Ab", "%3A"):
        answer = await get_episode(client, token, bad)
        assert answer.status == 422, bad
        assert answer.json()["error"]["code"] == "invalid_namespace_key"
    personal = await seed(
        rt, "acme", "contact:ada", "Ada's address", data={"addr": "1 Main St", "_personal": True}
    )
    stored = await (
        rt.db.prepare("SELECT data FROM memory_episodes WHERE episode_id = ?")
        .bind(personal.episode_id)
        .first()
    )
    assert stored is not None and "1 Main St" not in str(stored["data"])  # sealed in D1
    answer = await get_episode(client, token, personal.episode_id)
    assert answer.json()["found_in"] == "warm" and answer.json()["promoted_to"] == []
    assert answer.json()["episode"]["data"]["addr"] == "1 Main St"  # opened for the reader
    key = ItemKey.build("acme", "agent-7", "episode", personal.episode_id).key
    assert await rt.kv.get(key) is None  # personal data never reaches KV
    await prune_all(rt)
    archived = await get_episode(client, token, personal.episode_id)
    assert archived.json()["found_in"] == "cold" and archived.json()["promoted_to"] == []
    assert archived.json()["episode"]["data"]["addr"] == "1 Main St"  # the cold copy opens too
    assert await rt.kv.get(key) is None
    no_tier = await client.mint("acme", "agent-7", tiers=["working"], scopes=["read"])
    refused = await get_episode(client, no_tier, personal.episode_id)
    assert refused.status == 403 and refused.json()["error"]["code"] == "tier_forbidden"


async def test_an_operator_lists_a_subjects_archive_across_agents_of_granted_tenants_only(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    from urllib.parse import quote

    from authorization.operator_grants import grant
    from local_runtime.access_dev import mint_token

    rt = memory_runtime
    first = await seed(rt, "acme", "contact:ada", "to agent-7")
    other_agent = first.model_copy(
        update={"episode_id": new_ulid(rt.clock.now() + 5), "instance_id": "agent-9"}
    )
    await EpisodicStore(rt.db, "acme").append_episode(other_agent)
    await seed(rt, "acme", "contact:bob", "not ada", offset=2)
    await seed(rt, "globex", "contact:ada", "globex's ada", offset=3)
    await prune_all(rt)

    path = f"/admin/tenants/acme/subjects/{quote('contact:ada')}/archive"
    answer = await client.send("GET", path, access=client.operator)
    assert answer.status == 200, answer.json()
    items = answer.json()["items"]
    assert [i["episode"]["instance_id"] for i in items] == ["agent-9", "agent-7"]
    assert {i["item_key"].split(":")[1] for i in items} == {"acme"}

    await grant(rt.bindings(), "globex", "email", "gx@example.com", "test")
    outsider = mint_token(rt.state.access, "gx@example.com", now=rt.clock.now())
    refused = await client.send("GET", path, access=outsider)
    assert refused.status == 403 and refused.json()["error"]["code"] == "tenant_forbidden"
    own = await client.send(
        "GET", f"/admin/tenants/globex/subjects/{quote('contact:ada')}/archive", access=outsider
    )
    assert [i["episode"]["content"] for i in own.json()["items"]] == ["globex's ada"]
