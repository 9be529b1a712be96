"""What issue 42 and the third audit (issue 47, point 3) found, each pinned: loopback redirects
on any port, revocation that ends every token at once (an operator's grant, a refresh racing a
revocation, the minute cron after `operators revoke --wrangler`), the consent page naming the
redirect in use, DCR hardening (userinfo, private-use schemes, client_uri/logo_uri, a rate
limit, a cap, the daily sweep), client documents (one deadline, failures remembered, a
percent-encoded loopback host) and an issuer that does not follow the Host header.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from authorization.operator_grants import grant, literal_statements, revoke_grant
from tests.oauth.conftest import (
    BASE,
    DCR_REDIRECT,
    TENANT,
    Authorized,
    OAuthDriver,
    pkce_pair,
    redirect_params,
)
from worker.cron import DAILY_BRIEF, MOVE_STEPS, run_scheduled
from worker.oauth import endpoints
from worker.oauth.protocol import finish_revocations

FRAN = "fran@example.com"


async def _connect(oauth: OAuthDriver, email: str, tenant: str = TENANT) -> dict[str, Any]:
    """`email` consents for a fresh DCR client on `tenant`; the token response (+ client_id)."""
    client = await oauth.register()
    verifier, challenge = pkce_pair()
    access = oauth.access(email)
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge, access=access)
    answer = await oauth.decide(page, tenant=tenant, access=access)
    code = redirect_params(answer)["code"]
    auth = Authorized(client["client_id"], DCR_REDIRECT, verifier, code, {})
    tokens: dict[str, Any] = (await oauth.exchange(auth)).json()
    return {**tokens, "client_id": client["client_id"]}


async def _works(oauth: OAuthDriver, tokens: dict[str, Any]) -> tuple[int, int]:
    """(the access token on /mcp, a refresh with the refresh token): HTTP statuses; a
    refresh's new tokens replace the old in `tokens` (the old access token stays there)."""
    call = (await oauth.mcp(tokens["access_token"], "tools/list")).status
    refreshed = await oauth.refresh(tokens["client_id"], tokens["refresh_token"])
    if refreshed.status == 200:
        tokens["refresh_token"] = refreshed.json()["refresh_token"]
    return call, refreshed.status


# --- loopback redirects (issue 42.1, RFC 8252 §7.3) -----------------------------------------


async def test_a_loopback_redirect_matches_a_registered_one_on_any_port(
    oauth: OAuthDriver,
) -> None:
    client = await oauth.register(
        redirect_uris=["http://127.0.0.1/callback", "http://[::1]:9/cb?x=1", "https://a.test/cb"]
    )
    verifier, challenge = pkce_pair()
    for asked in ("http://127.0.0.1:5555/callback", "http://[::1]:61000/cb?x=1"):
        page = await oauth.authorize_page(client["client_id"], asked, challenge)
        answer = await oauth.decide(page)
        assert (answer.headers.get("location") or "").startswith(
            asked + ("&" if "?" in asked else "?")
        )
    # The code is bound to the redirect actually used.
    auth = Authorized(client["client_id"], asked, verifier, redirect_params(answer)["code"], {})
    assert (await oauth.exchange(auth)).status == 200
    for refused in (
        "http://127.0.0.1:5555/other",  # path exact
        "http://localhost:5555/callback",  # host exact (not mapped between loopback names)
        "http://[::1]:61000/cb?x=2",  # query exact
        "https://a.test:8443/cb",  # only loopback http ignores the port
        "http://127.0.0.1.evil.test:5555/callback",
    ):
        page = await oauth.authorize_page(client["client_id"], refused, challenge)
        assert page.status == 400, refused
        assert page.headers.get("location") is None


