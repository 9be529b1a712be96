"""`AlarmStorage` over `ctx.storage` (wrapped, or raw where `null` is `jsnull`): JS speaks
integer epoch milliseconds (durable-objects/api/alarms.mdx), the port epoch seconds.
"""

from __future__ import annotations

import math
from typing import Any

from bindings.cloudflare import ffi


class CloudflareAlarms:
    def __init__(self, storage: Any) -> None:
        self._storage = storage

    async def get_alarm(self) -> float | None:
        value = ffi.to_py(await self._storage.getAlarm())
        return None if value is None else float(value) / 1000.0

    async def set_alarm(self, at: float) -> None:
        if not math.isfinite(at):
            raise ValueError(f"an alarm time must be a finite number of seconds, not {at!r}")
        await self._storage.setAlarm(math.ceil(at * 1000.0))

    async def delete_alarm(self) -> None:
        await self._storage.deleteAlarm()
