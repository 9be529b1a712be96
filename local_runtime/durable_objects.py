"""Durable Objects for the local runtime: one instance per name, calls serialised.

Cloudflare delivers an object's events one at a time while it awaits storage (input gates)
but may interleave them while it awaits other I/O; here each call holds the object's lock
throughout, which is stricter (object code is written to be safe under interleaving, with
read-modify-write in single SQL statements). Arguments and results cross as workerd's RPC
copies them (`rpc_copy`). `run_due_alarms` delivers alarms, called every second by the dev
server and by tests with their own clock.
"""

from __future__ import annotations

import datetime
import inspect
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from agent_runtime_do.core import AgentRuntimeCore
from bindings.ports.do_sql import AlarmStorage, DurableObjectStorage
from local_runtime.adapters.do_alarms import AlarmTable
from local_runtime.adapters.do_sql import DurableObjectStorageRegistry

log = logging.getLogger(__name__)


# What a value becomes across a Durable Object RPC call: the workers SDK's `python_to_rpc`
# (refusing tuples, bytearrays and awaitables anywhere inside), workerd's serialisation
# (DataCloneError for anything else), then `python_from_rpc`; the same for the result. What
# workerd did to each value is tests/agents/rpc_probe/observed.json (docs/pyodide.md), which
# tests/agents/test_do_rpc_values.py holds `rpc_copy` to. A datetime and an exception cross
# lossily; the local runtime refuses them: send text.


class RpcValueError(TypeError):
    """A value workerd's Durable Object RPC would not carry (or this runtime does not model)."""


_MAX_SAFE_INTEGER = 2**53 - 1
_MAX_ARRAY_INDEX = 2**32 - 2


def rpc_copy(value: Any) -> Any:
    """`value` as the other side of a Durable Object RPC call receives it, or `RpcValueError`
    where workerd's RPC (with the workers SDK) refuses it (see above)."""
    _refuse_like_the_sdk(value)
    return _copy(value)


def _refuse_like_the_sdk(value: Any) -> None:
    # workers-runtime-sdk `_raise_on_disabled_type`: checked on the whole value before any
    # conversion, through dict values and every other iterable but str/bytes.
    if isinstance(value, tuple | bytearray):
        raise RpcValueError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise RpcValueError(f"Awaitable {type(value)} cannot be sent over RPC.")
    if isinstance(value, Mapping):
        for item in value.values():
            _refuse_like_the_sdk(item)
    elif isinstance(value, list | set | frozenset):
        for item in value:
            _refuse_like_the_sdk(item)


def _copy(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)  # an IntEnum member arrives as its number
    if isinstance(value, float):
        # A JS number that is a safe integer reaches Python as an int.
        if value.is_integer() and abs(value) <= _MAX_SAFE_INTEGER:
            return int(value)
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)  # a StrEnum member arrives as its text
    if isinstance(value, bytes | memoryview):
        return memoryview(bytes(value))
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, set):
        return {_copy(item) for item in value}
    if isinstance(value, Mapping):
        return _copy_object(value)
    if isinstance(value, datetime.datetime | BaseException):
        raise RpcValueError(
            f"a {type(value).__name__} crosses workerd's RPC lossily (a naive datetime at ms "
            "precision, Exception('Error: ...')); the local runtime refuses it: send text"
        )
    if isinstance(value, frozenset) or not callable(value):
        raise RpcValueError(
            f"{type(value).__name__} cannot cross Durable Object RPC (workerd: DataCloneError: "
            "Proxy could not be serialized because it is not a valid RPC receiver type)"
        )
    raise RpcValueError(
        f"{type(value).__name__} would cross RPC as a stub; the local runtime does not model it"
    )


