"""Fixtures over real workerd bindings (Miniflare), for the tests under tests/miniflare/.

* `miniflare` (session): the running harness — started once, stopped at session end;
  its port is parsed from the harness's ready line on stdout (`tests/miniflare/session.py`).
* `mf_kv`, `mf_d1`, `mf_do_storage`: fresh, isolated KV / D1 / Durable Object storage.
* `mf_migrated_d1`: a D1 database with every migration of `migrations/` applied by the
  local runtime's migration runner, so repositories run their real SQL on workerd.
* `mf_bindings`: the `Bindings` a request sees, whose `kv` and `db` are workerd's (the
  other members — clock, background tasks, scripted LLM, embedder, vector index — come
  from a local runtime in a temporary folder; Vectorize and AI have no local simulator).

When Node is missing these skip (outside CI) or fail (in CI, env CI=true).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bindings.environment import Bindings
from local_runtime.runtime import MIGRATIONS_DIR, LocalRuntime
from tests.contracts.conftest import KVHarness
from tests.miniflare import session
from tests.miniflare.adapters import MiniflareD1, MiniflareDurableObjectStorage, MiniflareHarness


@pytest.fixture(scope="session")
def miniflare() -> Iterator[MiniflareHarness]:
    """The session's harness (workerd with KV, D1 and a SQLite Durable Object class)."""
    yield session.harness()
    session.stop()


@pytest.fixture
async def mf_kv(miniflare: MiniflareHarness) -> AsyncIterator[KVHarness]:
    async with session.miniflare_kv() as harness:
        yield harness


@pytest.fixture
async def mf_d1(miniflare: MiniflareHarness) -> AsyncIterator[MiniflareD1]:
    async with session.miniflare_d1() as db:
        yield db


@pytest.fixture
def mf_do_storage(miniflare: MiniflareHarness) -> Iterator[MiniflareDurableObjectStorage]:
    with session.miniflare_do_storage() as storage:
        yield storage


@pytest.fixture
async def mf_migrated_d1(mf_d1: MiniflareD1) -> MiniflareD1:
    from local_runtime.migrations import apply_migrations

    await apply_migrations(mf_d1, MIGRATIONS_DIR)
    return mf_d1


@pytest.fixture
async def mf_bindings(
    tmp_path: Path, mf_kv: KVHarness, mf_migrated_d1: MiniflareD1
) -> AsyncIterator[Bindings]:
    from tests.fakes.embedder import HashingEmbedder

    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    try:
        yield dataclasses.replace(runtime.bindings(), kv=mf_kv.kv, db=mf_migrated_d1)
        # Episodic writes run off the response path: let them land before teardown.
        await runtime.background.drain()
    finally:
        await runtime.close()
