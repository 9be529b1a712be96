"""Double of `worker.cron` (the real dispatcher's lifecycle jobs import pydantic).

Records what `worker/entry.py`'s `scheduled` handed the dispatcher in KV (through the real KV
adapter, from the cron invocation's own bindings), where the harness reads it once workerd's
`scheduled()` has returned.
"""

from __future__ import annotations

import json
from typing import Any

CRON_RECORD_KEY = "tier:cron"


async def run_scheduled(cron: str, scheduled_time: float, bindings: Any) -> None:
    await bindings.kv.put(
        CRON_RECORD_KEY,
        json.dumps(
            {
                "cron": cron,
                "cron_type": type(cron).__name__,
                "scheduled_time": scheduled_time,
                "scheduled_time_type": type(scheduled_time).__name__,
            }
        ),
    )
