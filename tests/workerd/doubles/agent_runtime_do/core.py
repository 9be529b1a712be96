"""Double of `agent_runtime_do.core` (the real core imports numpy and pydantic).

`worker/entry.py`'s `AgentRuntime` builds it exactly as it builds the real core — with the
real `CloudflareDurableObjectStorage` over the SDK-wrapped `ctx.storage`, the object's
bindings (real adapters, from the environment double) and the real `CloudflareAlarms` — and
forwards `call` and `alarm` to it. What it records comes back in RPC results or in signals
to the harness. RPC methods:

  echo            the payload as received (with Python types) and a nested result
  database_size   `storage.sql.database_size` before and after 320 KiB of inserts
  background      work given to `bindings.background` (the object's waitUntil), after the answer
  arm_alarm       sets an alarm for now; the handler fails while retry_count < fail_below
"""

from __future__ import annotations

import time
from typing import Any

import harness_signal
from value_shapes import shape

# A result with nested values of every JSON kind, None included, to cross back to the caller.
NESTED_RESULT: dict[str, Any] = {
    "none": None,
    "text": "é ✓",
    "int": 7,
    "float": 2.5,
    "bool": True,
    "list": [1, None, {"deep": [False, "x"]}],
    "object": {"inner": {"none": None, "empty": {}, "empty_list": []}},
}
FILL_ROWS = 320
FILL_ROW_BYTES = 1024


class AgentRuntimeCore:
    def __init__(self, storage: Any, bindings: Any, alarms: Any = None) -> None:
        self.storage = storage
        self.bindings = bindings
        self.alarms = alarms
        self.initialized = False
        self.alarm_plan: dict[str, Any] = {}

    async def initialize(self) -> None:
        self.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS tier_fill (id INTEGER PRIMARY KEY, data BLOB)"
        )
        self.initialized = True

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        if method == "echo":
            return {
                "initialized_first": self.initialized,
                "received": payload,
                "received_shape": shape(payload),
                "nested": NESTED_RESULT,
            }
        if method == "database_size":
            sql = self.storage.sql
            before = sql.database_size
            for _ in range(FILL_ROWS):
                sql.exec("INSERT INTO tier_fill (data) VALUES (zeroblob(?))", FILL_ROW_BYTES)
            return {"before": before, "after": sql.database_size}
        if method == "background":
            tag = payload["tag"]

            async def work() -> None:
                db = self.bindings.db
                await db.prepare(
                    "CREATE TABLE IF NOT EXISTS tier_background (tag TEXT PRIMARY KEY, source TEXT)"
                ).run()
                await (
                    db.prepare("INSERT INTO tier_background (tag, source) VALUES (?, ?)")
                    .bind(tag, "durable-object")
                    .run()
                )
                await harness_signal.signal(
                    self.bindings.signal_url, f"background-{tag}", {"tag": tag}
                )

            self.bindings.background.wait_until(work())
            return {"scheduled": tag}
        if method == "arm_alarm":
            self.alarm_plan = dict(payload)
            at = time.time()
            await self.alarms.set_alarm(at)
            return {"armed": at}
        raise ValueError(f"the double has no method {method!r}")

    async def alarm(self, retry_count: int = 0) -> None:
        plan = self.alarm_plan
        note = {
            "retry_count": retry_count,
            "retry_count_type": type(retry_count).__name__,
            # Inside its handler the alarm that fired is no longer set (docs: alarms.mdx).
            "alarm_inside_handler": await self.alarms.get_alarm(),
        }
        await harness_signal.signal(self.bindings.signal_url, f"alarm-{plan.get('tag')}", note)
        if retry_count < int(plan.get("fail_below", 0)):
            raise RuntimeError("planned alarm failure (the runtime must retry)")
