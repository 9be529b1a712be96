"""The fake pin, real side: the scenario of scenario_fake_pin.py on workerd, in Pyodide.

Its transcript is returned to pytest, where tests/pyodide/test_fake_matches_pyodide.py runs
the same scenario on tests/fakes/js_runtime.py and requires the same transcript.
"""

from __future__ import annotations

from typing import Any

import harness_js
import scenario_fake_pin
from support import MODES, binding, unique
from workers import DurableObject

from bindings.cloudflare.d1 import CloudflareD1Database
from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage
from bindings.cloudflare.kv import CloudflareKVNamespace


class ProbeObject(DurableObject):  # type: ignore[misc]
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)


async def test_scenario_transcript_on_workerd() -> dict[str, Any]:
    transcripts = {}
    for mode in MODES:
        js_storage = harness_js.newStorage()
        if mode == "wrapped":
            state = harness_js.newDurableObjectState(js_storage)
            storage = ProbeObject(state, harness_js.env).ctx.storage
        else:
            storage = js_storage
        transcripts[mode] = await scenario_fake_pin.run(
            CloudflareKVNamespace(binding("KV", mode)),
            CloudflareD1Database(binding("DB", mode)),
            CloudflareDurableObjectStorage(storage),
            unique(f"pin-{mode}"),
        )
    return transcripts
