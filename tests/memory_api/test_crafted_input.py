"""Issue 26, items 3 and 4: crafted numbers and keys are refused at the boundary with a JSON
422 and a stable code, never a 500 from storage (D1 refuses integers beyond 2^53 as a
BigInt), and nothing is written; a key is refused at write when DELETE could not address it.
"""

from __future__ import annotations

from typing import Any

import pytest

from http_messages import HttpResponse
from tests.memory_api.conftest import Client

TENANT = "acme"
AGENT = "agent-a"
ALL_TIERS = ["working", "episodic", "semantic"]


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
