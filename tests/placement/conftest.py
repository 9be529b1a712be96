"""Fixtures for tenant placement: the memory API's runtime (two shards) and client, and a
recorder of every statement each shard's database runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from local_runtime.adapters.d1 import SqliteD1
from local_runtime.runtime import LocalRuntime
from tests.memory_api.conftest import client, clock, memory_runtime


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
def runtime(memory_runtime: LocalRuntime) -> LocalRuntime:
    """The memory API's runtime (pinned clock, token keys): two shards, as every runtime."""
    return memory_runtime


@pytest.fixture
def statements(runtime: LocalRuntime) -> Statements:
    recorder = Statements()
    for shard in runtime.shards:
        recorder.record(shard.name, runtime.shard_db(shard.name))
    return recorder


__all__ = ["Statements", "client", "clock", "memory_runtime"]
