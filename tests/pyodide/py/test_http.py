"""The Cloudflare httpx transport (`js.fetch` with `redirect: "manual"`) against a loopback
upstream, in real Pyodide with the fetch of the JS runtime (Node's, standing in for
workerd's: both implement the Fetch standard's `redirect: "manual"` by returning the 3xx
response itself)."""

from __future__ import annotations

import json

import harness_js
import httpx

from bindings.cloudflare.http import CloudflareFetchTransport


def _received() -> list[dict[str, object]]:
    return [dict(item) for item in harness_js.upstream.received.to_py()]


async def test_a_redirect_is_relayed_as_is_and_never_followed_with_the_credential() -> None:
    base = harness_js.upstream.url
    harness_js.upstream.received.length = 0
    async with httpx.AsyncClient(transport=CloudflareFetchTransport()) as client:
        response = await client.get(
            f"{base}/redirect",
            params={"to": f"{base}/landing", "api_key": "tenant-secret"},
            headers={"authorization": "Bearer tenant-secret"},
        )
    assert response.status_code == 302
    assert response.headers["location"] == f"{base}/landing"
    assert response.headers["x-upstream"] == "1" and response.text == "moved"
    paths = [item["path"] for item in _received()]
    assert paths == ["/redirect"], f"the redirect was followed: {paths}"


async def test_workerds_fetch_returns_a_3xx_itself_with_redirect_manual() -> None:
    # What the transport relies on, checked on workerd's fetch (inside Miniflare): with
    # "manual" the 302 comes back and the target is never requested; with the default
    # "follow" workerd goes to the target.
    base = harness_js.upstream.url
    target = f"{base}/redirect?to={base}/landing"
    harness_js.upstream.received.length = 0
    manual = json.loads(await harness_js.workerdFetch(target, "manual"))
    assert manual == {"ok": {"status": 302, "location": f"{base}/landing"}}, manual
    assert [item["path"] for item in _received()] == ["/redirect"]
    followed = json.loads(await harness_js.workerdFetch(target, "follow"))
    assert followed["ok"]["status"] == 200, followed
    assert [item["path"] for item in _received()] == ["/redirect", "/redirect", "/landing"]


async def test_method_headers_body_and_status_cross_unchanged() -> None:
    base = harness_js.upstream.url
    harness_js.upstream.received.length = 0
    async with httpx.AsyncClient(transport=CloudflareFetchTransport()) as client:
        response = await client.post(
            f"{base}/tools/search?status=404",
            json={"q": "é"},
            headers={"x-tenant": "t1"},
        )
    assert response.status_code == 404
    assert response.json() == {"method": "POST", "path": "/tools/search"}
    # Repeated headers stay separate (Set-Cookie cannot be joined with commas).
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    [sent] = _received()
    assert json.loads(str(sent["body"])) == {"q": "é"}, sent["body"]
    headers = dict(sent["headers"])  # type: ignore[arg-type]
    assert headers["x-tenant"] == "t1" and headers["content-type"] == "application/json"


async def test_a_compressed_body_is_decoded_once() -> None:
    async with httpx.AsyncClient(transport=CloudflareFetchTransport()) as client:
        response = await client.get(f"{harness_js.upstream.url}/gzip")
    assert response.status_code == 200 and response.text == "hello, compressed"


async def test_an_unreachable_upstream_is_an_httpx_connect_error() -> None:
    async with httpx.AsyncClient(transport=CloudflareFetchTransport()) as client:
        try:
            await client.get("http://127.0.0.1:1/")
        except httpx.ConnectError as exc:
            assert "127.0.0.1:1" in str(exc) or "fetch failed" in str(exc), str(exc)
        else:
            raise AssertionError("a closed port answered")


async def test_the_clients_timeout_ends_a_request_as_an_httpx_timeout() -> None:
    # The upstream never answers; httpx's timeout becomes fetch's AbortSignal.timeout.
    transport = CloudflareFetchTransport()
    async with httpx.AsyncClient(transport=transport, timeout=0.05) as client:
        try:
            await client.get(f"{harness_js.upstream.url}/hang")
        except httpx.TimeoutException as exc:
            assert "/hang" in str(exc.request.url)
        else:
            raise AssertionError("a request to a silent upstream returned")
