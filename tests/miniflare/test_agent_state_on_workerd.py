"""The AgentRuntime's storage lifecycle and subject erase on workerd's own SQL: the alarm's
idle clear, its report to workerd's D1, and the erase's overwrite-then-delete statements
(`hex(zeroblob(...))`, `CAST(... AS BLOB)`) pass workerd's authorizer and do what the local
adapter does."""

from __future__ import annotations

import dataclasses
import json
from typing import cast

from agent_runtime_do.core import AgentRuntimeCore
from agent_runtime_do.storage import erase_subject_traces
from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from local_runtime.adapters.do_alarms import AlarmTable
from local_runtime.background import LocalBackgroundTasks
from tests.miniflare.adapters import MiniflareD1, MiniflareDurableObjectStorage

SCOPE = {"tenant": "acme", "agent_type": "assistant", "instance_id": "inst-9"}
ADA = "contact:ada-lovelace"


async def test_idle_clear_report_and_erase_on_workerd(
    mf_bindings: Bindings,
    mf_do_storage: MiniflareDurableObjectStorage,
    mf_migrated_d1: MiniflareD1,
) -> None:
    clock = FixedClock(1_750_000_000.0)
    bindings = dataclasses.replace(mf_bindings, clock=clock)
    table = AlarmTable(None)
    alarms = table.for_object("acme:assistant:inst-9")
    core = AgentRuntimeCore(mf_do_storage, bindings, alarms=alarms)
    await core.initialize()
    background = cast(LocalBackgroundTasks, bindings.background)
    sql = mf_do_storage.sql

    first = await core.call("run", {**SCOPE, "input": f"call {ADA} about the demo"})
    await background.drain()
    assert first["status"] == "completed", first
    assert await alarms.get_alarm() == clock.now() + 86_400

    # The erase's statements on workerd: Ada's rows go, text overwritten first.
    counts = erase_subject_traces(mf_do_storage, ADA, [first["run_id"]])
    assert counts["run_log"] > 0
    texts = [r["detail_json"] for r in sql.exec("SELECT detail_json FROM run_log").to_array()]
    assert not any(ADA in text for text in texts)

    second = await core.call("run", {**SCOPE, "input": "remember the blue door"})
    await background.drain()
    clock.advance(86_400)
    outcome = await core.alarm()

    assert outcome["cleared"] and outcome["reported"], outcome
    assert sql.exec("SELECT COUNT(*) AS n FROM run_log").one()["n"] == 0
    assert sql.exec("SELECT COUNT(*) AS n FROM turn_state").one()["n"] == 0
    row = (
        await mf_migrated_d1.prepare(
            "SELECT run_log_rows, storage_bytes, cleared_at FROM agent_instances "
            "WHERE tenant_id = ? AND instance_id = ?"
        )
        .bind("acme", "inst-9")
        .first()
    )
    assert row is not None and row["run_log_rows"] == 0
    assert row["cleared_at"] == int(clock.now() * 1000)
    run = (
        await mf_migrated_d1.prepare(
            "SELECT status FROM agent_runs WHERE tenant_id = ? AND run_id = ?"
        )
        .bind("acme", second["run_id"])
        .first()
    )
    assert run is not None and run["status"] == "completed"
    assert json.dumps(outcome)  # the alarm's outcome is plain JSON
    assert await alarms.get_alarm() is None
    table.close()
