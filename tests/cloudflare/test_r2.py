"""`CloudflareObjectStore` against the fake R2 bucket, in raw and wrapped mode.

The port contract (tests/contracts/test_object_store_contract.py) covers behaviour; these
tests pin what is specific to the binding: how the adapter talks to R2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bindings.ports.errors import BindingUnavailableError
from tests.fakes.js_runtime import FakeJsRuntime, JSValue
from tests.fakes.r2 import FakeR2Bucket


@pytest.fixture
def bucket(js_runtime: FakeJsRuntime) -> FakeR2Bucket:
    return FakeR2Bucket(js_runtime.clock)


@pytest.fixture
def store(bucket: FakeR2Bucket, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.r2 import CloudflareObjectStore

    return CloudflareObjectStore(bind(bucket))


async def test_bytes_and_metadata_reach_r2_as_js_values(store: Any, bucket: FakeR2Bucket) -> None:
    await store.put("a/b", b"\x00\xffgz", custom_metadata={"rows": "2", "kind": "episodes"})
    stored = bucket.objects["a/b"]
    assert stored.data == b"\x00\xffgz"
    assert stored.custom_metadata == {"rows": "2", "kind": "episodes"}


async def test_list_asks_r2_to_include_custom_metadata(store: Any) -> None:
    await store.put("x/1", b"1", custom_metadata={"m": "1"})
    page = await store.list(prefix="x/")
    assert [(o.key, o.custom_metadata) for o in page.objects] == [("x/1", {"m": "1"})]


async def test_uploaded_is_epoch_milliseconds(store: Any, js_runtime: FakeJsRuntime) -> None:
    info = await store.put("t", b"")
    assert info.uploaded_ms == int(js_runtime.clock.now() * 1000)
    listed = await store.list()
    assert listed.objects[0].uploaded_ms == info.uploaded_ms


async def test_a_single_key_delete_sends_a_string_and_many_send_chunks(
    store: Any, bucket: FakeR2Bucket
) -> None:
    for i in range(1500):
        bucket.objects[f"k{i}"] = bucket.objects.get("seed") or _stored()
    await store.delete("k0")
    await store.delete([f"k{i}" for i in range(1, 1500)])
    assert bucket.objects == {}
    assert bucket.calls.count("delete") == 3  # one single key, then 1000 + 499


def _stored() -> Any:
    from tests.fakes.r2 import StoredObject

    return StoredObject(data=b"")


@pytest.mark.parametrize("operation", ["put", "get", "list", "delete"])
async def test_r2_failures_are_unavailable_errors(
    store: Any, bucket: FakeR2Bucket, operation: str
) -> None:
    bucket.fail_next("We encountered an internal error. Please try again. (10001)")
    with pytest.raises(BindingUnavailableError, match=r"internal error.*\(R2 " + operation):
        if operation == "put":
            await store.put("k", b"v")
        elif operation == "get":
            await store.get("k")
        elif operation == "list":
            await store.list()
        else:
            await store.delete("k")
