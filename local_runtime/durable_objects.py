"""Durable Objects for the local runtime: one instance per name, calls serialised.

Cloudflare runs each object single-threaded and delivers events one at a time while it
awaits storage (input gates); it may interleave events while the object awaits other I/O
such as fetch. Here each call holds the object's lock from start to end, which is
stricter: object code must therefore not *rely* on interleaving, and it is written to be
safe under it (read-modify-write happens in single synchronous SQL statements).
Arguments and results cross a JSON round trip, like RPC's structured clone, so a value
the real runtime could not send fails here too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Protocol

from bindings.ports.do_sql import DurableObjectStorage


class DurableObjectCore(Protocol):
    async def initialize(self) -> None: ...

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]: ...


class StorageRegistry(Protocol):
    def storage(self, object_id: str) -> DurableObjectStorage: ...

    def lock(self, object_id: str) -> asyncio.Lock: ...


CoreFactory = Callable[[DurableObjectStorage], DurableObjectCore]


class LocalDurableObjectNamespace:
    """Implements `bindings.ports.durable_objects.DurableObjectNamespace` in-process."""

    def __init__(self, registry: StorageRegistry, factory: CoreFactory) -> None:
        self._registry = registry
        self._factory = factory
        self._instances: dict[str, DurableObjectCore] = {}

    def get_by_name(self, name: str) -> LocalDurableObjectStub:
        return LocalDurableObjectStub(self, name)

    def evict_all(self) -> None:
        """Forget every live object, as an eviction does: the next call to one constructs
        it again (and runs `initialize`) over its storage."""
        self._instances.clear()

    async def _call(self, name: str, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        sent = json.loads(json.dumps(payload))
        async with self._registry.lock(name):
            core = self._instances.get(name)
            if core is None:
                # Like blockConcurrencyWhile in the constructor: no call is delivered
                # before initialisation completes (we hold the object's lock).
                core = self._factory(self._registry.storage(name))
                await core.initialize()
                self._instances[name] = core
            result = await core.call(method, sent)
        received: dict[str, Any] = json.loads(json.dumps(result))
        return received


class LocalDurableObjectStub:
    def __init__(self, namespace: LocalDurableObjectNamespace, name: str) -> None:
        self._namespace = namespace
        self.name = name

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._namespace._call(self.name, method, payload)
