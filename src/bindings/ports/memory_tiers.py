"""The hot/warm/cold tier ports (`agent_memory.hot_warm_cold`, core code over the KV, D1 and
object-store ports). Values are text; keys follow `agent_memory.namespace`. A missing item
reads as None, deleting one is not an error; `ttl` is seconds (KV's minimum 60 applies, None:
no expiry); `upsert`/`upload_text` replace what the key held.
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
