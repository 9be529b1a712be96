"""The Worker's main module, the only one importing `workers` (the Pyodide SDK). It converts and
nothing more: `workers.Request` -> `worker.app.handle` -> `workers.Response`, crons to
`worker.cron`, the `AgentRuntime` Durable Object (which must live in the main module) to its core.
Snapshot rules: nothing at module level reads time, randomness, env or I/O.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from workers import DurableObject, Request, Response, WorkerEntrypoint

from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage
from bindings.cloudflare.environment import build_bindings
from bindings.cloudflare.ffi import field, jsnull, to_py
from bindings.cloudflare.queue import received, settle
from http_messages import (
    Headers,
    HttpRequest,
    HttpResponse,
    internal_error,
    payload_too_large,
    secure_response,
)
from worker.app import handle
from worker.cron import run_scheduled

__all__ = ["AgentRuntime", "Default"]
log = logging.getLogger(__name__)

# Fetch spec: a Response with one of these statuses must have a null body (JS throws).
NULL_BODY_STATUSES = frozenset({101, 204, 205, 304})


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Response:
        if not isinstance(request, Request):  # a bare js.Request (older runtimes)
            request = Request(request)
        try:
            bindings = build_bindings(self.env, self.ctx)
        except ValidationError:
            # A bad var: say so in the log, answer with the API's JSON error, not HTML.
            log.exception("Worker vars failed validation")
            return early_response(request, internal_error().to_response())
        limit = bindings.settings.max_body_bytes
        declared = request.headers.get("content-length")
        # Refused before reading when declared too large (the body is never buffered); without
        # Content-Length (a chunked body) the size is known only while reading.
        too_large = declared is not None and declared.isdigit() and int(declared) > limit
        body = None if too_large else await read_body(request, limit)
        if body is None:
            return early_response(request, payload_too_large(limit).to_response())
        http_request = HttpRequest(
            # As the client sent it (the router answers 404/405): the SDK's `request.method`
            # raises for one outside Python's HTTPMethod (`PROPFIND`; tests/workerd).
            method=str(request.js_object.method),
            url=str(request.url),
            headers=Headers(list(request.headers.items())),
            body=body,
        )
        return to_workers_response(await handle(http_request, bindings))

    async def scheduled(self, controller: Any, env: Any = None, ctx: Any = None) -> None:
        """Cron trigger. workerd passes three positional arguments and, for a class
        entrypoint, env/ctx as undefined: the real ones are `self.env`/`self.ctx`."""
        bindings = build_bindings(self.env, self.ctx)
        scheduled_time = float(controller.scheduledTime) / 1000.0  # ms -> s
        await run_scheduled(str(controller.cron), scheduled_time, bindings)

    async def queue(self, batch: Any, env: Any = None, ctx: Any = None) -> None:
        """The change feed's queues (docs/portability.md): each message acked or retried as
        the consumer says; one it gave no verdict is retried."""
        from worker.portability_routes import consume  # on the first batch, not at start-up

        bindings = build_bindings(self.env, self.ctx)
        messages = received(batch)
        verdicts = await consume(str(batch.queue), [m for m, _ in messages], bindings)
        for message, js_message in messages:
            settle(js_message, verdicts.get(message.id, 10))


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as more than `limit` bytes have arrived: read chunk
    by chunk from its stream, which is cancelled then. `request.bytes()` would buffer all of
    a chunked body first, however large, or wait forever for one that never ends."""
    stream = request.js_object.body
    if stream is None or stream is jsnull:  # no body (GET, HEAD, an empty POST)
        return b""
    reader = stream.getReader()
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            step = await reader.read()
            if step.done:
                break
            chunk = step.value.to_bytes()  # a Uint8Array
            size += len(chunk)
            if size > limit:
                await reader.cancel()
                return None
            chunks.append(chunk)
    finally:
        reader.releaseLock()
    return b"".join(chunks)


def early_response(request: Request, response: HttpResponse) -> Response:
    """An answer given before `handle` runs (413, a bad var's 500), with the security headers
    `handle` gives every other answer (issue 26)."""
    return to_workers_response(secure_response(HttpRequest("GET", str(request.url)), response))


def to_workers_response(response: HttpResponse) -> Response:
    body = None if response.status in NULL_BODY_STATUSES else response.body
    return Response(body, status=response.status, headers=response.headers.items())


# The SDK's DurableObject.__init_subclass__ (which wraps __init__) has no annotations.
class AgentRuntime(DurableObject):  # type: ignore[no-untyped-call,unused-ignore]
    """One agent instance. RPC: `call(method, payload)` for every method of the core."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        # Imported on the isolate's first object, not at start-up (docs/pyodide.md "Start-up").
        from agent_runtime_do.core import AgentRuntimeCore

        storage = CloudflareDurableObjectStorage(self.ctx.storage)
        # Private: every public attribute of a Durable Object is reachable over RPC.
        self._core = AgentRuntimeCore(storage, build_bindings(self.env, self.ctx), alarms=storage)
        # No await in a constructor: workerd holds every event until the schema exists.
        self.ctx.blockConcurrencyWhile(self._core.initialize)

    async def call(self, method: str, payload: Any = None) -> dict[str, Any]:
        return await self._core.call(str(method), _payload(payload))

    async def alarm(self, alarm_info: Any = None) -> None:
        """The core clears, retries and reports, then sets the next alarm itself; an exception
        here makes Cloudflare retry (2 s backoff, 6 times; durable-objects/api/alarms.mdx)."""
        await self._core.alarm(alarm_retry_count(alarm_info))


def alarm_retry_count(alarm_info: Any) -> int:
    """`alarmInfo.retryCount`: workerd passes an `AlarmInvocationInfo` (a JS class instance,
    which `to_py` leaves a JsProxy: read as an attribute); a plain object works too; absent
    means a first try."""
    value = to_py(field(to_py(alarm_info), "retryCount"))
    return int(value) if isinstance(value, int | float) and value >= 0 else 0


def _payload(payload: Any) -> dict[str, Any]:
    # RPC arguments arrive converted by the SDK (JsDict); older runtimes hand us a JsProxy.
    value = to_py(payload)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"RPC payload must be an object, got {type(value).__name__}")
    return value
