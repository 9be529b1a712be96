"""The three tier ports of the hot/warm/cold ADR, as `agent_memory.hot_warm_cold.MemoryClient` sees
them. Values are text (the caller encodes JSON); keys are item keys of the namespace contract
(`<service>:<tenantId>:<sessionId>:<memoryKind>:<entityId>`, `agent_memory.namespace`).

On Cloudflare hot is KV, warm is D1 and cold is R2; their implementations
(`agent_memory.hot_warm_cold`) are core code over the existing KV, D1 and
object-store ports, so they run unchanged in CPython and Pyodide and need no FFI of their own.

* A missing item reads as None in every tier; deleting a missing item is not an error.
* `HotMemory.set`'s `ttl` is seconds (KV's minimum, 60, applies); None keeps it until deleted.
* `WarmMemory.upsert` and `ColdMemory.upload_text` replace what the key held (an immutable
  record, such as an episode, is inserted if absent: the same key always names the same
  record).
"""

from __future__ import annotations

from typing import Protocol


class HotMemory(Protocol):
    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl: int | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...


class WarmMemory(Protocol):
    async def read(self, key: str) -> str | None: ...

    async def upsert(self, key: str, value: str) -> None: ...

    async def delete(self, key: str) -> None: ...


class ColdMemory(Protocol):
    async def download_text(self, key: str) -> str | None: ...

    async def upload_text(self, key: str, value: str) -> None: ...

    async def delete(self, key: str) -> None: ...
