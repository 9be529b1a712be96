"""`waitUntil` from a Durable Object and from a Worker invocation, with a bare coroutine and
through `CloudflareBackgroundTasks`: run in real Pyodide (test_background.py) and on the fake
runtime (tests/cloudflare/test_durable_objects_and_background.py); both must give the same
outcome table. Loads in both: `workers` and the adapter are imported inside `run`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


async def run(
    new_state: Callable[[], Any],
    new_execution_context: Callable[[], Any],
    env: Any,
    drain: Callable[[Any], Awaitable[list[str]]],
) -> dict[str, dict[str, bool]]:
    """`{"<context>/<how>": {"ran", "borrowed_proxy_error"}}` for each combination.

    `drain(ctx)` ends the "invocation": it settles what was handed to `ctx.waitUntil` and
    returns the messages of the promises that rejected.
    """
    from workers import DurableObject, WorkerEntrypoint

    from bindings.cloudflare.background import CloudflareBackgroundTasks

    class Probe(DurableObject):  # type: ignore[misc]
        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)  # the SDK's wrapper calls patchWaitUntil(ctx)

    class Worker(WorkerEntrypoint):  # type: ignore[misc]
        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)

    makers = {
        "durable_object": lambda: Probe(new_state(), env),
        "worker": lambda: Worker(new_execution_context(), env),
    }
    table: dict[str, dict[str, bool]] = {}
    for kind, make in makers.items():
        for how in ("coroutine", "adapter"):
            instance = make()
            ran: list[bool] = []

            async def work(ran: list[bool] = ran) -> None:
                ran.append(True)

            if how == "coroutine":
                instance.ctx.waitUntil(work())
            else:
                CloudflareBackgroundTasks(instance.ctx).wait_until(work())
            errors = await drain(instance.ctx)
            table[f"{kind}/{how}"] = {
                "ran": bool(ran),
                "borrowed_proxy_error": any("borrowed proxy" in error for error in errors),
            }
    return table
