"""Issue 26, finding 1 (CSRF on the Access-gated routes), over every state-changing `ACCESS`
route of `worker.app.ROUTES`.

Before, the `CF_Authorization` cookie alone was accepted with any content type and any
`Origin`/`Sec-Fetch-Site`: a page of another site auto-submitting an `enctype=text/plain`
form whose body is JSON (`{"input":"plant=..."}`) created a run. Now such a request gets
403 `cross_site_request` and nothing in the state folder changes; the
`Cf-Access-Jwt-Assertion` header, or the cookie on a same-origin JSON request, is accepted.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.runtime import LocalRuntime
from worker.app import ACCESS, ROUTES, handle
from worker.identity import ACCESS_COOKIE, ACCESS_HEADER

BASE = "http://127.0.0.1:8790"
EVIL = "https://evil.example"
TENANT = "acme"
ULID = "01JAAAAAAAAAAAAAAAAAAAAAAA"

# A body each route's model accepts (None: the route takes none). Strings carry the "=" a
# text/plain form puts between its field's name and value: the body stays valid JSON.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/agents/{tenant}/{agent_type}/run"): {"input": "planted by evil.example="},
    ("POST", "/v1/agents/{tenant}/{agent_type}/runs/{run_id}/outcome"): {"score": 1.0},
    ("POST", "/admin/tenants/{tenant}/agents/{agent_type}/packs"): {
        "name": "evil",
        "workflow_id": "w=",
        "instance_id": "default",
    },
    ("PUT", "/admin/tenants/{tenant}/lifecycle"): {"episode_retention_days": 1},
    ("POST", "/admin/tenants/{tenant}/prune"): {"dry_run": False},
    ("POST", "/admin/tenants/{tenant}/reconcile"): {},
    ("POST", "/admin/tenants/{tenant}/facts/{fact_id}/restore"): {},
    ("POST", "/admin/tenants/{tenant}/events/{event_id}/replay"): {},
    ("POST", "/admin/tenants/{tenant}/namespace-backfill"): {"dry_run": False},
    ("POST", "/admin/tenants/{tenant}/recall/explain"): {"query": "planted="},
    ("POST", "/admin/tenants/{tenant}/memory-tokens"): {"agent_id": "evil"},
}

STATE_CHANGING = sorted(
    (route.method, route.path)
    for route in ROUTES
    if route.auth is ACCESS and route.method not in ("GET", "HEAD", "OPTIONS")
)


def _concrete(path: str) -> str:
    for name, value in (("tenant", TENANT), ("agent_type", "assistant"), ("name", "evil")):
        path = path.replace("{" + name + "}", value)
    for name in ("run_id", "fact_id", "jti", "grant_id", "event_id"):
        path = path.replace("{" + name + "}", ULID)
    return path.replace("{subject}", "someone")


def _request(method: str, path: str, headers: dict[str, str]) -> HttpRequest:
    body = BODIES.get((method, path))
    data = b"" if body is None else json.dumps(body).encode()
    return HttpRequest(method, BASE + _concrete(path), Headers(headers), data)


def snapshot(state: Path) -> dict[str, Any]:
    """Everything the runtime keeps: each SQLite database's rows (D1, KV, Durable Objects),
    every other file's bytes."""
    found: dict[str, Any] = {}
    for file in sorted(state.rglob("*")):
        if not file.is_file() or file.name.endswith(("-wal", "-shm", "-journal")):
            continue
        if file.read_bytes()[:16] == b"SQLite format 3\x00":
            with sqlite3.connect(f"file:{file}?mode=ro", uri=True) as db:
                found[str(file)] = list(db.iterdump())
        else:
            found[str(file)] = file.read_bytes()
    return found


# The ways a page of another site (or a cookie-only client) sends a state-changing request.
REFUSED = {
    "text/plain form, cross-site": {
        "content-type": "text/plain",
        "origin": EVIL,
        "sec-fetch-site": "cross-site",
    },
    "urlencoded form, cross-site": {
        "content-type": "application/x-www-form-urlencoded",
        "origin": EVIL,
        "sec-fetch-site": "cross-site",
    },
    "JSON fetch, cross-site": {
        "content-type": "application/json",
        "origin": EVIL,
        "sec-fetch-site": "cross-site",
    },
    "JSON fetch, same-site subdomain": {
        "content-type": "application/json",
        "origin": "http://evil.127.0.0.1:8790",
        "sec-fetch-site": "same-site",
    },
    "cookie only, text/plain": {"content-type": "text/plain"},
    "cookie only, same-origin but text/plain": {
        "content-type": "text/plain",
        "origin": BASE,
        "sec-fetch-site": "same-origin",
    },
    "cookie only, JSON but no origin": {"content-type": "application/json"},
}


