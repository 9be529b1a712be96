"""`CloudflareKVNamespace` against the fake KV, in raw and wrapped mode."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from bindings.ports.errors import BindingLimitError
from tests.fakes.js_runtime import FakeJsRuntime, FakeKvNamespace, JSValue


@pytest.fixture
def fake_kv(js_runtime: FakeJsRuntime) -> FakeKvNamespace:
    return js_runtime.kv()


@pytest.fixture
def kv(fake_kv: FakeKvNamespace, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.kv import CloudflareKVNamespace

    return CloudflareKVNamespace(bind(fake_kv))


async def test_put_then_get_returns_the_text_and_missing_keys_are_none(kv: Any) -> None:
    await kv.put("agent_working:t1:i1:plan", '{"step": 1}')
    assert await kv.get("agent_working:t1:i1:plan") == '{"step": 1}'
    missing = await kv.get("nope")
    assert missing is None  # not jsnull, whatever the mode


async def test_ttl_and_metadata_reach_kv_and_expire(
    kv: Any, fake_kv: FakeKvNamespace, js_runtime: FakeJsRuntime
) -> None:
    await kv.put("k", "v", expiration_ttl=3600, metadata={"tenant": "t1", "n": None})
    got = await kv.get_with_metadata("k")
    assert got.value == "v"
    assert got.metadata == {"tenant": "t1", "n": None}
    page = await kv.list(prefix="k")
    assert page.keys[0].expiration == int(js_runtime.clock.now() + 3600)
    js_runtime.clock.advance(3601)
    assert await kv.get("k") is None


async def test_absolute_expiration_is_sent(kv: Any, js_runtime: FakeJsRuntime) -> None:
    at = int(js_runtime.clock.now()) + 600
    await kv.put("k", "v", expiration=at)
    assert (await kv.list()).keys[0].expiration == at


async def test_missing_key_with_metadata_is_all_none(kv: Any) -> None:
    got = await kv.get_with_metadata("absent")
    assert got.value is None and got.metadata is None


@pytest.mark.parametrize(
    ("key", "options", "text"),
    [
        ("k", {"expiration_ttl": 30}, "KV PUT failed: 400 Invalid expiration_ttl of 30"),
        ("x" * 513, {}, "KV PUT failed: 414 UTF-8 encoded length of 513"),
        ("", {}, "Key name cannot be empty."),
        ("..", {}, '".." is not allowed as a key name.'),
        ("k", {"metadata": {"blob": "x" * 1100}}, "KV PUT failed: 413 Metadata length"),
    ],
)
async def test_kv_rule_violations_are_limit_errors_with_kvs_text(
    kv: Any, fake_kv: FakeKvNamespace, key: str, options: dict[str, Any], text: str
) -> None:
    with pytest.raises(BindingLimitError, match=re.escape(text)):
        await kv.put(key, "v", **options)
    assert fake_kv.entry(key) is None


async def test_an_expiration_in_the_past_is_refused(kv: Any, js_runtime: FakeJsRuntime) -> None:
    with pytest.raises(BindingLimitError, match="400 Invalid expiration"):
        await kv.put("k", "v", expiration=int(js_runtime.clock.now()) - 10)


async def test_metadata_that_is_not_json_is_refused_before_the_call(kv: Any) -> None:
    with pytest.raises(TypeError, match="JSON"):
        await kv.put("k", "v", metadata={"when": {1, 2}})


async def test_list_pages_with_prefix_and_cursor_in_key_order(kv: Any) -> None:
    for name in ["b/2", "a/1", "b/1", "b/3", "c/1"]:
        await kv.put(name, "v")
    first = await kv.list(prefix="b/", limit=2)
    assert [k.name for k in first.keys] == ["b/1", "b/2"]
    assert not first.list_complete and first.cursor
    second = await kv.list(prefix="b/", limit=2, cursor=first.cursor)
    assert [k.name for k in second.keys] == ["b/3"]
    assert second.list_complete and second.cursor is None


async def test_list_limit_above_1000_is_refused(kv: Any) -> None:
    with pytest.raises(BindingLimitError, match="Invalid key_count_limit of 1001"):
        await kv.list(limit=1001)


async def test_delete_removes_and_tolerates_missing_keys(kv: Any) -> None:
    await kv.put("k", "v")
    await kv.delete("k")
    await kv.delete("k")
    assert await kv.get("k") is None
