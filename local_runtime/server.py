"""The local dev server: an ASGI app serving `worker.app.handle`, run by uvicorn.

It also answers `/cdn-cgi/handler/scheduled?cron=...` (and `/cdn-cgi/local/scheduled`) as
`wrangler dev` does, and fires Durable Object alarms as they fall due. The scheduled endpoints
run every tenant's jobs, so they need a platform admin's Access token in the header (never the
cookie: another site can make a browser send cookies, not headers). The path is taken from the
raw request target, still percent-encoded, as on Cloudflare (uvicorn's decoded `path` would
turn `%2F` into a separator). Every refusal, even of a request uvicorn cannot parse, is JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any, Literal
from urllib.parse import quote

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from authorization.operator_grants import granted
from http_messages import (
    ApiError,
    Headers,
    HttpRequest,
    HttpResponse,
    json_response,
    method_not_allowed,
    secure_response,
    validation_error,
)
from local_runtime.runtime import LocalRuntime
from local_runtime.static_assets import serve_asset
from worker.app import ROUTES, handle
from worker.cron import run_scheduled
from worker.identity import ACCESS_HEADER, verify_access_token
from worker.openapi import document

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SCHEDULED_PATHS = frozenset({"/cdn-cgi/handler/scheduled", "/cdn-cgi/local/scheduled"})

# A Host header we may put into the request URL: a name or IPv4 (or a bracketed IPv6) and a
# port. Anything else (a `/`, `@`, `?`...) would change how the URL parses, so it is replaced.
_HOST_RE = re.compile(r"(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")
# Characters kept as they are in the raw path; everything else (non-ASCII bytes, controls,
# spaces) is percent-encoded, so the path the router sees is plain ASCII.
_PATH_SAFE = "/%!$&'()*+,;=:@-._~"

INVALID_HTTP_BODY = json.dumps(
    {
        "error": {
            "code": "invalid_http_request",
            "message": "the request is not valid HTTP/1.1 (unknown method or malformed line)",
        }
    }
).encode()


class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
    """Uvicorn's httptools protocol, answering what it cannot parse (`FOO /x`) with a JSON
    400 instead of uvicorn's text/plain one."""

    def send_400_response(self, msg: str) -> None:
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(INVALID_HTTP_BODY)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
                INVALID_HTTP_BODY,
            ]
        )
        self.transport.write(b"".join(head))
        self.transport.close()


class LocalWorkerApp:
    """ASGI adapter: HTTP in → `HttpRequest` → the Worker's handler → HTTP out."""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self._alarms: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = await self._read_request(scope, receive)
        response = await self.dispatch(request)
        log.info("%s %s %d", request.method, loggable_path(request.path), response.status)
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [(k.lower().encode(), v.encode()) for k, v in response.headers.items()],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    async def dispatch(self, request: HttpRequest) -> HttpResponse:
        if request.path in SCHEDULED_PATHS:
            if request.method != "GET":
                return secure_response(request, method_not_allowed(["GET"]).to_response())
            return secure_response(request, await self._scheduled(request))
        if request.path == "/openapi.json" and request.method == "GET":
            # The Worker's document plus this server's own scheduled endpoints; answered
            # here, so with the headers `handle` gives the Worker's answers (issue 26).
            return secure_response(request, json_response(document(ROUTES, local=True)))
        # Workers Static Assets answer before the Worker (the inspector at /admin/ui/).
        asset = serve_asset(request)
        if asset is not None:
            return asset
        return await handle(request, self.runtime.bindings())

    async def _scheduled(self, request: HttpRequest) -> HttpResponse:
        try:
            await self._require_platform_admin(request)
            cron, raw_time = request.query.get("cron", ""), request.query.get("time")
            if not cron:
                raise validation_error("query parameter 'cron' is required")
            now = self.runtime.clock.now()
            scheduled_time = parse_scheduled_time(raw_time) if raw_time else now
        except ApiError as exc:
            return exc.to_response()
        result = await run_scheduled(cron, scheduled_time, self.runtime.bindings())
        await self.runtime.background.drain()
        return json_response(result)

    async def _require_platform_admin(self, request: HttpRequest) -> None:
        """The scheduled endpoints' gate: a verified Access token in the header (the cookie
        is not enough) whose identity has the platform-admin role; else 401 / 403."""
        token = (request.headers.get(ACCESS_HEADER) or "").strip()
        if not token:
            message = (
                f"the scheduled endpoint needs a platform admin's Access token ({ACCESS_HEADER})"
            )
            raise ApiError(401, "access_token_missing", message)
        bindings = self.runtime.bindings()
        identity = await verify_access_token(token, bindings)
        if not await granted(identity, None, bindings):
            raise ApiError(403, "tenant_forbidden", "the scheduled endpoint needs a platform admin")

    async def _read_request(self, scope: Scope, receive: Receive) -> HttpRequest:
        # Read at most one byte past the limit: the Worker then answers 413 without us
        # buffering an arbitrarily large body.
        limit = self.runtime.settings.max_body_bytes + 1
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            if size < limit:
                chunks.append(chunk[: limit - size])
            size += len(chunk)
            more = message.get("more_body", False)
        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        if not _HOST_RE.fullmatch(host):
            host = "127.0.0.1"
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
        path = quote(raw_path, safe=_PATH_SAFE)
        query = quote(scope.get("query_string", b""), safe=_PATH_SAFE + "?")
        url = f"http://{host}{path}" + (f"?{query}" if query else "")
        headers = Headers(
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])
        )
        # As Cloudflare does: the client's address, whatever the client sent in its place.
        headers.set("cf-connecting-ip", (scope.get("client") or ("unknown",))[0])
        return HttpRequest(scope["method"], url, headers, b"".join(chunks))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.runtime.migrate()
                # Durable Object alarms fire while the server runs, as on Cloudflare.
                self._alarms = asyncio.get_running_loop().create_task(self.runtime.run_alarms())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._alarms is not None:
                    self._alarms.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._alarms
                await self.runtime.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


