"""An httpx transport over `fetch`, for every outbound call on Workers. Pyodide's own transport
lets fetch follow redirects, re-sending a tenant's credential wherever a 3xx points; this one
passes `redirect: "manual"` (tests/pyodide/py/test_http.py). fetch has undone
`Content-Encoding`, so that header and `Content-Length` are dropped. A timeout
(`AbortSignal.timeout`) becomes `ReadTimeout`, any other failure `ConnectError`.
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
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        headers = js.Headers.new()
        for name, value in request.headers.multi_items():
            if name.lower() not in _SKIPPED_REQUEST_HEADERS:
                headers.append(name, value)
        init: dict[str, Any] = {"method": request.method, "headers": headers, "redirect": "manual"}
        if body:
            init["body"] = to_js(body)  # a Uint8Array
        # The longest of httpx's connect/read/write/pool timeouts (None: no limit).
        timeouts = [t for t in (request.extensions.get("timeout") or {}).values() if t is not None]
        if timeouts:
            init["signal"] = js.AbortSignal.timeout(max(1, int(max(timeouts) * 1000)))
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
