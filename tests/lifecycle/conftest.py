"""Fixtures for the lifecycle tests: a migrated local runtime on a clock the test moves, and
fast row seeding straight through the D1 port."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_memory.ids import content_hash, new_ulid
from authorization.operator_grants import grant
from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Database
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder

NOW = 1_750_000_000.0  # 2025-06-15T15:06:40Z, a Sunday
DAY_MS = 86_400_000
NOW_MS = int(NOW * 1000)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
async def rt(tmp_path: Path, clock: FixedClock) -> AsyncIterator[LocalRuntime]:
    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder(), clock=clock)
    await runtime.migrate()
    # The data-protection officer of the erase tests operates tenant acme (operator grants).
    await grant(runtime.bindings(), "acme", "email", "dpo@example.com", "test")
    yield runtime
    await runtime.close()


def ulid_at(ms: int) -> str:
    return new_ulid(ms / 1000)


async def seed_episodes(
    db: D1Database,
    tenant: str,
    times_ms: Sequence[int],
    *,
    subject: str | None = None,
    content: str = "observed something",
    run_id: str | None = None,
    agent_type: str = "assistant",
    data: dict[str, Any] | None = None,
) -> list[str]:
    """Insert one episode per time; returns their ids (in the order given)."""
    ids: list[str] = []
    statements = []
    for index, ms in enumerate(times_ms):
        episode_id = ulid_at(ms)
        ids.append(episode_id)
        text = f"{content} #{index}"
        statements.append(
            db.prepare(
                "INSERT INTO memory_episodes (tenant_id, episode_id, run_id, agent_type, "
                "instance_id, kind, subject, content, data, importance, content_hash, "
                "created_at) VALUES (?, ?, ?, ?, 'default', 'observation', ?, ?, ?, 0.5, ?, ?)"
            ).bind(
                tenant,
                episode_id,
                run_id or ulid_at(ms),
                agent_type,
                subject,
                text,
                json.dumps(data or {"i": index}),
                content_hash(text),
                ms,
            )
        )
    for start in range(0, len(statements), 50):
        await db.batch(statements[start : start + 50])
    return ids


async def seed_run(
    db: D1Database,
    tenant: str,
    started_ms: int,
    *,
    status: str = "completed",
    finished_ms: int | None = None,
    input: dict[str, Any] | None = None,
) -> str:
    run_id = ulid_at(started_ms)
    finished = None if status == "running" else (finished_ms or started_ms + 1000)
    await (
        db.prepare(
            "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status, input, "
            "output, steps, started_at, finished_at) VALUES (?, ?, 'assistant', 'default', ?, "
            "?, ?, 1, ?, ?)"
        )
        .bind(
            tenant,
            run_id,
            status,
            json.dumps(input or {"text": "hello"}),
            None if status == "running" else json.dumps({"text": "done"}),
            started_ms,
            finished,
        )
        .run()
    )
    return run_id


async def count(db: D1Database, sql: str, *params: Any) -> int:
    value = await db.prepare(sql).bind(*params).first_value("n")
    return int(value or 0)
