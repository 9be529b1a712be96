"""The port contract suites, run against the Cloudflare adapters.

`tests/contracts/` specifies the KV, D1 and Durable Object SQL ports (and checks the local
adapters and real workerd through Miniflare against it). Here the same tests drive
`CloudflareKVNamespace`, `CloudflareD1Database` and `CloudflareDurableObjectStorage` over the
fake runtime, in raw and in wrapped mode: every value and error crosses the simulated
Pyodide boundary (None/null/undefined, numbers, BigInt, bytes/ArrayBuffer, JS errors) on the
way in and out, so a conversion slip in an adapter fails a contract test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Database
from bindings.ports.do_sql import DurableObjectStorage
from tests.contracts import test_d1_contract, test_do_sql_contract, test_kv_contract
from tests.contracts.conftest import D1Factory, DOSqlFactory, KVFactory, KVHarness
from tests.fakes.js_runtime import (
    FakeD1Database,
    FakeDurableObjectStorage,
    FakeJsRuntime,
    FakeKvNamespace,
    JSValue,
)

# Re-export every contract test under a per-port name (two suites share test names).
for _prefix, _suite in (
    ("kv", test_kv_contract),
    ("d1", test_d1_contract),
    ("do_sql", test_do_sql_contract),
):
    for _name, _test in vars(_suite).items():
        if _name.startswith("test_") and callable(_test):
            globals()[f"test_{_prefix}__{_name[len('test_') :]}"] = _test


@pytest.fixture
def make_kv(js_runtime: FakeJsRuntime, bind: Callable[[JSValue], Any]) -> KVFactory:
    @asynccontextmanager
    async def fresh() -> AsyncIterator[KVHarness]:
        from bindings.cloudflare.kv import CloudflareKVNamespace

        clock = FixedClock()
        adapter = CloudflareKVNamespace(bind(FakeKvNamespace(clock)))
        yield KVHarness(kv=adapter, now=clock.now, advance=clock.advance)

    return fresh


@pytest.fixture
async def kv(make_kv: KVFactory) -> AsyncIterator[KVHarness]:
    async with make_kv() as harness:
        yield harness


@pytest.fixture
def make_d1(js_runtime: FakeJsRuntime, bind: Callable[[JSValue], Any]) -> D1Factory:
    @asynccontextmanager
    async def fresh() -> AsyncIterator[D1Database]:
        from bindings.cloudflare.d1 import CloudflareD1Database

        yield CloudflareD1Database(bind(FakeD1Database()))

    return fresh


@pytest.fixture
async def d1(make_d1: D1Factory) -> AsyncIterator[D1Database]:
    async with make_d1() as db:
        yield db


@pytest.fixture
def make_do_storage(js_runtime: FakeJsRuntime, bind: Callable[[JSValue], Any]) -> DOSqlFactory:
    @contextmanager
    def fresh() -> Iterator[DurableObjectStorage]:
        from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage

        yield CloudflareDurableObjectStorage(bind(FakeDurableObjectStorage()))

    return fresh


@pytest.fixture
def do_storage(make_do_storage: DOSqlFactory) -> Iterator[DurableObjectStorage]:
    with make_do_storage() as storage:
        yield storage
