"""Durable Object alarm port, with Cloudflare's semantics (durable-objects/api/alarms.mdx): one
alarm per object, setting replaces it, a past time fires at once, a raising handler is retried.
Times are epoch seconds; adapters convert to milliseconds.
"""

from __future__ import annotations

from typing import Protocol


class AlarmStorage(Protocol):
    async def get_alarm(self) -> float | None: ...

    async def set_alarm(self, at: float) -> None: ...

    async def delete_alarm(self) -> None: ...
