"""The tenant directory (issue 29): each tenant lives on one of several D1 databases and
Vectorize indexes, found once per request, and never reaches another."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_memory import directory
from agent_memory.agent.memory_tools import McpMemoryTools
from agent_memory.directory import (
    forget_cached_homes,
    home_key,
    home_of,
    homes,
    on_shard,
    place_tenant,
    tenant_tables,
)
from agent_memory.memory import Memory
from bindings.environment import CONTROL_PLANE_TABLES
from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import Client
from tests.placement.conftest import Statements
from worker.cron import DAILY_BRIEF, WEEKLY_PRUNE, run_scheduled

A, B = "tenant-on-primary", "tenant-on-s2"

# Statements that may name a tenant on a database it does not live on: the control plane
# and the directory (primary only), and the placement's check that the primary holds no
# rows of a tenant written before there were shards.
ALLOWED = (*CONTROL_PLANE_TABLES, "tenant_directory", "tenant_moves", "SELECT (EXISTS")


def _tenant_data(statements: list[str]) -> list[str]:
    return [sql for sql in statements if not any(name in sql for name in ALLOWED)]


async def _use_every_tier(client: Client, runtime: LocalRuntime, tenant: str) -> None:
    """What a tenant's users and operators do: the memory API on every tier, the MCP memory
    tools, an agent turn, the inspector, lifecycle settings and a subject erase."""
    token = await client.mint(tenant, "agent")
    for tier, key, value in (
        ("working", "page", {"url": "/login"}),
        ("episodic", "sso", f"{tenant} saw the SSO button"),
        ("semantic", "site", f"{tenant} logs in with SSO"),
    ):
        written = await client.write(token, "agent", tier=tier, key=key, value=value)
        assert written.status == 201, written.json()
    for tier in ("working", "episodic", "semantic"):
        assert (await client.read(token, "agent", tier=tier)).status == 200
    found = (await client.read(token, "agent", query="sso login")).json()["items"]
    assert {i["tier"] for i in found} >= {"episodic", "semantic"}
    tools = McpMemoryTools(runtime.bindings())
    await tools.call(tenant, "store_memory", {"content": f"{tenant} prefers tea"})
    recalled = await tools.call(tenant, "recall_memory", {"query": "tea", "top_k": 5})
    assert "tea" in json.dumps(recalled["results"])
    run = await client.send(
        "POST", f"/v1/agents/{tenant}/assistant/run", {"input": "hello"}, access=client.operator
    )
    assert run.status == 200, run.json()
    for path in ("facts", "events", "lifecycle"):
        answer = await client.send("GET", f"/admin/tenants/{tenant}/{path}", access=client.operator)
        assert answer.status == 200, (path, answer.json())
    erased = await client.send(
        "DELETE", f"/admin/tenants/{tenant}/subjects/nobody@example.com", access=client.operator
    )
    assert erased.status == 200, erased.json()


async def test_tenants_on_different_databases_never_reach_each_others_database(
    client: Client, runtime: LocalRuntime, statements: Statements
) -> None:
    assert [s.name for s in runtime.shards] == ["primary", "s2"]
    assert await place_tenant(runtime.bindings(), B, "s2") == "s2"
    for tenant in (A, B):
        await _use_every_tier(client, runtime, tenant)
    for cron in (DAILY_BRIEF, WEEKLY_PRUNE):
        await run_scheduled(cron, runtime.clock.now(), runtime.bindings())

    assert await homes(runtime.bindings()) == {A: "primary", B: "s2"}
    # Every statement that named a tenant ran on that tenant's database...
    assert _tenant_data(statements.naming("primary", B)) == []
    assert _tenant_data(statements.naming("s2", A)) == []
    assert statements.naming("s2", B) and statements.naming("primary", A)
    # ...so each database holds rows of its own tenant only, and each index its vectors.
    for shard, own, other in (("primary", A, B), ("s2", B, A)):
        db = runtime.shard_db(shard)
        held: dict[str, int] = {}
        for table in await tenant_tables(db, shard):
            sql = f'SELECT COUNT(*) AS n FROM "{table.name}" WHERE tenant_id = ?'
            for tenant in (own, other):
                n = int(await db.prepare(sql).bind(tenant).first_value("n") or 0)
                held[tenant] = held.get(tenant, 0) + n
        assert held[other] == 0 and held[own] > 0, (shard, held)
        index = runtime.shard_vectors(shard)
        stored = await index.get_by_ids(list(index._records))
        tenants = {(v.metadata or {}).get("tenant_id") for v in stored}
        assert tenants == {own}, (shard, tenants)


async def test_new_tenants_go_where_most_space_is_free(tmp_path: Path) -> None:
    # Databases of 2 MB: the primary filled by one tenant leaves the second shard freer.
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), vars={"D1_DATABASE_MAX_BYTES": "2000000"}
    )
    await runtime.migrate()
    bindings = runtime.bindings()
    assert await home_of(bindings, "first") == "primary"  # equally free: the first shard
    memory = await Memory.open(bindings, "first")
    await memory.semantic().learn_many([{"content": f"fact number {n} " * 20} for n in range(300)])
    assert await home_of(runtime.bindings(), "second") == "s2"
    assert await homes(bindings) == {"first": "primary", "second": "s2"}
    await runtime.close()


async def test_a_fuller_vector_index_counts_as_less_free_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two databases equally free (both far from 10 GB), but the primary's index is 60 %
    full (of a limit made 100 vectors here): the next tenant goes to the other shard."""
    monkeypatch.setattr(directory, "VECTORIZE_MAX_VECTORS", 100)
    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    await runtime.migrate()
    bindings = runtime.bindings()
    assert await home_of(bindings, "first") == "primary"
    memory = await Memory.open(bindings, "first")
    await memory.semantic().learn_many([{"content": f"fact number {n}"} for n in range(60)])
    assert await home_of(runtime.bindings(), "second") == "s2"
    await runtime.close()


