"""The local Durable Object namespace carries RPC values as workerd does, and refuses what
workerd refuses.

`tests/agents/rpc_probe/observed.json` is what real workerd (1.20260426.1, with the workers
SDK 1.9.5) did to each value of `rpc_probe/cases.py` sent from a Python Worker to a Python
Durable Object as an argument and returned as a result (`rpc_probe/run.mjs` re-records it).
The local runtime JSON-round-tripped instead, so a tuple crossed as a list and passed every
test while workerd refuses it. Against that round trip the namespace tests below failed, and so
would the table: a None key became "null" (workerd: "undefined"), 3.0 stayed a float (workerd:
3), integer-like keys kept their insertion order, and the sets and bytes workerd carries were
refused.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from local_runtime.durable_objects import LocalDurableObjectNamespace, RpcValueError, rpc_copy
from tests.agents.rpc_probe.cases import CASES, describe, refusal

OBSERVED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "rpc_probe" / "observed.json").read_text(encoding="utf-8")
)
# workerd carries these (lossily); the local runtime refuses them instead of modelling that.
NOT_MODELLED = {"datetime", "exception"}


def local_outcome(name: str) -> Any:
    try:
        return describe(rpc_copy(CASES[name]()))
    except RpcValueError as exc:
        return {"refused": refusal(exc)}


def test_the_probe_covers_every_case() -> None:
    assert set(OBSERVED) == set(CASES)


@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_MODELLED))
def test_a_value_crosses_as_it_crossed_workerd(name: str) -> None:
    observed = OBSERVED[name]
    # Argument and result go through the same conversions in workerd.
    assert observed["argument"] == observed["result"], observed
    assert local_outcome(name) == observed["argument"]


@pytest.mark.parametrize("name", sorted(NOT_MODELLED))
def test_what_workerd_carries_lossily_is_refused_locally(name: str) -> None:
    assert "refused" not in OBSERVED[name]["argument"]
    with pytest.raises(RpcValueError, match="refuses it"):
        rpc_copy(CASES[name]())


class _Registry:
    def __init__(self) -> None:
        self.locks: dict[str, asyncio.Lock] = {}

    def storage(self, object_id: str) -> Any:
        return object_id

    def lock(self, object_id: str) -> asyncio.Lock:
        return self.locks.setdefault(object_id, asyncio.Lock())


class _Core:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def initialize(self) -> None:
        return None

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, payload))
        if method == "pair":
            return {"pair": ("a", 1)}
        return {"echo": payload}

    async def alarm(self, retry_count: int = 0) -> object:
        return None


async def test_the_namespace_refuses_a_tuple_before_the_object_sees_it() -> None:
    core = _Core()
    namespace = LocalDurableObjectNamespace(_Registry(), lambda storage, alarms: core)
    stub = namespace.get_by_name("agent")
    with pytest.raises(RpcValueError, match="tuple"):
        await stub.call("echo", {"ids": ("a", "b")})
    assert core.calls == []
    answer = await stub.call("echo", {"ids": ["a", "b"], "n": 2.0, "tags": {"x"}})
    assert answer == {"echo": {"ids": ["a", "b"], "n": 2, "tags": {"x"}}}
    assert type(core.calls[-1][1]["n"]) is int


async def test_a_tuple_in_a_result_is_refused_after_the_object_ran() -> None:
    # In workerd the method has run (its writes stand); the caller gets the refusal.
    core = _Core()
    namespace = LocalDurableObjectNamespace(_Registry(), lambda storage, alarms: core)
    with pytest.raises(RpcValueError, match="tuple"):
        await namespace.get_by_name("agent").call("pair", {})
    assert core.calls == [("pair", {})]