async def test_a_client_document_listing_portless_loopback_redirects_works_on_any_port(
    oauth: OAuthDriver,
) -> None:
    """Claude Code's own document lists `http://localhost/callback` and
    `http://127.0.0.1/callback` and listens on a port chosen at run time."""
    url = "https://client.example.test/oauth/claude-code-client-metadata"
    oauth.documents.by_url[url] = {
        "client_id": url,
        "client_name": "Claude Code",
        "redirect_uris": ["http://localhost/callback", "http://127.0.0.1/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    verifier, challenge = pkce_pair()
    redirect = "http://localhost:54321/callback"
    page = await oauth.authorize_page(url, redirect, challenge)
    code = redirect_params(await oauth.decide(page))["code"]
    tokens = await oauth.exchange(Authorized(url, redirect, verifier, code, {}))
    assert tokens.status == 200, tokens.body


# --- revocation (issue 47.3) ----------------------------------------------------------------


async def test_revoking_an_operators_grant_ends_their_consents_at_once(oauth: OAuthDriver) -> None:
    bindings = oauth.bindings()
    for tenant in (TENANT, "globex"):
        await grant(bindings, tenant, "email", FRAN, "test")
    await grant(bindings, TENANT, "email", "gus@example.com", "test")
    frans = await _connect(oauth, "Fran@Example.com")  # the Access token's case
    frans_globex = await _connect(oauth, FRAN, "globex")
    guss = await _connect(oauth, "gus@example.com")
    assert await _works(oauth, frans) == (200, 200)  # its access token is now cached

    assert await revoke_grant(bindings, TENANT, "email", FRAN)
    assert await finish_revocations(bindings) >= 1  # what `operators revoke` runs next

    assert await _works(oauth, frans) == (401, 400)
    assert await _works(oauth, frans_globex) == (200, 200)  # her grant there stands
    assert await _works(oauth, guss) == (200, 200)
    listed = await oauth.send(
        "GET",
        f"/admin/tenants/{TENANT}/oauth-clients",
        headers={"cf-access-jwt-assertion": oauth.access()},
    )
    assert [c["principal"] for c in listed.json()["clients"]] == ["gus@example.com"]


async def test_a_revocation_by_sql_alone_ends_access_tokens_in_the_minute_cron(
    oauth: OAuthDriver,
) -> None:
    """`operators revoke --wrangler` prints SQL for a deployed Worker's D1: refresh stops at
    once, the access tokens (KV) within a minute."""
    bindings = oauth.bindings()
    await grant(bindings, TENANT, "email", FRAN, "test")
    frans = await _connect(oauth, FRAN)
    assert await _works(oauth, frans) == (200, 200)
    now_ms = int(oauth.clock.now() * 1000)
    for statement in literal_statements("revoke", [TENANT], "email", FRAN, "cli", now_ms):
        await oauth.runtime.db.prepare(statement).run()
    assert (await oauth.refresh(frans["client_id"], frans["refresh_token"])).status == 400
    result = await run_scheduled(MOVE_STEPS, oauth.clock.now(), bindings)
    assert result["result"]["oauth_tokens_ended"] == 2  # the first and the refreshed one
    assert (await oauth.mcp(frans["access_token"], "tools/list")).status == 401


async def test_a_refresh_racing_a_revocation_issues_no_usable_token(
    oauth: OAuthDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator revokes the connected client while its refresh is between the rotation
    and the new tokens: nothing that refresh issues may work."""
    tokens = await _connect(oauth, "ops@example.com")
    [connected] = (
        await oauth.send(
            "GET", f"/admin/tenants/{TENANT}/oauth-clients",
            headers={"cf-access-jwt-assertion": oauth.access()},
        )
    ).json()["clients"]  # fmt: skip
    touch = endpoints.store.touch_grant

    async def revoked_meanwhile(db: Any, grant_row: Any, now: int) -> None:
        await touch(db, grant_row, now)
        path = f"/admin/tenants/{TENANT}/oauth-clients/{connected['grant_id']}"
        headers = {"cf-access-jwt-assertion": oauth.access()}
        assert (await oauth.send("DELETE", path, headers=headers)).status == 200

    monkeypatch.setattr(endpoints.store, "touch_grant", revoked_meanwhile)
    raced = await oauth.refresh(tokens["client_id"], tokens["refresh_token"])
    assert (raced.status, raced.json()["error"]) == (400, "invalid_grant")
    assert (await oauth.mcp(tokens["access_token"], "tools/list")).status == 401
    rows = await oauth.runtime.db.prepare("SELECT COUNT(*) AS n FROM oauth_access_tokens").first()
    assert rows is not None and rows["n"] == 0


# --- the consent page (issue 47.3) ------------------------------------------------------------


async def test_the_consent_page_names_the_redirect_in_use(oauth: OAuthDriver) -> None:
    client = await oauth.register(
        client_name=None,
        redirect_uris=[
            "https://claude.ai/api/mcp/auth_callback",
            "https://evil.example/steal",
            "com.example.app:/oauth2redirect",
        ],
    )
    _v, challenge = pkce_pair()
    page = await oauth.authorize_page(client["client_id"], "https://evil.example/steal", challenge)
    html = page.body.decode()
    assert "<span class=host id=redirect-host>evil.example</span>" in html
    assert "claude.ai" not in html
    page = await oauth.authorize_page(
        client["client_id"], "com.example.app:/oauth2redirect", challenge
    )
    html = page.body.decode()
    assert "<span class=host id=redirect-host>com.example.app:</span>" in html
    assert "An unnamed client" in html


# --- registration (issues 42.6 and 47.3) ----------------------------------------------------


async def _register(oauth: OAuthDriver, address: str = "203.0.113.5", **metadata: Any) -> Any:
    body = {"redirect_uris": [DCR_REDIRECT], "token_endpoint_auth_method": "none", **metadata}
    headers = {"content-type": "application/json", "cf-connecting-ip": address}
    return await oauth.send("POST", "/register", json.dumps(body).encode(), headers)


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai@evil.example/cb",  # userinfo: the host is evil.example
        "http://user:pw@127.0.0.1/cb",
        "ftp://files.example/cb",
        "ws://127.0.0.1/cb",
        "claude.ai:/cb",  # a forward domain name, not reverse DNS
        "javascript:alert(1)",
        "data:text/html,x",
        "https://x.example/cb#",
    ],
)
async def test_dcr_refuses_unsafe_redirect_uris(oauth: OAuthDriver, uri: str) -> None:
    response = await _register(oauth, redirect_uris=[uri])
    assert (response.status, response.json()["error"]) == (400, "invalid_redirect_uri"), uri


async def test_dcr_takes_reverse_dns_schemes_and_cursors(oauth: OAuthDriver) -> None:
    for uri in (
        "com.example.app:/oauth2redirect",
        "io.github.someone.tool:/cb",
        "cursor://anysphere.cursor-mcp/oauth/callback",  # Cursor's own, not reverse DNS
        "http://localhost:8787/callback",
    ):
        assert (await _register(oauth, redirect_uris=[uri])).status == 201, uri


@pytest.mark.parametrize("name", ["client_uri", "logo_uri"])
@pytest.mark.parametrize(
    "value", ["javascript:alert(1)", "data:image/png;base64,AA", "https://u@x.example/", 7]
)
async def test_dcr_refuses_client_and_logo_uris_a_browser_would_run(
    oauth: OAuthDriver, name: str, value: Any
) -> None:
    response = await _register(oauth, **{name: value})
    assert (response.status, response.json()["error"]) == (400, "invalid_client_metadata")


async def test_registration_is_rate_limited_per_address_and_capped(
    oauth: OAuthDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(10):
        assert (await _register(oauth)).status == 201
    refused = await _register(oauth)
    assert refused.status == 429
    assert refused.headers.get("retry-after") == "60"
    assert "too many registrations" in refused.json()["error_description"]
    assert (await _register(oauth, "198.51.100.7")).status == 201  # another address
    oauth.clock.advance(60)
    assert (await _register(oauth)).status == 201  # the next minute
    monkeypatch.setattr(endpoints, "MAX_REGISTRATIONS", 12)
    capped = await _register(oauth, "192.0.2.1")
    assert capped.status == 429
    assert "as many registrations" in capped.json()["error_description"]


async def test_the_daily_cron_sweeps_expired_rows_and_unused_registrations(
    oauth: OAuthDriver,
) -> None:
    db = oauth.runtime.db
    kept = await _connect(oauth, "ops@example.com")  # a grant: its client stays
    unused = (await _register(oauth)).json()["client_id"]
    _v, challenge = pkce_pair()
    await oauth.authorize_page(kept["client_id"], DCR_REDIRECT, challenge)  # a consent ticket
    oauth.clock.advance(31 * 86_400)  # refresh tokens (30 days) and all else expired
    result = await run_scheduled(DAILY_BRIEF, oauth.clock.now(), oauth.bindings())
    assert result["result"]["oauth_rows_swept"] >= 5
    for table, left in (
        ("oauth_consents", 0),
        ("oauth_codes", 0),
        ("oauth_refresh_tokens", 0),
        ("oauth_access_tokens", 0),
        ("oauth_grants", 1),
    ):
        row = await db.prepare(f"SELECT COUNT(*) AS n FROM {table}").first()
        assert row is not None and row["n"] == left, table
    clients = (await db.prepare("SELECT client_id FROM oauth_clients").all()).results
    assert [c["client_id"] for c in clients] == [kept["client_id"]]
    assert unused != kept["client_id"]


# --- client metadata documents (issue 47.3) -------------------------------------------------


async def test_a_document_trickling_in_is_cut_off_by_one_total_deadline(
    oauth: OAuthDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(endpoints, "CIMD_TIMEOUT_SECONDS", 0.5)

    async def one_byte_at_a_time() -> AsyncIterator[bytes]:
        for _ in range(40):  # 2 s in all, each read well within any per-read timeout
            await asyncio.sleep(0.05)
            yield b" "

    slow = "https://client.example.test/slow.json"
    oauth.documents.by_url[slow] = httpx.Response(200, content=one_byte_at_a_time())
    _v, challenge = pkce_pair()
    started = time.monotonic()
    page = await oauth.authorize_page(slow, "https://client.example.test/cb", challenge)
    assert time.monotonic() - started < 1.5
    assert page.status == 400
    assert "did not arrive within 0.5 s" in page.body.decode()


async def test_a_failed_document_fetch_is_remembered(oauth: OAuthDriver) -> None:
    missing = "https://client.example.test/missing.json"
    form = {"grant_type": "refresh_token", "refresh_token": "amr_x", "client_id": missing}
    for _ in range(3):  # unauthenticated token requests naming a document URL
        response = await oauth.form("/token", form)
        assert (response.status, response.json()["error"]) == (401, "invalid_client")
    assert oauth.documents.requests == [missing]
    assert "HTTP 404" in response.json()["error_description"]
    oauth.clock.advance(endpoints.CIMD_FAILURE_SECONDS + 1)
    await oauth.form("/token", form)
    assert oauth.documents.requests == [missing, missing]  # tried again once forgotten


async def test_a_percent_encoded_loopback_document_host_is_refused_before_any_fetch(
    oauth: OAuthDriver,
) -> None:
    oauth.vars = {"OUTBOUND_ALLOWED_HOSTS": ""}
    _v, challenge = pkce_pair()
    for client_id in (
        "https://%31%32%37.0.0.1/client.json",
        "https://%6c%6fcalhost/client.json",
        "https://\uff11\uff12\uff17.0.0.1/client.json",  # full-width digits
    ):
        page = await oauth.authorize_page(client_id, "https://x.example/cb", challenge)
        assert page.status == 400, client_id
        assert "private or link-local" in page.body.decode()
    assert oauth.documents.requests == []


# --- the issuer (issue 47.3) ------------------------------------------------------------------


async def test_the_issuer_does_not_follow_the_host_header(oauth: OAuthDriver) -> None:
    oauth.vars = {"OAUTH_ISSUER": "https://memory.example.com"}
    for base in (BASE, "http://evil.example"):
        server = await oauth.send("GET", "/.well-known/oauth-authorization-server", base=base)
        assert server.json()["issuer"] == "https://memory.example.com"
        assert server.json()["token_endpoint"] == "https://memory.example.com/token"
        mcp = await oauth.send("GET", "/.well-known/oauth-protected-resource/mcp", base=base)
        assert mcp.json()["resource"] == "https://memory.example.com/mcp"
        challenge = await oauth.send("POST", "/mcp", b"{}", base=base)
        assert "https://memory.example.com/.well-known/" in (
            challenge.headers.get("www-authenticate") or ""
        )
