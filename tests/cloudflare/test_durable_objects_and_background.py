"""The Durable Object namespace adapter (RPC stub) and `ctx.waitUntil`, in both modes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.js_runtime import (
    FakeJsRuntime,
    JSError,
    JSValue,
    data_to_js,
    js_to_data,
)


def echo(name: str, method: str, args: list[Any]) -> Any:
    if method != "call":
        raise JSError("TypeError", f"no method {method}")
    rpc_method, payload = (js_to_data(a) for a in args)
    if rpc_method == "explode":
        raise JSError("Error", "UnknownMethodError: explode")
    if rpc_method == "scalar":
        return 42
    return data_to_js({"object": name, "method": rpc_method, "payload": payload})


@pytest.fixture
def agents(js_runtime: FakeJsRuntime, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.durable_objects import CloudflareDurableObjectNamespace

    namespace = js_runtime.do_namespace(echo)
    return CloudflareDurableObjectNamespace(bind(namespace))


async def test_call_goes_to_the_named_object_with_payload_both_ways(agents: Any) -> None:
    stub = agents.get_by_name("t1:planner:i1")
    result = await stub.call("ping", {"n": 1, "nested": {"none": None, "items": [1, "a"]}})
    assert result == {
        "object": "t1:planner:i1",
        "method": "ping",
        "payload": {"n": 1, "nested": {"none": None, "items": [1, "a"]}},
    }
    assert type(result) is dict


async def test_errors_from_the_object_propagate(agents: Any) -> None:
    from pyodide.ffi import JsException

    with pytest.raises(JsException, match="UnknownMethodError"):
        await agents.get_by_name("x").call("explode", {})


async def test_a_non_object_answer_is_refused(agents: Any) -> None:
    with pytest.raises(TypeError, match="not a dict"):
        await agents.get_by_name("x").call("scalar", {})


def test_empty_names_are_refused(agents: Any) -> None:
    with pytest.raises(ValueError):
        agents.get_by_name("")


async def test_wait_until_runs_the_work_after_the_caller_returns(js_runtime: FakeJsRuntime) -> None:
    from bindings.cloudflare.background import CloudflareBackgroundTasks

    ctx = js_runtime.execution_context()
    done: list[str] = []

    async def write_episode() -> str:
        done.append("episode")
        return "ok"

    CloudflareBackgroundTasks(js_runtime.proxy(ctx)).wait_until(write_episode())
    assert len(ctx.pending) == 1
    assert await ctx.drain() == ["ok"]
    assert done == ["episode"]


async def test_failed_background_work_is_logged_not_lost(
    js_runtime: FakeJsRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    from bindings.cloudflare.background import CloudflareBackgroundTasks

    ctx = js_runtime.execution_context()

    async def failing_write() -> None:
        raise RuntimeError("D1 unavailable; payload={'episode': 'e1'}")

    with caplog.at_level(logging.ERROR):
        CloudflareBackgroundTasks(js_runtime.proxy(ctx)).wait_until(failing_write())
        outcomes = await ctx.drain()
    assert isinstance(outcomes[0], JSError)
    assert "background work failed" in caplog.text
    assert "episode" in caplog.text
