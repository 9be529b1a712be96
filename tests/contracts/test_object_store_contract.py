"""The object-storage (cold tier) port contract, run against every adapter that runs here.

Adapters: "local" (`LocalObjectStore`, files under a temporary folder), and the Cloudflare R2
adapter over the fake R2 bucket in "r2-raw" (bare JsProxy) and "r2-wrapped" (the real
workers SDK's `_EnvWrapper`) mode, so every byte string, metadata object, Date and null
crosses the simulated Pyodide boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bindings.ports.clock import FixedClock
from bindings.ports.errors import BindingLimitError
from bindings.ports.object_store import ObjectStore


@pytest.fixture(params=["local", "r2-raw", "r2-wrapped"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    clock = FixedClock(1_750_000_000.0)
    if request.param == "local":
        from local_runtime.adapters.object_store import LocalObjectStore

        yield LocalObjectStore(tmp_path / "cold", clock=clock)
        return
    from tests.fakes.js_runtime import FakeJsRuntime
    from tests.fakes.r2 import FakeR2Bucket

    with FakeJsRuntime() as runtime:
        from bindings.cloudflare.r2 import CloudflareObjectStore

        bucket = FakeR2Bucket(clock)
        binding: Any = (
            runtime.proxy(bucket) if request.param == "r2-raw" else runtime.wrapped(bucket)
        )
        yield CloudflareObjectStore(binding)


async def test_put_then_get_returns_the_same_bytes_and_metadata(store: ObjectStore) -> None:
    data = bytes(range(256)) * 4
    info = await store.put("episodes/t1/2026-W01/a.ndjson.gz", data, custom_metadata={"rows": "3"})
    assert info.key == "episodes/t1/2026-W01/a.ndjson.gz"
    assert info.size == len(data)
    assert info.etag
    got = await store.get("episodes/t1/2026-W01/a.ndjson.gz")
    assert got is not None
    assert got.data == data
    assert got.custom_metadata == {"rows": "3"}
    assert got.size == len(data)
    assert got.etag == info.etag
    assert got.uploaded_ms == 1_750_000_000_000


async def test_a_missing_key_is_none(store: ObjectStore) -> None:
    assert await store.get("nope") is None


async def test_put_replaces_the_whole_object(store: ObjectStore) -> None:
    await store.put("k", b"first", custom_metadata={"a": "1"})
    await store.put("k", b"second")
    got = await store.get("k")
    assert got is not None and got.data == b"second"
    assert got.custom_metadata == {}


async def test_empty_objects_and_odd_keys_round_trip(store: ObjectStore) -> None:
    keys = ["a", "a/b", "a//b", "../x", "./y", "sp ace/ü/%41", "a/b/"]
    for index, key in enumerate(keys):
        await store.put(key, str(index).encode() if index else b"")
    for index, key in enumerate(keys):
        got = await store.get(key)
        assert got is not None, key
        assert got.data == (str(index).encode() if index else b"")
    listed = await store.list()
    assert [o.key for o in listed.objects] == sorted(keys, key=str.encode)


async def test_list_pages_in_key_order_with_a_cursor(store: ObjectStore) -> None:
    keys = [f"p/{i:03d}" for i in range(25)] + ["q/other"]
    for key in reversed(keys):
        await store.put(key, key.encode(), custom_metadata={"k": key})
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.list(prefix="p/", cursor=cursor, limit=10)
        pages += 1
        seen += [o.key for o in page.objects]
        assert all(o.custom_metadata == {"k": o.key} for o in page.objects)
        if not page.truncated:
            assert page.cursor is None
            break
        cursor = page.cursor
    assert seen == keys[:25]
    assert pages == 3


async def test_list_with_a_partial_segment_prefix(store: ObjectStore) -> None:
    for key in ("runs/t1/x", "runs/t10/y", "runs/t2/z"):
        await store.put(key, b"1")
    assert [o.key for o in (await store.list(prefix="runs/t1")).objects] == [
        "runs/t1/x",
        "runs/t10/y",
    ]


async def test_delete_one_many_and_missing(store: ObjectStore) -> None:
    for i in range(5):
        await store.put(f"d/{i}", b"x")
    await store.delete("d/0")
    await store.delete(["d/1", "d/2", "d/missing"])
    await store.delete("never-there")
    assert [o.key for o in (await store.list(prefix="d/")).objects] == ["d/3", "d/4"]
    assert await store.get("d/1") is None


async def test_delete_more_than_one_call_holds(store: ObjectStore) -> None:
    keys = [f"m/{i:04d}" for i in range(1005)]
    for key in keys:
        await store.put(key, b"")
    await store.delete(keys)
    assert (await store.list(prefix="m/")).objects == []


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put("x" * 1025, b""),
        lambda s: s.put("", b""),
        lambda s: s.put("k", b"", custom_metadata={"m": "v" * 8200}),
        lambda s: s.get("x" * 1025),
        lambda s: s.list(limit=1001),
        lambda s: s.list(limit=0),
    ],
    ids=["long-key", "empty-key", "big-metadata", "get-long-key", "limit-1001", "limit-0"],
)
async def test_limits_are_binding_limit_errors(store: ObjectStore, call: Any) -> None:
    with pytest.raises(BindingLimitError):
        await call(store)
    assert (await store.list()).objects == []
