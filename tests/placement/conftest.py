"""Fixtures for tenant placement: a runtime with its two shards, a client, and a recorder of
every statement each shard's database runs."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bindings.ports.clock import FixedClock
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import KEYS, Client


@dataclass
class Statements:
    """(sql, params) of every statement each shard's database ran, by shard name."""

    by_shard: dict[str, list[tuple[str, tuple[Any, ...]]]] = field(default_factory=dict)

    def record(self, name: str, db: SqliteD1) -> None:
        seen = self.by_shard.setdefault(name, [])
        run = db._execute

        def recorded(statements: Any, **kwargs: Any) -> Any:
            seen.extend((s.sql, tuple(s.params)) for s in statements)
            return run(statements, **kwargs)

        db._execute = recorded  # type: ignore[method-assign]

    def naming(self, shard: str, tenant: str) -> list[str]:
        """The statements on `shard` that bound `tenant` as a parameter."""
        return [sql for sql, params in self.by_shard.get(shard, []) if tenant in params]


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(float(int(time.time())))


@pytest.fixture
async def runtime(tmp_path: Path, clock: FixedClock) -> AsyncIterator[LocalRuntime]:
    rt = LocalRuntime.open(
        tmp_path / "state",
        embedder=HashingEmbedder(),
        clock=clock,
        vars={"MEMORY_TOKEN_KEYS": json.dumps(KEYS)},
    )
    await rt.migrate()
    yield rt
    await rt.close()


@pytest.fixture
def client(runtime: LocalRuntime) -> Client:
    return Client(runtime)


@pytest.fixture
def statements(runtime: LocalRuntime) -> Statements:
    recorder = Statements()
    for shard in runtime.shards:
        recorder.record(shard.name, runtime.shard_db(shard.name))
    return recorder
