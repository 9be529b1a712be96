"""The Durable Object namespace adapter (RPC stub), in both modes (waitUntil: tests/pyodide)."""

from __future__ import annotations

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


# ctx.waitUntil (bindings.cloudflare.background) is tested in real Pyodide, from a Worker
# invocation and from a Durable Object: tests/pyodide/py/test_background.py.
