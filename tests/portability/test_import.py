"""Imports: bad input refused whole with a stable code (nothing changes), the dry run, the
write gate (policy refusals, sealing under the target's keys, events), idempotence, a crash in
the middle resumed by the CLI, mem0's records and plain texts, and the tenant's own shard."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_memory.directory import place_tenant
from agent_memory.lifecycle import portability
from agent_memory.memory import Memory
from local_runtime import cli
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.portability.conftest import Client, comparable, exported
from tests.portability.seed import seed_tenant

HEADER = {
    "record": "header",
    "format": "agent-memory-export",
    "version": 1,
    "tenant_id": "acme",
    "exported_at": 1,
    "personal": "opened",
}


def fact(n: int, **changes: Any) -> dict[str, Any]:
    return {
        "record": "fact",
        "tenant_id": "acme",
        "fact_id": f"01J00000000000000000FACT{n:02d}",
        "agent_type": "default",
        "subject": "ada",
        "predicate": "states",
        "object": "",
        "content": f"Ada visited city number {n}",
        "metadata": {},
        "confidence": 0.8,
        "source": "import",
        "learned_from_run_id": None,
        "embedding_provider": "x",
        "embedding_model": "x",
        "embedding_dimensions": 3,
        "content_hash": "0" * 64,
        "status": "active",
        "superseded_by": None,
        "valid_from": 1_700_000_000_000 + n,
        "valid_to": None,
        "created_at": 1_700_000_000_000,
        "updated_at": 1_700_000_000_000,
        "last_recalled_at": None,
        "recall_count": 0,
        **changes,
    }


async def post(client: Client, tenant: str, lines: list[Any], **query: Any) -> Any:
    body = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    return await client.send(
        "POST",
        f"/admin/tenants/{tenant}/imports",
        None,
        access=client.operator,
        query=query,
        raw=body.encode(),
    )


async def rows(runtime: LocalRuntime, tenant: str) -> list[str]:
    return comparable(await exported(runtime, tenant))


GOOD = [HEADER, fact(1), fact(2)]


@pytest.mark.parametrize(
    ("bad", "status", "code"),
    [
        ([*GOOD, "{not json"], 422, "malformed_line"),
        ([{**HEADER, "version": 2}, fact(1)], 422, "unsupported_format_version"),
        ([*GOOD, fact(3, tenant_id="globex")], 422, "record_tenant_mismatch"),
        (
            [
                *GOOD,
                fact(
                    3, metadata={"notes": "x" * 60_000} | {f"k{i}": "y" * 60_000 for i in range(4)}
                ),
            ],
            413,
            "record_too_large",
        ),
        ([fact(1)], 422, "missing_header"),
        ([*GOOD, fact(3, confidence="high")], 422, "invalid_record"),
    ],
)
async def test_bad_input_is_a_clear_error_and_changes_nothing(
    client: Client, memory_runtime: LocalRuntime, bad: list[Any], status: int, code: str
) -> None:
    before = await rows(memory_runtime, "acme")
    response = await post(client, "acme", bad)
    assert (response.status, response.json()["error"]["code"]) == (status, code)
    assert "line" in response.json()["error"]["details"]
    assert await rows(memory_runtime, "acme") == before


async def test_a_dry_run_says_what_would_be_written_merged_or_refused_and_writes_nothing(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    token = await client.mint("acme", "a1", tiers=["semantic"], scopes=["write"])
    await client.write(token, "a1", tier="semantic", key="ada", value="Ada visited city number 2")
    before = await rows(memory_runtime, "acme")
    lines = [*GOOD, fact(3, confidence=0.05)]
    dry = (await post(client, "acme", lines, dry_run="true")).json()
    assert dry["dry_run"] is True
    assert (dry["written"], dry["merged"], dry["refused"]) == (
        {"fact": 1},
        {"fact": 1},
        {"fact": 1},
    )
    [refusal] = dry["refusals"]
    assert (refusal["line"], refusal["code"]) == (4, "memory_write_denied")
    assert refusal["reasons"][0].startswith("confidence_too_low")
    assert await rows(memory_runtime, "acme") == before
    real = (await post(client, "acme", lines)).json()
    assert (real["written"], real["merged"], real["refused"]) == (
        dry["written"],
        dry["merged"],
        dry["refused"],
    )
    again = (await post(client, "acme", lines)).json()
    assert again["written"] == {} and again["unchanged"] == {"fact": 1}


async def test_importing_twice_changes_nothing_the_second_time(
    memory_runtime: LocalRuntime,
) -> None:
    await seed_tenant(memory_runtime, "acme")
    source = await exported(memory_runtime, "acme", "opened")
    lines = [json.dumps(r).encode() for r in source]
    importer = (await Memory.open(memory_runtime.bindings(), "globex")).importer()
    first = await importer.run(lambda: lines)
    after_first = await rows(memory_runtime, "globex")
    second = await importer.run(lambda: lines)
    assert second.written == {} and sum(second.unchanged.values()) == sum(first.written.values())
    assert await rows(memory_runtime, "globex") == after_first


async def test_sealed_fields_go_only_to_their_own_tenant_and_opened_ones_are_sealed_again(
    memory_runtime: LocalRuntime,
) -> None:
    await seed_tenant(memory_runtime, "acme")
    sealed = [json.dumps(r).encode() for r in await exported(memory_runtime, "acme")]
    importer = (await Memory.open(memory_runtime.bindings(), "globex")).importer()
    report = await importer.run(lambda: sealed)
    assert {(r.record, r.code) for r in report.refusals} == {
        ("fact", "sealed_for_another_tenant"),
        ("episode", "sealed_for_another_tenant"),
    }
    opened = [json.dumps(r).encode() for r in await exported(memory_runtime, "acme", "opened")]
    await importer.run(lambda: opened)
    db = (await Memory.open(memory_runtime.bindings(), "globex")).bindings.db
    assert db is not None
    stored = await db.prepare(
        "SELECT metadata FROM semantic_facts WHERE tenant_id = 'globex' AND metadata LIKE '%phone%'"
    ).first_value("metadata")
    assert "+44 1" not in str(stored) and "pii.1." in str(stored)  # sealed at rest, here
    [fact_row] = [
        r
        for r in await exported(memory_runtime, "globex", "opened")
        if r["record"] == "fact" and "phone" in r["metadata"]
    ]
    assert fact_row["metadata"]["phone"] == "+44 1"  # and globex's keys open it


async def test_an_import_lands_on_the_shard_the_tenant_lives_on(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    await place_tenant(memory_runtime.bindings(), "globex", "s2")
    lines = [{**HEADER, "tenant_id": "globex"}, fact(7, tenant_id="globex")]
    assert (await post(client, "globex", lines)).json()["written"] == {"fact": 1}
    for shard, expected in (("s2", 1), ("primary", 0)):
        count = (
            await memory_runtime.shard_db(shard)
            .prepare("SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = 'globex'")
            .first_value("n")
        )
        assert count == expected


async def test_mem0_records_and_plain_texts_become_facts_as_documented(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    mem0 = {
        "results": [
            {
                "id": "3c90c3cc-0d44-4b50-8888-8dd25736052a",
                "memory": "Prefers window seats",
                "user_id": "alex",
                "agent_id": "travel",
                "run_id": "trip-9",
                "hash": "abc",
                "metadata": {"category": "travel"},
                "created_at": "2024-05-01T10:00:00Z",
                "updated_at": "2024-05-02T10:00:00Z",
            },
            {"id": "b1", "memory": "Allergic to peanuts", "agent_id": "chef", "metadata": None},
        ]
    }
    report = (await post(client, "acme", [mem0], format="mem0")).json()
    assert report["written"] == {"fact": 2}
    texts = ['"The office moves to Leeds in June"', {"text": "Bo likes jazz", "subject": "bo"}]
    assert (await post(client, "acme", texts, format="text")).json()["written"] == {"fact": 2}
    again = (await post(client, "acme", [mem0], format="mem0")).json()
    assert again["written"] == {} and again["merged"] == {"fact": 2}
    facts = {
        r["content"]: r for r in await exported(memory_runtime, "acme") if r["record"] == "fact"
    }
    seat = facts["Prefers window seats"]
    assert (seat["subject"], seat["source"], seat["session_key"]) == (
        "alex",
        "import:mem0",
        "trip-9",
    )
    assert seat["metadata"] == {
        "category": "travel",
        "mem0": {
            "id": "3c90c3cc-0d44-4b50-8888-8dd25736052a",
            "user_id": "alex",
            "agent_id": "travel",
            "run_id": "trip-9",
            "hash": "abc",
        },
    }
    assert seat["valid_from"] == 1714557600000
    assert facts["Allergic to peanuts"]["subject"] == "chef"
    assert facts["The office moves to Leeds in June"]["subject"] == "general"
    assert facts["Bo likes jazz"]["subject"] == "bo"
    bad = await post(client, "acme", [{"memory": ""}], format="mem0")
    assert bad.json()["error"]["code"] == "invalid_record"


def test_the_cli_import_resumes_after_a_crash_in_the_middle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def runtime() -> LocalRuntime:
        return LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())

    async def prepare() -> list[str]:
        rt = runtime()
        await rt.migrate()
        await seed_tenant(rt, "acme")
        records = await exported(rt, "acme", "opened")
        clean = runtime()  # the reference: the same file imported without a crash
        await Memory.open(clean.bindings(), "ref")
        await (
            (await Memory.open(clean.bindings(), "ref"))
            .importer()
            .run(lambda: [json.dumps(r).encode() for r in records])
        )
        ref = comparable(await exported(clean, "ref", "opened"))
        await rt.close()
        (tmp_path / "acme.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return ref

    reference = asyncio.run(prepare())
    monkeypatch.setattr("local_runtime.commands.portability._open", lambda args: runtime())
    monkeypatch.setattr(portability, "IMPORT_CHUNK", 4)
    batches = portability.run_batches
    calls = {"n": 0}

    async def dies_on_the_third_chunk(db: Any, statements: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the process was killed")
        return await batches(db, statements)

    monkeypatch.setattr(portability, "run_batches", dies_on_the_third_chunk)
    args = ["import", "globex", str(tmp_path / "acme.jsonl")]
    with pytest.raises(RuntimeError, match="killed"):
        cli.main(args)
    capsys.readouterr()
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["resumed_at_line"] == 9  # after the two chunks the first run saved

    async def imported() -> list[str]:
        rt = runtime()
        try:
            return comparable(await exported(rt, "globex", "opened"))
        finally:
            await rt.close()

    assert asyncio.run(imported()) == reference
