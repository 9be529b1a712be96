"""Exports: the format and its published schema, what never leaves, sealed and opened personal
data, a crash in the middle, the cron that finishes and the one that expires them, the CLI's
progress bar, and a subject's export against its erase."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agent_memory.lifecycle import portability
from agent_memory.lifecycle.portability import Jobs, json_schema
from agent_memory.memory import Memory
from bindings.ports.clock import FixedClock
from local_runtime import cli
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.conftest import PROJECT_ROOT
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import KEYS
from tests.portability.conftest import Client, export_lines, exported
from tests.portability.seed import seed_tenant
from worker.cron import DAILY_BRIEF, MOVE_STEPS, run_scheduled

SCHEMA = PROJECT_ROOT / "docs" / "export-format.schema.json"


def test_the_published_schema_is_the_formats() -> None:
    """Regenerate with the command in docs/portability.md after changing a record."""
    assert json.loads(SCHEMA.read_text()) == json_schema()


async def test_an_export_through_the_routes_matches_the_schema_and_holds_no_secret(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    await seed_tenant(memory_runtime, "acme")
    saved = await client.send(
        "POST",
        "/admin/tenants/acme/webhooks",
        {"url": "https://hooks.example.com/x"},
        access=client.operator,
    )
    started = await client.send("POST", "/admin/tenants/acme/exports", access=client.operator)
    assert started.status == 202, started.json()
    records = await export_lines(client, "acme", started.json()["job_id"])
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for record in records:
        validator.validate(record)
    header, *rest = records
    counts: dict[str, int] = {}
    for record in rest:
        counts[record["record"]] = counts.get(record["record"], 0) + 1
    assert header["counts"] == counts and header["personal"] == "sealed"
    text = json.dumps(records)
    kek = memory_runtime.settings.pii_keks
    assert kek is not None
    secrets = [
        saved.json()["secret"],
        *KEYS.values(),
        base64.b64encode(kek.newest[1]).decode(),
        "subject_data_keys",
        "wrapped",
    ]
    assert not [s for s in secrets if s in text]
    listed = await client.send("GET", "/admin/tenants/acme/exports", access=client.operator)
    [job] = listed.json()["exports"]
    assert job["status"] == "complete" and job["progress"]["records"] == len(rest)


async def test_personal_data_leaves_sealed_unless_an_operator_asks_and_that_is_an_event(
    memory_runtime: LocalRuntime, client: Client
) -> None:
    await seed_tenant(memory_runtime, "acme")

    def phone(records: list[dict[str, Any]]) -> Any:
        [fact] = [r for r in records if r["record"] == "fact" and "phone" in r["metadata"]]
        return fact["metadata"]["phone"]

    assert phone(await exported(memory_runtime, "acme")).startswith("pii.1.A256GCM.")
    assert phone(await exported(memory_runtime, "acme", "opened")) == "+44 1"
    events = await client.send(
        "GET",
        "/admin/tenants/acme/events",
        access=client.operator,
        query={"kind": "memory_retrieved"},
    )
    [opened] = [
        e for e in events.json()["events"] if e["payload"].get("op") == "personal_data_opened"
    ]
    assert opened["payload"]["by"] == "ops@example.com"


async def test_an_export_killed_mid_way_resumes_and_loses_or_repeats_nothing(
    memory_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed_tenant(memory_runtime, "acme")
    whole = await exported(memory_runtime, "acme")
    monkeypatch.setattr(portability, "PART_RECORDS", 3)
    save = Jobs.save
    calls = {"n": 0}

    async def dies_saving_part_three(self: Jobs, job: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:  # (the job's creation, parts 1 and 2) part 3 is in R2, its
            raise RuntimeError("the isolate was evicted")  # progress is not
        return await save(self, job, **kwargs)

    monkeypatch.setattr(Jobs, "save", dies_saving_part_three)
    exporter = (await Memory.open(memory_runtime.bindings(), "acme")).exporter()
    job = await exporter.start("ops", "sealed")
    with pytest.raises(Exception, match=r"export_step_failed|evicted"):
        await exporter.advance(job.job_id)
    assert (await exporter.jobs.get(job.job_id)).progress["part"] == 3  # type: ignore[union-attr]
    done = await exporter.advance(job.job_id)  # what the minute cron (or `--job`) does
    parts = [await exporter.part(job.job_id, n) for n in range(done.progress["part"])]
    again = [json.loads(line) for p in parts for line in gzip.decompress(p).splitlines()]
    assert sorted(map(json.dumps, again[1:])) == sorted(map(json.dumps, whole[1:]))


async def test_the_crons_finish_an_export_nobody_watches_then_expire_it(
    memory_runtime: LocalRuntime, client: Client, clock: FixedClock
) -> None:
    await seed_tenant(memory_runtime, "acme")
    exporter = (await Memory.open(memory_runtime.bindings(), "acme")).exporter()
    job = await exporter.start("ops", "sealed")  # started, never advanced by its caller
    minute = await run_scheduled(MOVE_STEPS, clock.now(), memory_runtime.bindings())
    assert minute["result"]["exports"] == [
        {"tenant_id": "acme", "job_id": job.job_id, "status": "complete"}
    ]
    assert await exporter.part(job.job_id, 0)
    clock.advance(8 * 86_400)
    daily = await run_scheduled(DAILY_BRIEF, clock.now(), memory_runtime.bindings())
    assert daily["result"]["exports_expired"] == 1
    client.operator = mint_token(memory_runtime.state.access, "ops@example.com", now=clock.now())
    gone = await client.send(
        "GET", f"/admin/tenants/acme/exports/{job.job_id}/parts/1", access=client.operator
    )
    assert (gone.status, gone.json()["error"]["code"]) == (404, "export_not_found")
    assert not (await memory_runtime.cold.list(prefix="exports/")).objects


def test_the_cli_exports_with_a_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def runtime() -> LocalRuntime:
        return LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())

    async def seed() -> None:
        rt = runtime()
        await rt.migrate()
        await seed_tenant(rt, "acme")
        await rt.close()

    asyncio.run(seed())
    monkeypatch.setattr(portability, "PART_RECORDS", 4)
    monkeypatch.setattr("local_runtime.commands.portability._open", lambda args: runtime())
    out = tmp_path / "acme.jsonl"
    assert cli.main(["export", "acme", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "records, part" in captured.err
    assert captured.err.count("\r") >= 3  # the bar moved once per part
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert (
        lines[0]["record"] == "header"
        and len(lines)
        == lines[0]["counts"]["fact"]
        + sum(n for k, n in lines[0]["counts"].items() if k != "fact")
        + 1
    )
    assert json.loads(captured.out)["status"] == "complete"


async def test_a_subject_export_holds_what_the_subjects_erase_removes(
    memory_runtime: LocalRuntime, client: Client
) -> None:
    await seed_tenant(memory_runtime, "acme")
    token = await client.mint("acme", "bot", tiers=["working"], scopes=["write"])
    await client.write(token, "bot", tier="working", key="note", value="call cyrus at noon")
    response = await client.send(
        "GET",
        "/admin/tenants/acme/subjects/cyrus/export",
        access=client.operator,
        query={"personal": "opened"},
    )
    assert response.status == 200, response.body[:300]
    assert response.headers.get("content-type") == "application/x-ndjson"
    header, *records = [json.loads(line) for line in response.body.splitlines()]
    assert header["subject"] == "cyrus" and header["personal"] == "opened"
    kinds = [r["record"] for r in records]
    assert "cy@example.com" in response.body.decode()  # opened, as asked
    copy = await exported(memory_runtime, "acme")  # a tenant export naming cyrus
    erased = await client.send(
        "DELETE", "/admin/tenants/acme/subjects/cyrus", access=client.operator
    )
    report = erased.json()
    assert report["exports_deleted"] == 1  # an export is a copy: it goes with the subject
    gone = await client.send(
        "GET", f"/admin/tenants/acme/exports/{copy[0]['job_id']}/parts/0", access=client.operator
    )
    assert gone.json()["error"]["code"] == "part_not_found"
    assert kinds.count("fact") == report["facts"]
    assert kinds.count("episode") == report["episodes"]
    assert kinds.count("run") == report["runs"]
    assert kinds.count("working") == report["working_keys"] == 1
    empty = await client.send(
        "GET", "/admin/tenants/acme/subjects/cyrus/export", access=client.operator
    )
    assert [json.loads(line)["record"] for line in empty.body.splitlines()] == ["header"]
    short = await client.send(
        "GET", "/admin/tenants/acme/subjects/cy/export", access=client.operator
    )
    assert (short.status, short.json()["error"]["code"]) == (422, "invalid_path")
