"""The memory checks: working and episodic writes read back, a fact found by a search; and
the memory token they use (given, or minted with the Access credential)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from local_runtime.commands.smoke.session import (
    ACCESS_REFUSALS,
    Problem,
    Session,
    Skip,
    describe_access_refusal,
    describe_response,
    json_of,
)


def prepare_memory_token(s: Session) -> None:
    """Use the given memory token, or mint one with the Access credential."""
    if s.memory_token or not s.creds.has_access:
        return
    tenant, agent = s.agent_tenant, s.o.instance
    response = s.request(
        "POST",
        f"/admin/tenants/{quote(tenant, safe='')}/memory-tokens",
        json_body={
            "agent_id": agent,
            "tiers": ["working", "episodic", "semantic"],
            "scopes": ["read", "write"],
            "ttl_seconds": 600,
        },
    )
    data = json_of(response)
    if response.status_code in ACCESS_REFUSALS:
        s.access_refused = describe_access_refusal(response)
    if response.status_code != 201 or not isinstance(data, dict) or not data.get("token"):
        s.memory_refused = (
            "minting a memory token through POST /admin/tenants/{tenant}/memory-tokens "
            f"failed: {describe_access_refusal(response)}"
        )
        return
    s.memory_token = str(data["token"])
    s.creds.sources.setdefault("memory_token", "minted with the Access credential")
    s.minted_jti = str(data.get("jti") or "") or None
    s.claims = {
        "tenant": data.get("tenant", tenant),
        "agent_id": data.get("agent_id", agent),
        "tiers": data.get("tiers", []),
        "scopes": data.get("scopes", []),
    }


def require_memory(s: Session, tier: str) -> None:
    if s.memory_refused:
        raise Problem(s.memory_refused)
    if not s.memory_token:
        raise Skip(
            "no memory token: give --memory-token / $AGENT_MEMORY_MEMORY_TOKEN, or an "
            "Access credential to mint one"
        )
    tiers, scopes = s.claims.get("tiers"), s.claims.get("scopes")
    if isinstance(tiers, list) and tiers and tier not in tiers:
        raise Skip(f"the memory token has no {tier} tier (it has {', '.join(tiers)})")
    if isinstance(scopes, list) and scopes and "write" not in scopes:
        raise Skip("the memory token may not write (scope 'write')")


def memory_call(
    s: Session, method: str, path: str = "", **kwargs: Any
) -> tuple[httpx.Response, Any]:
    route = f"/api/v1/memory/{quote(s.memory_agent, safe='')}{path}"
    response = s.request(method, route, headers=s.memory_headers(), **kwargs)
    if response.status_code in (401, 403):
        # The token itself is refused: every later memory call would be too.
        s.memory_refused = f"the memory token was refused: {describe_response(response)}"
        raise Problem(s.memory_refused)
    return response, json_of(response)


def write(s: Session, tier: str, key: str, value: Any, ttl: int) -> dict[str, Any]:
    body = {"tier": tier, "key": key, "value": value, "ttl": ttl}
    response, data = memory_call(s, "POST", json_body=body)
    if response.status_code != 201 or not isinstance(data, dict):
        raise Problem(f"the {tier} write failed: {describe_response(response)}")
    item = data.get("item")
    return item if isinstance(item, dict) else {}


def find_listed(s: Session, tier: str, key: str, pages: int = 5) -> dict[str, Any] | None:
    cursor: str | None = None
    for _ in range(pages):
        params: dict[str, Any] = {"tier": tier, "limit": 100}
        if cursor:
            params["cursor"] = cursor
        response, data = memory_call(s, "GET", params=params)
        if response.status_code != 200 or not isinstance(data, dict):
            raise Problem(f"listing {tier} failed: {describe_response(response)}")
        for item in data.get("items") or []:
            if isinstance(item, dict) and item.get("key") == key:
                return item
        cursor = data.get("next_cursor")
        if not cursor:
            return None
    return None


def check_working(s: Session) -> str:
    require_memory(s, "working")
    key, value = f"{s.marker}-working", {"smoke": s.marker, "n": 1}
    write(s, "working", key, value, ttl=60)
    s.written_keys.append(("working", key))
    item = s.until(lambda: find_listed(s, "working", key))
    if item is None:
        raise Problem(f"wrote {key}, but it was not read back within {s.o.wait:g} s")
    if item.get("value") != value:
        raise Problem(f"read back {key} with another value: {item.get('value')!r}")
    return f"wrote and read back {key} (tenant {s.memory_tenant}, agent {s.memory_agent})"


def check_episodic(s: Session) -> str:
    require_memory(s, "episodic")
    key = f"{s.marker}-episode"
    write(s, "episodic", key, f"smoke check episode {s.marker}", ttl=600)
    s.written_keys.append(("episodic", key))
    item = s.until(lambda: find_listed(s, "episodic", key))
    if item is None:
        raise Problem(f"wrote episode {key}, but the listing did not show it")
    return f"wrote episode {key} and found it in the episodic listing"


def check_semantic(s: Session) -> str:
    require_memory(s, "semantic")
    if not s.creds.has_access:
        raise Skip(
            "a fact can only be deleted by an operator (DELETE /admin/tenants/{t}/facts/"
            "{id}), so this check needs an Access credential to clean up after itself"
        )
    text = f"The smoke check {s.marker} stored this fact."
    item = write(s, "semantic", s.marker, text, ttl=3600)
    fact_id = str((item.get("metadata") or {}).get("fact_id") or "")
    if not fact_id:
        raise Problem("the semantic write answered no fact_id")
    s.written_facts.append((s.memory_tenant, fact_id))
    s.erase_tenants.add(s.memory_tenant)
    query = f"smoke check {s.marker}"

    def search() -> dict[str, Any] | None:
        params = {"tier": "semantic", "query": query, "limit": 10}
        response, data = memory_call(s, "GET", params=params)
        if response.status_code != 200 or not isinstance(data, dict):
            raise Problem(f"the semantic search failed: {describe_response(response)}")
        for found in data.get("items") or []:
            if isinstance(found, dict) and (found.get("metadata") or {}).get("fact_id") == fact_id:
                return found
        return None

    found = s.until(search)
    if found is None:
        raise Problem(f"wrote fact {fact_id}, but a search did not find it in {s.o.wait:g} s")
    breakdown = found.get("score_breakdown") or {}
    channels = sorted((breakdown.get("channels") or {}).keys())
    via = f" via {', '.join(channels)}" if channels else ""
    return f"wrote fact {fact_id}; search found it with score {found.get('score')}{via}"