def _key(key: Any) -> str:
    """A dict key as a JS object's property name (`Object.fromEntries` -> `String(key)`)."""
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "undefined"  # to_js turns None into undefined
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float) and math.isfinite(key) and key.is_integer():
        return str(int(key))
    if isinstance(key, float) and "e" not in repr(key) and math.isfinite(key):
        return repr(key)
    if isinstance(key, tuple):
        raise RpcValueError(f"Cannot use {key!r} as a key for a Javascript Map")
    raise RpcValueError(f"a {type(key).__name__} key is not modelled by the local runtime")


def _is_array_index(key: str) -> bool:
    return key.isdigit() and str(int(key)) == key and int(key) <= _MAX_ARRAY_INDEX


def _copy_object(value: Mapping[Any, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = {}
    for key, item in value.items():
        copied[_key(key)] = _copy(item)
    # A JS object lists integer-like keys first, ascending, then the others as inserted.
    indexes = sorted((key for key in copied if _is_array_index(key)), key=int)
    if not indexes:
        return copied
    others = [key for key in copied if not _is_array_index(key)]
    return {key: copied[key] for key in [*indexes, *others]}


# Builds an object's core over its storage and its alarm (`ctx.storage.setAlarm` ...).
CoreFactory = Callable[[DurableObjectStorage, AlarmStorage], AgentRuntimeCore]


class LocalDurableObjectNamespace:
    """Implements `bindings.ports.durable_objects.DurableObjectNamespace` in-process, and
    delivers alarms (`run_due_alarms`) the way the runtime calls `alarm()`."""

    def __init__(
        self,
        registry: DurableObjectStorageRegistry,
        factory: CoreFactory,
        alarms: AlarmTable | None = None,
    ) -> None:
        self._registry = registry
        self._factory = factory
        self.alarms = alarms if alarms is not None else AlarmTable(None)
        self._instances: dict[str, AgentRuntimeCore] = {}

    def get_by_name(self, name: str) -> LocalDurableObjectStub:
        return LocalDurableObjectStub(self, name)

    def evict_all(self) -> None:
        """Forget every live object, as an eviction does: the next call to one constructs
        it again (and runs `initialize`) over its storage."""
        self._instances.clear()

    async def _core(self, name: str) -> AgentRuntimeCore:
        """The live object (held under its lock): constructed and initialised on first use,
        like blockConcurrencyWhile in the constructor (no event before it completes)."""
        core = self._instances.get(name)
        if core is None:
            core = self._factory(self._registry.storage(name), self.alarms.for_object(name))
            await core.initialize()
            self._instances[name] = core
        return core

    async def _call(self, name: str, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Call `method` as workerd would: the payload is refused or copied before the object
        sees it, and the result after the object ran (its writes stand even when the result
        is then refused, as on Cloudflare)."""
        sent = rpc_copy(payload)
        async with self._registry.lock(name):
            result = await (await self._core(name)).call(method, sent)
        received = rpc_copy(result)
        if not isinstance(received, dict):
            raise TypeError(
                f"Durable Object {name!r} answered {method} with {type(received).__name__}, "
                "not a dict"
            )
        return received

    async def run_due_alarms(self, now: float) -> list[str]:
        """Fire every alarm due at `now` (each object's `alarm()` under its lock, one object
        at a time); a handler that raises is logged and retried later with backoff
        (`AlarmTable.finish`). Returns the names of the objects whose alarm ran."""
        fired: list[str] = []
        for name, retry_count in self.alarms.due(now):
            self.alarms.delete(name)  # a running alarm is no longer set
            failed = False
            try:
                async with self._registry.lock(name):
                    await (await self._core(name)).alarm(retry_count)
            except Exception:
                failed = True
                log.exception("alarm of Durable Object %r failed (retry %d)", name, retry_count)
            self.alarms.finish(name, failed=failed, retry_count=retry_count, now=now)
            fired.append(name)
        return fired


class LocalDurableObjectStub:
    def __init__(self, namespace: LocalDurableObjectNamespace, name: str) -> None:
        self._namespace = namespace
        self.name = name

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._namespace._call(self.name, method, payload)
