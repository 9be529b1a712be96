"""The namespace migration of the hot/warm/cold ADR through its phases, on the working memory
the agents use: legacy keys, dual read with read-repair, canonical writes with the backfill,
canonical only — and a rollback that loses nothing. The counters reach the daily brief."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_memory.lifecycle.brief import build_brief
from agent_memory.tiers.working import (
    NamespaceFlags,
    ReadCounts,
    WorkingMemory,
    backfill_all,
    flush_counts,
)
from local_runtime.access_dev import mint_token
from local_runtime.cli import main
from local_runtime.commands import namespace as namespace_command
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.lifecycle.conftest import NOW_MS
from worker.app import handle

LEGACY = "agent_working:acme:agent-7:"
CANONICAL = "agent-memory:acme:agent-7:working:"
PHASE0 = NamespaceFlags()
PHASE1 = NamespaceFlags(compat_read=True)
PHASE2 = NamespaceFlags(compat_read=True, write_canonical=True)
PHASE3 = NamespaceFlags(write_canonical=True)


def memory(rt: LocalRuntime, flags: NamespaceFlags, counts: ReadCounts | None = None) -> Any:
    return WorkingMemory(
        rt.kv, "acme", "agent-7", clock=rt.clock, namespace=flags, read_counts=counts
    )


async def raw(rt: LocalRuntime, name: str) -> Any:
    value = await rt.kv.get(name)
    return None if value is None else json.loads(value)


async def test_the_phases_move_keys_without_losing_or_staling_a_value(rt: LocalRuntime) -> None:
    # Phase 0 (both flags false, the default): ADR-043's legacy keys, as before.
    await memory(rt, PHASE0).set("plan", "draft")
    await memory(rt, PHASE0).set("notes", ["a"])
    assert await raw(rt, LEGACY + "plan") == "draft"
    assert await raw(rt, CANONICAL + "plan") is None

    # Phase 1 (compat read): canonical first, legacy on a miss, read-repair to canonical.
    counts = ReadCounts()
    dual = memory(rt, PHASE1, counts)
    assert await dual.get("plan") == "draft"
    assert await raw(rt, CANONICAL + "plan") == "draft"  # repaired
    assert (counts.canonical, counts.legacy, counts.miss) == (0, 1, 0)
    assert await dual.get("plan") == "draft"
    assert await dual.get("absent") is None
    assert (counts.canonical, counts.legacy, counts.miss) == (1, 1, 1)
    # Writes still go to the legacy key, and keep the repaired canonical copy fresh.
    await dual.set("plan", "v2")
    assert await raw(rt, LEGACY + "plan") == "v2"
    assert await raw(rt, CANONICAL + "plan") == "v2"
    await dual.set("todo", 1)  # never read: no canonical copy is made by a write
    assert await raw(rt, CANONICAL + "todo") is None
    # Listing merges both prefixes (no value is read, so nothing is repaired by it).
    assert [e.key for e in await dual.entries()] == ["notes", "plan", "todo"]

    # Phase 2 (canonical write + compat read): writes go canonical; the backfill copies
    # what was never read; reads still find everything.
    both = memory(rt, PHASE2)
    await both.set("plan", "v3")
    assert await raw(rt, CANONICAL + "plan") == "v3"
    assert await raw(rt, LEGACY + "plan") == "v2"  # legacy is left alone (it expires)
    report = await backfill_all(rt.kv, rt.clock, tenant="acme")
    assert (report.copied, report.already_canonical) == (2, 1)  # notes, todo; plan kept
    assert await raw(rt, CANONICAL + "plan") == "v3"  # never overwritten by the backfill
    assert await both.snapshot() == {"notes": ["a"], "plan": "v3", "todo": 1}

    # Rollback to phase 1: nothing canonical is deleted and the newest value still wins.
    back = memory(rt, PHASE1)
    assert await back.get("plan") == "v3"
    await back.set("plan", "v4")  # legacy write refreshes the canonical copy
    assert await memory(rt, PHASE2).get("plan") == "v4"
    assert await raw(rt, CANONICAL + "notes") == ["a"]

    # Phase 3 (canonical only): legacy keys are no longer read or written.
    only = memory(rt, PHASE3)
    await rt.kv.put(LEGACY + "stray", json.dumps("legacy only"))
    assert await only.get("stray") is None
    assert await only.snapshot() == {"notes": ["a"], "plan": "v4", "todo": 1}
    await only.set("plan", "v5")
    assert await raw(rt, LEGACY + "plan") == "v4"
    await only.delete("plan")  # an explicit delete removes both keys
    assert await raw(rt, CANONICAL + "plan") is None and await raw(rt, LEGACY + "plan") is None


async def test_canonical_items_carry_their_namespace_key(rt: LocalRuntime) -> None:
    await memory(rt, PHASE3).set("plan", "x")
    found = await rt.kv.get_with_metadata(CANONICAL + "plan")
    assert found.metadata is not None and found.metadata["ns"] == "agent-memory:acme:agent-7"


async def test_the_daily_brief_shows_canonical_and_legacy_hits(rt: LocalRuntime) -> None:
    await memory(rt, PHASE0).set("plan", "draft")
    counts = ReadCounts()
    dual = memory(rt, PHASE1, counts)
    await dual.get("plan")  # legacy hit, repaired
    await dual.get("plan")  # canonical hit
    await dual.get("plan")  # canonical hit
    await flush_counts(rt.db, "acme", counts, rt.clock.now())
    assert counts.total == 0  # flushed
    brief = await build_brief(rt.db, now_ms=NOW_MS, default_retention_days=90)
    [acme] = [t for t in brief.tenants if t.tenant_id == "acme"]
    assert (acme.namespace_canonical_hits, acme.namespace_legacy_hits) == (2, 1)
    assert brief.totals()["namespace_legacy_hits"] == 1
    assert any("legacy key" in w and "acme" in w for w in brief.warnings)
    # Reads are counted only under compat read: phase 3 reads add nothing.
    quiet = ReadCounts()
    await memory(rt, PHASE3, quiet).get("plan")
    assert quiet.total == 0


async def test_backfill_over_the_admin_route_is_bounded_and_never_deletes(
    rt: LocalRuntime,
) -> None:
    for i in range(3):
        await memory(rt, PHASE0).set(f"k{i}", i)
    await rt.kv.put("agent_working:globex:agent-7:k0", json.dumps("theirs"), expiration_ttl=3600)
    token = mint_token(rt.state.access, "dpo@example.com", now=rt.clock.now())
    path = "/admin/tenants/acme/namespace-backfill"
    first = await handle(build_request("POST", path, {"max_keys": 2}, token=token), rt.bindings())
    assert first.status == 200, first.body
    body = json.loads(first.body)
    assert (body["copied"], body["phase"]) == (2, "legacy") and body["next_cursor"]
    rest = await handle(
        build_request("POST", path, {"cursor": body["next_cursor"]}, token=token), rt.bindings()
    )
    assert json.loads(rest.body)["copied"] == 1 and json.loads(rest.body)["next_cursor"] is None
    for i in range(3):
        assert await raw(rt, f"{CANONICAL}k{i}") == i
        assert await raw(rt, f"{LEGACY}k{i}") == i  # nothing deleted
    assert await rt.kv.get("agent-memory:globex:agent-7:working:k0") is None  # acme only
    again = await handle(build_request("POST", path, token=token), rt.bindings())
    assert json.loads(again.body)["already_canonical"] == 3
    bad = await handle(build_request("POST", path, {"cursor": "é"}, token=token), rt.bindings())
    assert bad.status == 422 and json.loads(bad.body)["error"]["code"] == "invalid_cursor"
    denied = await handle(build_request("POST", path), rt.bindings())
    assert denied.status == 401


def test_backfill_and_placement_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    root = tmp_path / "state"

    async def seed() -> None:
        runtime = LocalRuntime.open(root)
        await runtime.migrate()
        await memory(runtime, PHASE0).set("plan", "draft")
        await runtime.close()

    asyncio.run(seed())
    assert main(["namespace-backfill", "--state", str(root)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["copied"] == 1 and "1 copied" in err
    assert main(["namespace-backfill", "--state", str(root)]) == 0
    assert json.loads(capsys.readouterr()[0])["already_canonical"] == 1
    monkeypatch.setenv("MEMORY_PLACEMENT", "{}")
    assert main(["placement", "--json", "--state", str(root)]) == 0
    table = json.loads(capsys.readouterr()[0])
    assert table["namespace_phase"] == "legacy"
    assert [r["kind"] for r in table["placement"]] == ["working", "episode", "fact", "log"]
    assert namespace_command.register is not None