@pytest.mark.parametrize(("method", "path"), STATE_CHANGING)
async def test_a_cross_site_or_cookie_only_request_is_refused_and_changes_nothing(
    agent_runtime: LocalRuntime, token: str, method: str, path: str
) -> None:
    before = snapshot(agent_runtime.state.root)
    for case, headers in REFUSED.items():
        request = _request(method, path, {**headers, "cookie": f"{ACCESS_COOKIE}={token}"})
        response = await handle(request, agent_runtime.bindings())
        assert response.status == 403, (case, response.body)
        assert response.json()["error"]["code"] == "cross_site_request", case
        assert snapshot(agent_runtime.state.root) == before, case


@pytest.mark.parametrize(("method", "path"), STATE_CHANGING)
async def test_the_header_and_a_same_origin_json_cookie_request_pass_the_gate(
    agent_runtime: LocalRuntime, token: str, method: str, path: str
) -> None:
    accepted = {
        "header": {ACCESS_HEADER: token, "content-type": "application/json"},
        # A header cannot be set by another site: it needs no origin, nor JSON.
        "header, text/plain, cross-site": {
            ACCESS_HEADER: token,
            "content-type": "text/plain",
            "origin": EVIL,
            "sec-fetch-site": "cross-site",
        },
        "cookie, same-origin JSON": {
            "cookie": f"{ACCESS_COOKIE}={token}",
            "content-type": "application/json",
            "origin": BASE,
            "sec-fetch-site": "same-origin",
        },
        "cookie, Sec-Fetch-Site only": {
            "cookie": f"{ACCESS_COOKIE}={token}",
            "content-type": "application/json; charset=utf-8",
            "sec-fetch-site": "same-origin",
        },
    }
    for case, headers in accepted.items():
        response = await handle(_request(method, path, headers), agent_runtime.bindings())
        # Past the gate: the handler answered (a made-up id is its 404, not a 401/403).
        assert response.status not in (401, 403), (case, response.status, response.body)


async def test_a_same_origin_json_request_with_the_cookie_runs_the_agent(
    agent_runtime: LocalRuntime, token: str
) -> None:
    """The accepted cookie case does what it says (and the snapshot sees a change)."""
    before = snapshot(agent_runtime.state.root)
    path = "/v1/agents/{tenant}/{agent_type}/run"
    headers = {
        "cookie": f"other=1; {ACCESS_COOKIE}={token}",
        "content-type": "application/json",
        "origin": BASE,
        "sec-fetch-site": "same-origin",
    }
    response = await handle(_request("POST", path, headers), agent_runtime.bindings())
    assert response.status == 200, response.body
    assert snapshot(agent_runtime.state.root) != before


async def test_reads_with_the_cookie_alone_still_work(
    agent_runtime: LocalRuntime, token: str
) -> None:
    request = HttpRequest(
        "GET",
        f"{BASE}/admin/agents/{TENANT}/runs",
        Headers({"cookie": f"{ACCESS_COOKIE}={token}", "sec-fetch-site": "cross-site"}),
    )
    response: HttpResponse = await handle(request, agent_runtime.bindings())
    assert response.status == 200, response.body


def test_over_http_the_text_plain_form_is_refused_and_same_origin_json_accepted(
    agent_runtime: LocalRuntime, token: str, served: str
) -> None:
    """Through the dev server: the origin compared is the one the browser addressed."""
    url = f"{served}/v1/agents/{TENANT}/assistant/run"
    body = b'{"input":"planted by evil.example="}'
    cookie = {"cookie": f"{ACCESS_COOKIE}={token}"}
    form = httpx.post(
        url,
        content=body,
        headers={**cookie, "content-type": "text/plain", "origin": EVIL},
    )
    assert form.status_code == 403
    assert form.json()["error"]["code"] == "cross_site_request"
    runs = httpx.get(f"{served}/admin/agents/{TENANT}/runs", headers={ACCESS_HEADER: token})
    assert runs.json()["runs"] == []
    same = httpx.post(
        url,
        content=body,
        headers={**cookie, "content-type": "application/json", "origin": served},
    )
    assert same.status_code == 200, same.text
