"""Property (ADR-29): over random multi-tenant, multi-agent workloads, no memory token
ever reads, lists, searches or deletes memory outside its claims — on every route of the
memory API and every tier.

Every (tenant, agent) is seeded once, through the memory API, with working, episodic and
semantic memory whose values name their owner; each example opens a fresh runtime on a copy
of that state, mints random tokens (tenant, agent, tiers, scopes), then runs random
operations with random tokens against random agents. An agent is
a (type, id) pair: two types share ids (issue 25). Checked: a call outside the claims is
refused with its stable code; every item an accepted read returns belongs to the token
(working / episodic: its tenant and agent, type included; semantic: its tenant); and at the
end every owner's keys are exactly what the accepted deletes left.
`MEMORY_PROPERTY_EXAMPLES` sets the example count (default 30).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings.ports.clock import FixedClock
from local_runtime.memory_tokens_dev import issue_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import KEYS, Client

EXAMPLES = int(os.environ.get("MEMORY_PROPERTY_EXAMPLES", "30"))
TENANTS = ("t1", "t2")
AGENTS = ("a1", "a2", "a3")
TYPES = ("assistant", "sdr")
TIERS = ("working", "episodic", "semantic", "procedural")
WRITABLE = ("working", "episodic", "semantic")
DELETABLE = ("working", "episodic")
KEYS_PER_TIER = ("k0", "k1")


@dataclass(frozen=True)
class TokenSpec:
    tenant: str
    agent_type: str
    agent: str
    tiers: tuple[str, ...]
    scopes: tuple[str, ...]


def _subset(items: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(st.sampled_from(items), min_size=1, max_size=len(items), unique=True).map(tuple)


token_specs = st.builds(
    TokenSpec,
    tenant=st.sampled_from(TENANTS),
    agent_type=st.sampled_from(TYPES),
    agent=st.sampled_from(AGENTS),
    tiers=_subset(TIERS),
    scopes=_subset(("read", "write")),
)

operations = st.tuples(
    st.sampled_from(("list", "search", "search_all", "write", "delete")),
    st.integers(min_value=0, max_value=3),  # token index (modulo the token count)
    st.sampled_from(AGENTS),  # the agent in the path
    st.sampled_from(TYPES),  # the agent type a procedural read names
    st.sampled_from(TIERS),
    st.sampled_from(KEYS_PER_TIER),
)


def owner_value(tenant: str, agent_type: str, agent: str, key: str) -> str:
    return f"owner {tenant} {agent_type} {agent} {key} secret note"


def _owner(value: Any) -> tuple[str, str, str]:
    text = value if isinstance(value, str) else json.dumps(value)
    words = text.split()
    assert words[0] == "owner", text
    return words[1], words[2], words[3]


def _mint(spec: TokenSpec, now: float) -> str:
    return issue_token(
        json.dumps(KEYS),
        spec.tenant,
        spec.agent,
        tiers=spec.tiers,
        scopes=spec.scopes,
        ttl=3600,
        agent_type=spec.agent_type,
        now=now,
    )


def _open(root: Path, now: float) -> LocalRuntime:
    return LocalRuntime.open(
        root,
        embedder=HashingEmbedder(),
        clock=FixedClock(now),
        vars={"MEMORY_TOKEN_KEYS": json.dumps(KEYS)},
    )


@dataclass(frozen=True)
class Seeded:
    """A state folder where every (tenant, agent) holds its memory; its clock and owners."""

    folder: Path
    now: float
    owners: dict[tuple[str, str, str], str]  # an all-tiers, read-write token of each owner
    keys: dict[tuple[str, str, str, str], frozenset[str]]  # what each owner holds, by tier


async def _seed(root: Path) -> Seeded:
    """Write working, episodic and semantic memory naming its owner for every agent of
    every tenant, through the memory API; then close the stores so the folder can be
    copied."""
    now = float(int(time.time()))
    runtime = _open(root, now)
    await runtime.migrate()
    client = Client(runtime)
    owners: dict[tuple[str, str, str], str] = {}
    keys: dict[tuple[str, str, str, str], frozenset[str]] = {}
    for tenant in TENANTS:
        for agent_type in TYPES:
            for agent in AGENTS:
                full = _mint(TokenSpec(tenant, agent_type, agent, TIERS, ("read", "write")), now)
                owners[(tenant, agent_type, agent)] = full
                for tier in WRITABLE:
                    for key in KEYS_PER_TIER:
                        value = owner_value(tenant, agent_type, agent, key)
                        written = await client.write(full, agent, tier=tier, key=key, value=value)
                        assert written.status == 201, written.json()
                    keys[(tenant, agent_type, agent, tier)] = frozenset(KEYS_PER_TIER)
    await runtime.close()
    runtime.kv.close()
    for shard in runtime.shards:
        shard.db.close()  # type: ignore[attr-defined]
        shard.vectors.close()  # type: ignore[attr-defined]
    return Seeded(root, now, owners, keys)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """Seeded once: every example starts from a copy (the seeding is the same for all, and
    was most of each example's time)."""
    return asyncio.run(_seed(tmp_path_factory.mktemp("isolation") / "state"))


async def _workload(
    root: Path, seeded: Seeded, specs: list[TokenSpec], ops: list[tuple[Any, ...]]
) -> None:
    shutil.copytree(seeded.folder, root)
    runtime = _open(root, seeded.now)
    await runtime.migrate()
    client = Client(runtime)

    def mint(spec: TokenSpec) -> str:
        return _mint(spec, seeded.now)

    owners = seeded.owners
    expected = {owner: set(keys) for owner, keys in seeded.keys.items()}
    tokens = [mint(spec) for spec in specs]

    for kind, index, agent, named_type, tier, key in ops:
        spec, token = specs[index % len(specs)], tokens[index % len(tokens)]
        scope = "write" if kind in ("write", "delete") else "read"
        named_tier = None if kind == "search_all" else tier
        named: str | None = None  # the agent type the call names (procedural reads)
        if kind == "list":
            named = named_type if tier == "procedural" else None
            query: dict[str, Any] = {"tier": tier}
            if named is not None:
                query["agent_type"] = named
            response = await client.read(token, agent, **query)
        elif kind in ("search", "search_all"):
            query = {"query": "owner secret note"}
            if named_tier is not None:
                query["tier"] = named_tier
            if "procedural" in spec.tiers or tier == "procedural":
                named = query["agent_type"] = named_type
            response = await client.read(token, agent, **query)
        elif kind == "write":
            value = owner_value(spec.tenant, spec.agent_type, agent, key)
            response = await client.write(token, agent, tier=tier, key=key, value=value)
        else:
            response = await client.delete(token, agent, key, tier)

        body = response.json()
        if agent != spec.agent or named not in (None, spec.agent_type):
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
                expected[(spec.tenant, spec.agent_type, agent, tier)].add(key)
            continue
        if kind == "delete":
            if tier in DELETABLE:
                assert response.status == 200, body
                expected[(spec.tenant, spec.agent_type, agent, tier)].discard(key)
            else:
                assert response.status == 405, body
            continue
        assert response.status == 200, body
        assert set(body["tiers_searched"]) <= set(spec.tiers)
        for item in body["items"]:
            assert item["tier"] in spec.tiers, item
            if item["tier"] == "procedural":
                continue
            tenant, owner_type, owner = _owner(item["value"])
            assert tenant == spec.tenant, (spec, item)
            if item["tier"] != "semantic":
                assert (owner_type, owner) == (spec.agent_type, spec.agent), (spec, item)

    # What every owner holds is exactly what the accepted writes and deletes left.
    for (tenant, agent_type, agent, tier), keys in expected.items():
        if tier not in DELETABLE:
            continue
        owner_token = owners[(tenant, agent_type, agent)]
        listed = await client.read(owner_token, agent, tier=tier, limit=100)
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
    seeded: Seeded, specs: list[TokenSpec], ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_workload(Path(root) / "state", seeded, specs, ops))