async def test_a_tenant_with_rows_on_the_primary_stays_there(tmp_path: Path) -> None:
    """Rows written before the deployment had shards (no directory row) keep their tenant on
    the primary, whatever the free space says."""
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), vars={"D1_DATABASE_MAX_BYTES": "2000000"}
    )
    await runtime.migrate()
    bindings = runtime.bindings()
    filler = await Memory.open(bindings, "filler")
    await filler.semantic().learn_many([{"content": f"filler {n} " * 20} for n in range(300)])
    # An old deployment's write: straight into the primary, no directory row.
    single = Memory(on_shard(bindings, "primary"), "legacy")
    await single.semantic().learn({"content": "written before there were shards"})
    forget_cached_homes()
    assert await home_of(runtime.bindings(), "legacy") == "primary"
    assert await home_of(runtime.bindings(), "newcomer") == "s2"
    with pytest.raises(Exception, match=r"already_placed|is on shard"):
        await place_tenant(runtime.bindings(), "legacy", "s2")
    await runtime.close()


async def test_racing_first_requests_place_a_tenant_once(runtime: LocalRuntime) -> None:
    async def resolve() -> str:
        forget_cached_homes()  # each as a different isolate
        return await home_of(runtime.bindings(), "racer")

    found = await asyncio.gather(*(resolve() for _ in range(8)))
    assert set(found) == {"primary"}
    rows = await runtime.db.prepare("SELECT COUNT(*) AS n FROM tenant_directory").first()
    assert rows == {"n": 1}


async def test_the_home_is_read_from_the_isolate_then_kv_then_the_directory(
    runtime: LocalRuntime, clock: FixedClock, statements: Statements
) -> None:
    await place_tenant(runtime.bindings(), B, "s2")
    forget_cached_homes()
    kv_reads: list[str] = []
    get = runtime.kv.get

    async def counted(key: str) -> str | None:
        kv_reads.append(key)
        return await get(key)

    runtime.kv.get = counted  # type: ignore[method-assign]
    directory = lambda: [s for s in statements.naming("primary", B) if "tenant_directory" in s]  # noqa: E731
    before = len(directory())
    assert await home_of(runtime.bindings(), B) == "s2"  # KV (place_tenant wrote it)
    assert kv_reads == [home_key(B)] and len(directory()) == before
    assert await home_of(runtime.bindings(), B) == "s2"  # this isolate's cache: no read
    assert kv_reads == [home_key(B)]
    clock.advance(31)
    await runtime.kv.delete(home_key(B))  # KV lost it: the directory answers, KV is refilled
    assert await home_of(runtime.bindings(), B) == "s2"
    assert len(directory()) == before + 1
    await runtime.background.drain()
    assert await get(home_key(B)) == "s2"


async def test_memory_on_the_primary_bindings_is_refused_when_there_are_shards(
    runtime: LocalRuntime,
) -> None:
    with pytest.raises(RuntimeError, match=r"Memory\.open"):
        Memory(runtime.bindings(), A)
    opened = await Memory.open(runtime.bindings(), A)
    assert opened.bindings.shard == "primary"


@pytest.mark.parametrize(
    "raw",
    ["s2", "s2=DB_2", "S2=DB_2:VECTORIZE_2", "s2=DB:VECTORIZE_2", "primary=DB_2:VECTORIZE_2"],
)
def test_a_bad_shard_list_is_refused_at_startup(raw: str) -> None:
    with pytest.raises(ValueError, match="MEMORY_SHARDS"):
        Settings.from_vars({"MEMORY_SHARDS": raw})


def test_the_shard_list_names_the_primary_first() -> None:
    settings = Settings.from_vars({"MEMORY_SHARDS": "s2=DB_2:VECTORIZE_2, s3=DB_3:VECTORIZE_3"})
    assert settings.shards == (
        ("primary", "DB", "VECTORIZE"),
        ("s2", "DB_2", "VECTORIZE_2"),
        ("s3", "DB_3", "VECTORIZE_3"),
    )


async def test_shards_report_their_size_and_tenants_to_a_platform_admin(
    client: Client, runtime: LocalRuntime
) -> None:
    await place_tenant(runtime.bindings(), B, "s2")
    answer = await client.send("GET", "/admin/shards", access=client.operator)
    assert answer.status == 200, answer.json()
    shards = {s["shard"]: s for s in answer.json()["shards"]}
    assert set(shards) == {"primary", "s2"}
    assert shards["s2"]["tenants"] == 1 and shards["s2"]["bytes"] > 0
    assert shards["primary"]["max_bytes"] == 10 * 1024**3
    tenant_admin = mint_token(
        runtime.state.access, "tenant-admin@example.com", now=runtime.clock.now()
    )
    refused = await client.send("GET", "/admin/shards", access=tenant_admin)
    assert refused.status == 403
