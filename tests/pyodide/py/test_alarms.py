"""The alarm of `bindings.cloudflare.do_sql.CloudflareDurableObjectStorage` in real Pyodide
against the harness's JS model of a Durable Object's alarm (tests/pyodide/models.mjs
`AlarmModel`, written from Cloudflare's documented semantics), raw and through the SDK's
wrapped `ctx.storage`."""

from __future__ import annotations

from typing import Any

import harness_js
from workers import DurableObject

from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage


class ProbeObject(DurableObject):  # type: ignore[misc]
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)


def adapters() -> list[tuple[str, Any, CloudflareDurableObjectStorage]]:
    """(mode, JS state, adapter): raw `ctx.storage` and the SDK-wrapped one."""
    raw_state = harness_js.newDurableObjectState(harness_js.newStorage())
    wrapped_state = harness_js.newDurableObjectState(harness_js.newStorage())
    obj = ProbeObject(wrapped_state, harness_js.env)
    return [
        ("raw", raw_state, CloudflareDurableObjectStorage(raw_state.storage)),
        ("wrapped", wrapped_state, CloudflareDurableObjectStorage(obj.ctx.storage)),
    ]


async def test_set_get_and_delete_cross_in_milliseconds_and_null_is_none() -> None:
    for mode, state, alarms in adapters():
        assert await alarms.get_alarm() is None, mode  # JS null (jsnull in raw mode)
        await alarms.set_alarm(1_750_000_000.25)
        # Integer milliseconds reach JS (rounded up, never early), seconds come back.
        assert state.alarms.scheduled == 1_750_000_000_250, mode
        assert await alarms.get_alarm() == 1_750_000_000.25, mode
        await alarms.set_alarm(1_750_000_100.0)  # one alarm per object: replaced
        assert await alarms.get_alarm() == 1_750_000_100.0, mode
        await alarms.delete_alarm()
        assert await alarms.get_alarm() is None, mode
        try:
            await alarms.set_alarm(float("nan"))
        except ValueError:
            pass
        else:
            raise AssertionError(f"{mode}: a NaN alarm time was sent")
