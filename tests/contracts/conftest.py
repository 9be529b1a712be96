"""Adapter factories for the KV, D1 and Durable-Object-SQL contract suites.

Each contract test runs once per factory listed here (ids are the adapter names): "local"
(SQLite under CPython) and "miniflare" (real workerd bindings over HTTP, see
tests/miniflare/; skipped without Node outside CI). Contract tests use the ports only,
never adapter internals.

A factory is a zero-argument callable returning a context manager (async for KV and D1,
sync for DO SQL, matching the ports) that yields a fresh, empty store. Tests that need many
fresh stores (hypothesis properties) call the factory themselves via the `make_*`
fixtures; the others use the ready-made `kv`, `d1` and `do_storage` fixtures.

Only KV/D1/DO-SQL fixtures live here; the Vectorize suite keeps its own in its module.
Adapters are imported inside the factories so that collecting one suite never depends on
another adapter's module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from dataclasses import dataclass

import pytest

from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Database
from bindings.ports.do_sql import DurableObjectStorage
from bindings.ports.kv import KVNamespace


@dataclass(frozen=True)
class KVHarness:
    """A KV namespace plus what time-dependent tests need to know about its clock.

    `now()` is the namespace's current time in epoch seconds. `advance(seconds)` moves that
    clock forward; it is None for adapters whose clock cannot be moved (real workerd), and
    tests that need it skip for them.
    """

    kv: KVNamespace
    now: Callable[[], float]
    advance: Callable[[float], None] | None


KVFactory = Callable[[], AbstractAsyncContextManager[KVHarness]]
D1Factory = Callable[[], AbstractAsyncContextManager[D1Database]]
DOSqlFactory = Callable[[], AbstractContextManager[DurableObjectStorage]]


@asynccontextmanager
async def local_kv() -> AsyncIterator[KVHarness]:
    from local_runtime.adapters.kv import SqliteKV

    clock = FixedClock()
    kv = SqliteKV(":memory:", clock=clock)
    try:
        yield KVHarness(kv=kv, now=clock.now, advance=clock.advance)
    finally:
        kv.close()


@asynccontextmanager
async def local_d1() -> AsyncIterator[D1Database]:
    from local_runtime.adapters.d1 import SqliteD1

    db = SqliteD1(":memory:")
    try:
        yield db
    finally:
        db.close()


@contextmanager
def local_do_storage() -> Iterator[DurableObjectStorage]:
    from local_runtime.adapters.do_sql import LocalDurableObjectStorage

    storage = LocalDurableObjectStorage(":memory:")
    try:
        yield storage
    finally:
        storage.close()


# Real workerd bindings through Miniflare (tests/miniflare/): one harness per session,
# each store fresh. They skip without Node outside CI and fail without it in CI.
@asynccontextmanager
async def miniflare_kv() -> AsyncIterator[KVHarness]:
    from tests.miniflare.session import miniflare_kv as fresh_kv

    async with fresh_kv() as harness:
        yield harness


@asynccontextmanager
async def miniflare_d1() -> AsyncIterator[D1Database]:
    from tests.miniflare.session import miniflare_d1 as fresh_d1

    async with fresh_d1() as db:
        yield db


@contextmanager
def miniflare_do_storage() -> Iterator[DurableObjectStorage]:
    from tests.miniflare.session import miniflare_do_storage as fresh_storage

    with fresh_storage() as storage:
        yield storage


KV_FACTORIES = [pytest.param(local_kv, id="local"), pytest.param(miniflare_kv, id="miniflare")]
D1_FACTORIES = [pytest.param(local_d1, id="local"), pytest.param(miniflare_d1, id="miniflare")]
DO_SQL_FACTORIES = [
    pytest.param(local_do_storage, id="local"),
    pytest.param(miniflare_do_storage, id="miniflare"),
]


@pytest.fixture(params=KV_FACTORIES)
def make_kv(request: pytest.FixtureRequest) -> KVFactory:
    factory: KVFactory = request.param
    return factory


@pytest.fixture
async def kv(make_kv: KVFactory) -> AsyncIterator[KVHarness]:
    async with make_kv() as harness:
        yield harness


@pytest.fixture(params=D1_FACTORIES)
def make_d1(request: pytest.FixtureRequest) -> D1Factory:
    factory: D1Factory = request.param
    return factory


@pytest.fixture
async def d1(make_d1: D1Factory) -> AsyncIterator[D1Database]:
    async with make_d1() as db:
        yield db


@pytest.fixture(params=DO_SQL_FACTORIES)
def make_do_storage(request: pytest.FixtureRequest) -> DOSqlFactory:
    factory: DOSqlFactory = request.param
    return factory


@pytest.fixture
def do_storage(make_do_storage: DOSqlFactory) -> Iterator[DurableObjectStorage]:
    with make_do_storage() as storage:
        yield storage
