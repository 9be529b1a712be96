"""Property (ADR-29): over random multi-tenant, multi-agent workloads, no memory token
ever reads, lists, searches or deletes memory outside its claims — on every route of the
memory API and every tier.

Each example opens a fresh runtime, seeds every (tenant, agent) with working, episodic and
semantic memory whose values name their owner, mints random tokens (tenant, agent, tiers,
scopes), then runs random operations with random tokens against random agents. Checked:
a call outside the claims is refused with its stable code; every item an accepted read
returns belongs to the token (working / episodic: its tenant and agent; semantic: its
tenant); and at the end every owner's keys are exactly what the accepted deletes left.
`MEMORY_PROPERTY_EXAMPLES` sets the example count (default 40).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings.ports.clock import FixedClock
from local_runtime.memory_tokens_dev import issue_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import KEYS, Client

EXAMPLES = int(os.environ.get("MEMORY_PROPERTY_EXAMPLES", "40"))
TENANTS = ("t1", "t2")
AGENTS = ("a1", "a2", "a3")
TIERS = ("working", "episodic", "semantic", "procedural")
WRITABLE = ("working", "episodic", "semantic")
DELETABLE = ("working", "episodic")
KEYS_PER_TIER = ("k0", "k1")


@dataclass(frozen=True)
class TokenSpec:
    tenant: str
    agent: str
    tiers: tuple[str, ...]
    scopes: tuple[str, ...]


def _subset(items: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(st.sampled_from(items), min_size=1, max_size=len(items), unique=True).map(tuple)


token_specs = st.builds(
    TokenSpec,
    tenant=st.sampled_from(TENANTS),
    agent=st.sampled_from(AGENTS),
    tiers=_subset(TIERS),
    scopes=_subset(("read", "write")),
)

operations = st.tuples(
    st.sampled_from(("list", "search", "search_all", "write", "delete")),
    st.integers(min_value=0, max_value=3),  # token index (modulo the token count)
    st.sampled_from(AGENTS),  # the agent in the path
    st.sampled_from(TIERS),
    st.sampled_from(KEYS_PER_TIER),
)


def owner_value(tenant: str, agent: str, key: str) -> str:
    return f"owner {tenant} {agent} {key} secret note"


def _owner(value: Any) -> tuple[str, str]:
    text = value if isinstance(value, str) else json.dumps(value)
    words = text.split()
    assert words[0] == "owner", text
    return words[1], words[2]


async def _workload(root: Path, specs: list[TokenSpec], ops: list[tuple[Any, ...]]) -> None:
    clock = FixedClock(float(int(time.time())))
    runtime = LocalRuntime.open(
        root, embedder=HashingEmbedder(), clock=clock, vars={"MEMORY_TOKEN_KEYS": json.dumps(KEYS)}
    )
    await runtime.migrate()
    client = Client(runtime)

    def mint(spec: TokenSpec) -> str:
        return issue_token(
            json.dumps(KEYS),
            spec.tenant,
            spec.agent,
            tiers=spec.tiers,
            scopes=spec.scopes,
            ttl=3600,
            now=clock.now(),
        )

    owners: dict[tuple[str, str], str] = {}
    expected: dict[tuple[str, str, str], set[str]] = {}
    for tenant in TENANTS:
        for agent in AGENTS:
            full = mint(TokenSpec(tenant, agent, TIERS, ("read", "write")))
            owners[(tenant, agent)] = full
            for tier in WRITABLE:
                for key in KEYS_PER_TIER:
                    value = owner_value(tenant, agent, key)
                    response = await client.write(full, agent, tier=tier, key=key, value=value)
                    assert response.status == 201, response.json()
                expected[(tenant, agent, tier)] = set(KEYS_PER_TIER)
    tokens = [mint(spec) for spec in specs]

    for kind, index, agent, tier, key in ops:
        spec, token = specs[index % len(specs)], tokens[index % len(tokens)]
        scope = "write" if kind in ("write", "delete") else "read"
        named_tier = None if kind == "search_all" else tier
        if kind == "list":
            response = await client.read(
                token,
                agent,
                tier=tier,
                **({"agent_type": "assistant"} if tier == "procedural" else {}),
            )
        elif kind in ("search", "search_all"):
            query: dict[str, Any] = {"query": "owner secret note"}
            if named_tier is not None:
                query["tier"] = named_tier
            if "procedural" in spec.tiers or tier == "procedural":
                query["agent_type"] = "assistant"
            response = await client.read(token, agent, **query)
        elif kind == "write":
            value = owner_value(spec.tenant, agent, key)
            response = await client.write(token, agent, tier=tier, key=key, value=value)
        else:
            response = await client.delete(token, agent, key, tier)

        body = response.json()
        if agent != spec.agent:
            assert (response.status, body["error"]["code"]) == (403, "agent_forbidden"), body
            continue
        if scope not in spec.scopes:
            assert (response.status, body["error"]["code"]) == (403, "scope_forbidden"), body
            continue
        if named_tier is not None and named_tier not in spec.tiers:
            assert (response.status, body["error"]["code"]) == (403, "tier_forbidden"), body
            continue
        if kind == "write":
            if tier == "procedural":
                assert response.status == 405, body
            else:
                assert response.status == 201, body
                expected[(spec.tenant, agent, tier)].add(key)
            continue
        if kind == "delete":
            if tier in DELETABLE:
                assert response.status == 200, body
                expected[(spec.tenant, agent, tier)].discard(key)
            else:
                assert response.status == 405, body
            continue
        assert response.status == 200, body
        assert set(body["tiers_searched"]) <= set(spec.tiers)
        for item in body["items"]:
            assert item["tier"] in spec.tiers, item
            if item["tier"] == "procedural":
                continue
            tenant, owner = _owner(item["value"])
            assert tenant == spec.tenant, (spec, item)
            if item["tier"] != "semantic":
                assert owner == spec.agent, (spec, item)

    # What every owner holds is exactly what the accepted writes and deletes left.
    for (tenant, agent, tier), keys in expected.items():
        if tier not in DELETABLE:
            continue
        listed = await client.read(owners[(tenant, agent)], agent, tier=tier, limit=100)
        assert {i["key"] for i in listed.json()["items"]} == keys, (tenant, agent, tier)
    await runtime.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    specs=st.lists(token_specs, min_size=1, max_size=4),
    ops=st.lists(operations, min_size=1, max_size=12),
)
def test_no_token_reaches_memory_outside_its_claims(
    specs: list[TokenSpec], ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_workload(Path(root) / "state", specs, ops))
