"""Issue 26, items 3 and 4: crafted numbers and keys are refused at the boundary with a JSON
422 and a stable code, never a 500 from storage (D1 refuses integers beyond 2^53 as a
BigInt), and nothing is written; a key is refused at write when DELETE could not address it.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.cursors import encode_cursor_value
from http_messages import HttpResponse
from tests.memory_api.conftest import Client

TENANT = "acme"
AGENT = "agent-a"
ALL_TIERS = ["working", "episodic", "semantic"]
BEYOND_JS = 2**70  # what the audit sent: a BigInt in JavaScript, refused by D1


def code(response: HttpResponse) -> str:
    assert response.headers.get("content-type") == "application/json"
    value: str = response.json()["error"]["code"]
    return value


async def writer(client: Client) -> str:
    return await client.mint(TENANT, AGENT, tiers=ALL_TIERS, scopes=["read", "write"])


async def items(client: Client, token: str, tier: str) -> list[Any]:
    response = await client.read(token, AGENT, tier=tier)
    assert response.status == 200, response.json()
    found: list[Any] = response.json()["items"]
    return found


@pytest.mark.parametrize(
    ("path", "cursor"),
    [
        ("/admin/agents/acme/runs", {"s": BEYOND_JS, "r": "01J0000000000000000000000"}),
        ("/admin/agents/acme/runs", {"s": True, "r": "x"}),
        ("/admin/tenants/acme/facts", {"s": BEYOND_JS, "r": "x"}),
        ("/admin/tenants/acme/events", {"s": -BEYOND_JS, "r": "x"}),
        ("/admin/tenants/acme/subjects/bob/archive", {"c": BEYOND_JS, "e": "x"}),
    ],
)
async def test_admin_listing_cursors_beyond_storage_integers_are_422(
    client: Client, path: str, cursor: dict[str, Any]
) -> None:
    response = await client.send(
        "GET", path, access=client.operator, query={"cursor": encode_cursor_value(cursor)}
    )
    assert (response.status, code(response)) == (422, "invalid_cursor")


async def test_the_agent_archive_cursor_beyond_storage_integers_is_422(client: Client) -> None:
    token = await writer(client)
    cursor = encode_cursor_value({"c": BEYOND_JS, "e": "x"})
    response = await client.send(
        "GET", f"/api/v1/memory/{AGENT}/archive", token=token, query={"cursor": cursor}
    )
    assert (response.status, code(response)) == (422, "invalid_cursor")


@pytest.mark.parametrize("name", ["since", "until"])
async def test_event_time_filters_beyond_year_9999_are_422(client: Client, name: str) -> None:
    response = await client.send(
        "GET", "/admin/tenants/acme/events", access=client.operator, query={name: BEYOND_JS}
    )
    assert (response.status, code(response)) == (422, "validation_error")
    assert response.json()["error"]["details"]["problems"][0]["field"] == name


async def test_a_candidate_threshold_beyond_a_promotion_s_is_422(client: Client) -> None:
    response = await client.send(
        "GET",
        "/admin/agents/acme/assistant/pack-candidates",
        access=client.operator,
        query={"min_pulls": BEYOND_JS},
    )
    assert (response.status, code(response)) == (422, "validation_error")


@pytest.mark.parametrize("name", ["valid_from_after", "valid_from_before"])
@pytest.mark.parametrize("tier", [None, "semantic"])
async def test_a_valid_from_window_beyond_year_9999_is_422(
    client: Client, name: str, tier: str | None
) -> None:
    token = await writer(client)
    query = {"query": "tea", name: "6.4e39", **({"tier": tier} if tier else {})}
    response = await client.read(token, AGENT, **query)
    assert (response.status, code(response)) == (422, "validation_error")


@pytest.mark.parametrize("tier", ALL_TIERS)
async def test_a_ttl_of_1e15_seconds_is_422_and_writes_nothing(client: Client, tier: str) -> None:
    token = await writer(client)
    response = await client.write(token, AGENT, tier=tier, key="bob", value="likes tea", ttl=10**15)
    assert (response.status, code(response)) == (422, "validation_error")
    assert await items(client, token, tier) == []


async def test_a_century_long_semantic_ttl_is_still_accepted(client: Client) -> None:
    token = await writer(client)
    response = await client.write(
        token, AGENT, tier="semantic", key="bob", value="bob likes tea", ttl=100 * 365 * 86_400
    )
    assert response.status == 201, response.json()


@pytest.mark.parametrize("tier", ALL_TIERS)
@pytest.mark.parametrize("key", ["k\n", "a:b\n", ".", ".."])
async def test_a_key_delete_could_not_address_is_refused_at_write(
    client: Client, tier: str, key: str
) -> None:
    """Issue 26 item 4: `"k\\n"` passed `re.match("^…$")` and was written (a 500 on the
    working tier), and its DELETE was then refused as an invalid path."""
    token = await writer(client)
    response = await client.write(token, AGENT, tier=tier, key=key, value="bob likes tea")
    assert (response.status, code(response)) == (422, "invalid_key")
    assert await items(client, token, tier) == []


@pytest.mark.parametrize("tier", ["working", "episodic"])
async def test_every_key_a_write_accepts_can_be_deleted(client: Client, tier: str) -> None:
    token = await writer(client)
    key = "user@example.com:pref.v1+x_y-z"
    assert (await client.write(token, AGENT, tier=tier, key=key, value="v")).status == 201
    deleted = await client.delete(token, AGENT, key, tier)
    assert deleted.status == 200, deleted.json()
    assert deleted.json()["deleted"] is True
    assert await items(client, token, tier) == []
