"""An httpx transport over the runtime's `fetch`, for every outbound call on Workers.

httpx on Pyodide has no sockets; Pyodide's own httpx transport calls `fetch` without
`redirect: "manual"`, so fetch follows a 3xx itself, whatever the client's
`follow_redirects` says, and re-sends the request (a tenant's credential header or query
included) to wherever the upstream points. This transport always passes
`redirect: "manual"`, one of the two modes Workers' fetch supports (`follow`, `manual`:
developers.cloudflare.com workers/runtime-apis/request, `redirect`); with it the Fetch
standard returns the 3xx response itself, which is relayed as-is. tests/pyodide/py/test_http.py
checks the transport in Pyodide (over Node's fetch) and workerd's own fetch (in Miniflare)
with the same upstream: both return the 302 and never request its target.

Contract (what `httpx.AsyncBaseTransport` requires): one request in, one fully read
response out. Bodies are buffered (the gateway caps them anyway). fetch has already
decoded any `Content-Encoding`, so that header and `Content-Length` are dropped from the
response (httpx would otherwise decode the body a second time). Errors map to httpx's:
a timeout (`AbortSignal.timeout`, from the request's httpx timeout) to `ReadTimeout`,
any other fetch failure to `ConnectError`.
"""

from __future__ import annotations

from typing import Any

import httpx
import js
from pyodide.ffi import JsException, to_js

# Request headers fetch computes itself (or refuses): sending them would be ignored or fail.
_SKIPPED_REQUEST_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding"})
# Response headers that describe the wire form fetch has already undone.
_SKIPPED_RESPONSE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class CloudflareFetchTransport(httpx.AsyncBaseTransport):
    """`httpx.AsyncBaseTransport` over `js.fetch`, never following redirects."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        headers = js.Headers.new()
        for name, value in request.headers.multi_items():
            if name.lower() not in _SKIPPED_REQUEST_HEADERS:
                headers.append(name, value)
        init: dict[str, Any] = {
            "method": request.method,
            "headers": headers,
            "redirect": "manual",
        }
        if body:
            init["body"] = to_js(body)  # a Uint8Array
        timeout = _timeout_seconds(request)
        if timeout is not None:
            init["signal"] = js.AbortSignal.timeout(max(1, int(timeout * 1000)))
        try:
            response = await js.fetch(
                str(request.url), to_js(init, dict_converter=js.Object.fromEntries)
            )
            content = (await response.arrayBuffer()).to_bytes()
        except JsException as exc:
            message = f"fetch {request.method} {request.url.host}: {exc}"
            if getattr(exc, "name", "") in ("TimeoutError", "AbortError"):
                raise httpx.ReadTimeout(message, request=request) from exc
            raise httpx.ConnectError(message, request=request) from exc
        return httpx.Response(
            status_code=int(response.status),
            headers=_response_headers(response.headers),
            content=content,
            request=request,
        )


def _timeout_seconds(request: httpx.Request) -> float | None:
    """The longest of httpx's connect/read/write/pool timeouts (None: no limit)."""
    timeouts = request.extensions.get("timeout") or {}
    values = [value for value in timeouts.values() if value is not None]
    return max(values) if values else None


def _response_headers(headers: Any) -> list[tuple[str, str]]:
    # `entries()` joins repeated headers with ", ", which breaks Set-Cookie: take those
    # from getSetCookie() (Fetch standard; workerd and Node implement it).
    pairs = [
        (str(name), str(value))
        for name, value in headers.entries()
        if str(name).lower() not in _SKIPPED_RESPONSE_HEADERS and str(name).lower() != "set-cookie"
    ]
    pairs.extend(("set-cookie", str(cookie)) for cookie in headers.getSetCookie())
    return pairs
