"""Issue 26, finding 2: the inspector and every admin response carry security headers.

Before, the inspector could be framed by any site and no response sent a CSP
(`frame-ancestors`), `X-Frame-Options`, `X-Content-Type-Options` or `Referrer-Policy`;
`public/` had no `_headers` for Workers Static Assets; admin JSON holding personal data had
no `Cache-Control: no-store`. The inspector's headers come from `public/_headers` (Cloudflare
applies it to static assets; `agent-memory dev` applies the same file), the API's from
`worker.app.handle`. The framing itself is refused in Chromium: tests/inspector/test_framing.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from http_messages import Headers, HttpRequest
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from local_runtime.static_assets import ASSETS_DIR, header_rules
from tests.fakes.embedder import HashingEmbedder
from worker.app import ACCESS, ACCESS_SIGNED_IN, MEMORY_TOKEN, ROUTES, handle
from worker.identity import ACCESS_HEADER

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# server starts once, not once per worker.
pytestmark = pytest.mark.xdist_group("security-headers")

ULID = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def assert_not_frameable(headers: httpx.Headers | Headers, where: str) -> None:
    csp = headers.get("content-security-policy") or ""
    assert "frame-ancestors 'none'" in csp, (where, csp)
    assert headers.get("x-frame-options") == "DENY", where
    assert headers.get("x-content-type-options") == "nosniff", where
    assert headers.get("referrer-policy") == "no-referrer", where


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The dev server on a fresh state folder; its base URL and an operator's token."""
    runtime = LocalRuntime.open(
        tmp_path_factory.mktemp("headers") / "state", embedder=HashingEmbedder()
    )
    with running_server(runtime) as base:
        token = mint_token(runtime.state.access, "operator@localhost", now=runtime.clock.now())
        yield base, token


@pytest.mark.parametrize(
    "path", ["/admin/ui/", "/admin/ui/app.js", "/admin/ui/style.css", "/admin/ui"]
)
def test_the_inspectors_files_cannot_be_framed_or_sniffed(
    served: tuple[str, str], path: str
) -> None:
    base, _ = served
    response = httpx.get(base + path)
    assert response.status_code in (200, 307)
    assert_not_frameable(response.headers, path)
    csp = response.headers["content-security-policy"]
    # The page runs only its own script and talks only to its own origin.
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp


def test_the_headers_file_is_configuration_not_an_asset(served: tuple[str, str]) -> None:
    base, _ = served
    response = httpx.get(f"{base}/_headers")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_the_headers_file_covers_every_inspector_file() -> None:
    """What Workers Static Assets applies on Cloudflare is this file: each asset gets all four."""
    rules = header_rules()
    for file in (ASSETS_DIR / "admin" / "ui").iterdir():
        path = "/" + file.relative_to(ASSETS_DIR).as_posix()
        given = Headers([kv for pattern, headers in rules if pattern.match(path) for kv in headers])
        assert_not_frameable(given, path)


def test_admin_json_is_never_stored_and_cannot_be_framed(served: tuple[str, str]) -> None:
    base, token = served
    for path in ("/admin/tenants", "/admin/agents/acme/runs", "/admin/tenants/acme/lifecycle"):
        ok = httpx.get(base + path, headers={ACCESS_HEADER: token})
        assert ok.status_code == 200, (path, ok.text)
        assert ok.headers["cache-control"] == "no-store", path
        assert_not_frameable(ok.headers, path)
    refused = httpx.get(f"{base}/admin/tenants")
    assert refused.status_code == 401
    assert refused.headers["cache-control"] == "no-store"
    assert_not_frameable(refused.headers, "401")


def test_the_dev_servers_own_answers_carry_the_headers(served: tuple[str, str]) -> None:
    # /openapi.json and the scheduled route are answered by the dev server before the
    # Worker's `handle`, which adds the headers to everything else (issue 26).
    base, token = served
    scheduled = "/cdn-cgi/handler/scheduled?cron=nothing"
    answers = {
        "openapi": httpx.get(f"{base}/openapi.json"),
        "scheduled": httpx.get(base + scheduled, headers={ACCESS_HEADER: token}),
        "scheduled 401": httpx.get(base + scheduled),
        "scheduled 405": httpx.post(base + scheduled),
    }
    assert [a.status_code for a in answers.values()] == [200, 200, 401, 405]
    for where, answer in answers.items():
        assert_not_frameable(answer.headers, where)


GATED = sorted(
    (route.method, route.path)
    for route in ROUTES
    if route.auth in (ACCESS, ACCESS_SIGNED_IN, MEMORY_TOKEN)
)


@pytest.mark.parametrize(("method", "path"), GATED)
async def test_every_gated_route_answers_with_the_headers_and_no_store(
    method: str, path: str
) -> None:
    from bindings.environment import Bindings
    from bindings.ports.clock import FixedClock
    from bindings.settings import Settings
    from local_runtime.background import LocalBackgroundTasks

    bindings = Bindings(
        settings=Settings(environment="test"), clock=FixedClock(), background=LocalBackgroundTasks()
    )
    concrete = path
    for name in ("tenant", "agent_type", "agent_id", "key", "name", "subject"):
        concrete = concrete.replace("{" + name + "}", "acme")
    for name in ("run_id", "fact_id", "event_id", "jti", "grant_id", "episode_id"):
        concrete = concrete.replace("{" + name + "}", ULID)
    response = await handle(HttpRequest(method, "http://x" + concrete), bindings)
    assert response.status in (401, 503), (method, path, response.body)
    assert response.headers.get("cache-control") == "no-store", (method, path)
    assert_not_frameable(response.headers, f"{method} {path}")


async def test_a_handlers_own_csp_is_kept() -> None:
    """The OAuth consent pages set a CSP of their own (inline styles); it is not replaced."""
    from bindings.environment import Bindings
    from bindings.ports.clock import FixedClock
    from bindings.settings import Settings
    from local_runtime.background import LocalBackgroundTasks

    bindings = Bindings(
        settings=Settings(environment="test"), clock=FixedClock(), background=LocalBackgroundTasks()
    )
    response = await handle(HttpRequest("GET", "http://x/authorize"), bindings)
    assert "style-src 'unsafe-inline'" in (response.headers.get("content-security-policy") or "")
    assert_not_frameable(response.headers, "/authorize")
