"""Durable Objects for the local runtime: one instance per name, calls serialised.

Cloudflare runs each object single-threaded and delivers events one at a time while it
awaits storage (input gates); it may interleave events while the object awaits other I/O
such as fetch. Here each call holds the object's lock from start to end, which is
stricter: object code must therefore not *rely* on interleaving, and it is written to be
safe under it (read-modify-write happens in single synchronous SQL statements).
Arguments and results cross a JSON round trip, like RPC's structured clone, so a value
the real runtime could not send fails here too. Alarms (`local_runtime.adapters.do_alarms`)
are delivered by `run_due_alarms`, which the dev server calls every second and tests call
with their own clock.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from bindings.ports.alarms import AlarmStorage
from bindings.ports.do_sql import DurableObjectStorage
from local_runtime.adapters.do_alarms import AlarmTable

log = logging.getLogger(__name__)


class DurableObjectCore(Protocol):
    async def initialize(self) -> None: ...

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]: ...

    async def alarm(self, retry_count: int = 0) -> object: ...


class StorageRegistry(Protocol):
    def storage(self, object_id: str) -> DurableObjectStorage: ...

    def lock(self, object_id: str) -> asyncio.Lock: ...


# Builds an object's core over its storage and its alarm (`ctx.storage.setAlarm` ...).
CoreFactory = Callable[[DurableObjectStorage, AlarmStorage], DurableObjectCore]


class LocalDurableObjectNamespace:
    """Implements `bindings.ports.durable_objects.DurableObjectNamespace` in-process, and
    delivers alarms (`run_due_alarms`) the way the runtime calls `alarm()`."""

    def __init__(
        self, registry: StorageRegistry, factory: CoreFactory, alarms: AlarmTable | None = None
    ) -> None:
        self._registry = registry
        self._factory = factory
        self.alarms = alarms if alarms is not None else AlarmTable(None)
        self._instances: dict[str, DurableObjectCore] = {}

    def get_by_name(self, name: str) -> LocalDurableObjectStub:
        return LocalDurableObjectStub(self, name)

    def evict_all(self) -> None:
        """Forget every live object, as an eviction does: the next call to one constructs
        it again (and runs `initialize`) over its storage."""
        self._instances.clear()

    async def _core(self, name: str) -> DurableObjectCore:
        """The live object (held under its lock): constructed and initialised on first use,
        like blockConcurrencyWhile in the constructor (no event before it completes)."""
        core = self._instances.get(name)
        if core is None:
            core = self._factory(self._registry.storage(name), self.alarms.for_object(name))
            await core.initialize()
            self._instances[name] = core
        return core

    async def _call(self, name: str, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        sent = json.loads(json.dumps(payload))
        async with self._registry.lock(name):
            result = await (await self._core(name)).call(method, sent)
        received: dict[str, Any] = json.loads(json.dumps(result))
        return received

    async def run_due_alarms(self, now: float) -> list[str]:
        """Fire every alarm due at `now` (each object's `alarm()` under its lock, one object
        at a time); a handler that raises is logged and retried later with backoff
        (`AlarmTable.finish`). Returns the names of the objects whose alarm ran."""
        fired: list[str] = []
        for name, retry_count in self.alarms.due(now):
            self.alarms.start(name)
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