ROUTE_WORDS = frozenset(
    {"cdn-cgi", "handler", "local", "scheduled", "ui"}
    | {s for route in ROUTES for s in route.path.split("/") if s and not s.startswith("{")}
)


def loggable_path(path: str) -> str:
    """The request path as the access log shows it (logs carry ids and hashes only): the
    route's own words are kept; every other segment — a tenant, an id, a subject or a key,
    any of which may name a person — becomes a short SHA-256; the query string is dropped.
    (Uvicorn's own access log, which prints the full target, is switched off.)"""
    segments = []
    for segment in path.split("?", 1)[0].split("/"):
        if not segment or segment in ROUTE_WORDS:
            segments.append(segment)
        else:
            segments.append("~" + hashlib.sha256(segment.encode()).hexdigest()[:8])
    return "/".join(segments)


def parse_scheduled_time(raw: str) -> float:
    """`?time=` of the scheduled endpoint (epoch ms) as epoch seconds; a 422 unless it is a
    finite, non-negative number."""
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 <= value < 1e15):  # also false for NaN
        raise validation_error(
            "query parameter 'time' must be epoch milliseconds (a non-negative number)"
        )
    return value / 1000


# Not 8787 (wrangler dev's default): Cursor's desktop app reportedly listens on
# localhost:8787 for its own OAuth callback, so a dev server there breaks Cursor's login.
DEFAULT_PORT = 8790


def serve(runtime: LocalRuntime, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve until interrupted (the `agent-memory dev` command)."""
    config = uvicorn.Config(
        LocalWorkerApp(runtime),
        host=host,
        port=port,
        log_level="info",
        access_log=False,  # `LocalWorkerApp` logs each request with `loggable_path`
        http=JsonErrorHttpToolsProtocol,
    )
    uvicorn.Server(config).run()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serving_in_thread(
    app: Any, *, lifespan: Literal["auto", "on", "off"] = "auto"
) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a background thread (tests, benchmarks,
    loopback upstreams); yields its base URL and stops the server when the block exits."""
    port = free_port()
    # loop="asyncio": uvloop would be installed as the process-wide event loop policy and
    # leak into the caller's own loops (pytest-asyncio); the dev command keeps "auto".
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan=lifespan,
        loop="asyncio",
        http=JsonErrorHttpToolsProtocol,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:  # uvicorn offers no readiness event to wait on
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("loopback server failed to start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextlib.contextmanager
def running_server(runtime: LocalRuntime) -> Iterator[str]:
    """Run the dev server for `runtime` in a background thread; yields its base URL."""
    with serving_in_thread(LocalWorkerApp(runtime)) as base:
        yield base
