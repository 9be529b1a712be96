"""The authorization server end to end through `worker.app.handle`: discovery, DCR and CIMD,
consent, PKCE, tokens on /mcp and the tool route, refresh rotation, revocation, and each
refusal the issue names (wrong resource, reused code, wrong verifier, redirect URI not in
the client's document, expired and revoked tokens, a client document on a private address).
"""

from __future__ import annotations

import json

from tests.oauth.conftest import (
    BASE,
    CIMD_REDIRECT,
    CIMD_URL,
    DCR_REDIRECT,
    RESOURCE,
    TENANT,
    Authorized,
    FakeMemory,
    OAuthDriver,
    pkce_pair,
    redirect_params,
)
from worker.identity import ACCESS_HEADER
from worker.oauth.protocol import ACCESS_TOKEN_TTL

# --- discovery ------------------------------------------------------------------------------


async def test_metadata_documents_advertise_what_mcp_clients_look_for(oauth: OAuthDriver) -> None:
    server = (await oauth.send("GET", "/.well-known/oauth-authorization-server")).json()
    assert server["issuer"] == BASE
    assert server["authorization_endpoint"] == f"{BASE}/authorize"
    assert server["token_endpoint"] == f"{BASE}/token"
    assert server["registration_endpoint"] == f"{BASE}/register"
    assert server["revocation_endpoint"] == f"{BASE}/revoke"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["client_id_metadata_document_supported"] is True
    assert "none" in server["token_endpoint_auth_methods_supported"]
    assert server["authorization_response_iss_parameter_supported"] is True
    assert server["scopes_supported"] == ["tools", "memory:read", "memory:write"]
    mcp = (await oauth.send("GET", "/.well-known/oauth-protected-resource/mcp")).json()
    assert mcp["resource"] == RESOURCE
    assert mcp["authorization_servers"] == [BASE]
    root = (await oauth.send("GET", "/.well-known/oauth-protected-resource")).json()
    assert root["resource"] == BASE


async def test_a_401_names_the_resource_metadata_on_mcp_and_the_tool_route(
    oauth: OAuthDriver,
) -> None:
    mcp = await oauth.send("POST", "/mcp", b"{}")
    assert mcp.status == 401
    assert mcp.headers.get("www-authenticate") == (
        f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
    )
    tool = await oauth.send("POST", "/api/v1/tools/echo", b"{}", {"authorization": "Bearer x" * 3})
    assert tool.status == 401
    challenge = tool.headers.get("www-authenticate") or ""
    assert f'resource_metadata="{BASE}/.well-known/oauth-protected-resource"' in challenge
    assert 'error="invalid_token"' in challenge


# --- the whole flow -------------------------------------------------------------------------


async def test_dcr_client_consents_gets_tokens_calls_mcp_refreshes_and_is_revoked(
    oauth: OAuthDriver,
) -> None:
    oauth.use_memory(FakeMemory())
    client = await oauth.register()
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    assert auth.params["state"] == "st-1"
    assert auth.params["iss"] == BASE  # RFC 9207
    tokens = (await oauth.exchange(auth)).json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == ACCESS_TOKEN_TTL
    assert tokens["scope"] == "tools memory:read memory:write"

    listed = (await oauth.mcp(tokens["access_token"], "tools/list")).json()["result"]
    assert {t["name"] for t in listed["tools"]} == {"recall_memory", "store_memory"}
    stored = await oauth.mcp(
        tokens["access_token"],
        "tools/call",
        {"name": "store_memory", "arguments": {"content": "x"}},
    )
    assert stored.json()["result"]["isError"] is False

    refreshed = await oauth.refresh(client["client_id"], tokens["refresh_token"])
    assert refreshed.status == 200, refreshed.body
    second = refreshed.json()
    assert second["refresh_token"] != tokens["refresh_token"]
    assert (await oauth.mcp(second["access_token"], "tools/list")).status == 200

    revoked = await oauth.form(
        "/revoke", {"token": second["refresh_token"], "client_id": client["client_id"]}
    )
    assert revoked.status == 200
    for token in (tokens["access_token"], second["access_token"]):
        refused = await oauth.mcp(token, "tools/list")
        assert refused.status == 401
        assert refused.json()["error"]["data"] == {"code": "invalid_token"}


async def test_a_token_works_only_on_the_resource_it_names(oauth: OAuthDriver) -> None:
    """Issue 47: the metadata names two resources, `/mcp` and the tool route's origin; a
    token for one is refused by the other (RFC 8707 audience)."""
    client = await oauth.register()
    for resource, works, refused in (
        (RESOURCE, "/mcp", "/api/v1/tools/nope"),
        (BASE, "/api/v1/tools/nope", "/mcp"),
    ):
        verifier, challenge = pkce_pair()
        page = await oauth.authorize_page(
            client["client_id"], DCR_REDIRECT, challenge, resource=resource
        )
        code = redirect_params(await oauth.decide(page))["code"]
        auth = Authorized(client["client_id"], DCR_REDIRECT, verifier, code, {})
        token = (await oauth.exchange(auth, resource=resource)).json()["access_token"]
        bearer = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        ok = await oauth.send("POST", works, ping, bearer)
        # The tool route's 404: authenticated, there is simply no such tool.
        assert ok.status == (200 if works == "/mcp" else 404), ok.body
        no = await oauth.send("POST", refused, ping, bearer)
        assert no.status == 401, (resource, refused)
        assert "token_resource_mismatch" in no.body.decode()


async def test_cimd_client_is_fetched_once_cached_and_shown_by_name_and_host(
    oauth: OAuthDriver,
) -> None:
    _verifier, challenge = pkce_pair()
    page = await oauth.authorize_page(CIMD_URL, CIMD_REDIRECT, challenge)
    html = page.body.decode()
    assert "Example Assistant" in html
    assert "client.example.test" in html
    await oauth.authorize_page(CIMD_URL, CIMD_REDIRECT, challenge)
    assert oauth.documents.requests == [CIMD_URL]  # the second authorization used the cache
    auth = await oauth.authorize(CIMD_URL, CIMD_REDIRECT)
    tokens = await oauth.exchange(auth)
    assert tokens.status == 200, tokens.body


# --- refusals -------------------------------------------------------------------------------


async def test_reusing_a_code_fails_and_revokes_what_it_issued(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    first = (await oauth.exchange(auth)).json()
    again = await oauth.exchange(auth)
    assert again.status == 400
    assert again.json()["error"] == "invalid_grant"
    assert (await oauth.mcp(first["access_token"], "tools/list")).status == 401


async def test_a_wrong_code_verifier_is_refused(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    other_verifier, _ = pkce_pair()
    response = await oauth.exchange(auth, code_verifier=other_verifier)
    assert (response.status, response.json()["error"]) == (400, "invalid_grant")
    assert "code_verifier" in response.json()["error_description"]


async def test_plain_pkce_and_a_missing_challenge_are_refused_at_authorize(
    oauth: OAuthDriver,
) -> None:
    client = await oauth.register()
    verifier, _ = pkce_pair()
    plain = await oauth.authorize_page(
        client["client_id"], DCR_REDIRECT, verifier[:43], code_challenge_method="plain"
    )
    assert plain.status == 302
    assert redirect_params(plain)["error"] == "invalid_request"


async def test_a_wrong_resource_is_refused_at_authorize_token_and_use(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    _v, challenge = pkce_pair()
    foreign = await oauth.authorize_page(
        client["client_id"], DCR_REDIRECT, challenge, resource="https://other.example/mcp"
    )
    assert redirect_params(foreign)["error"] == "invalid_target"
    assert redirect_params(foreign)["iss"] == BASE

    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    mismatch = await oauth.exchange(auth, resource=f"{BASE}/other")
    assert mismatch.json()["error"] == "invalid_target"

    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    token = (await oauth.exchange(auth)).json()["access_token"]
    # The same Worker reached by another host name is another resource.
    elsewhere = await oauth.mcp(token, "tools/list", base="http://localhost:8790")
    assert elsewhere.status == 401
    assert elsewhere.json()["error"]["data"] == {"code": "token_resource_mismatch"}


async def test_a_redirect_uri_not_in_the_clients_document_gets_an_error_page(
    oauth: OAuthDriver,
) -> None:
    _v, challenge = pkce_pair()
    for client_id, uri in (
        (CIMD_URL, "https://client.example.test/elsewhere"),
        (CIMD_URL, CIMD_REDIRECT + "/"),
        ((await oauth.register())["client_id"], "http://127.0.0.1:33418/other"),
    ):
        page = await oauth.authorize_page(client_id, uri, challenge)
        assert page.status == 400, uri
        assert page.headers.get("location") is None  # never redirected to an unchecked URI
        assert "redirect_uri is not registered" in page.body.decode()


async def test_an_expired_access_token_is_refused(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    tokens = (await oauth.exchange(await oauth.authorize(client["client_id"], DCR_REDIRECT))).json()
    oauth.clock.advance(ACCESS_TOKEN_TTL)
    response = await oauth.mcp(tokens["access_token"], "tools/list")
    assert response.status == 401
    assert response.json()["error"]["data"] == {"code": "token_expired"}
    assert 'error="invalid_token"' in (response.headers.get("www-authenticate") or "")


async def test_an_expired_code_is_refused(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    oauth.clock.advance(61)
    assert (await oauth.exchange(auth)).json()["error"] == "invalid_grant"


async def test_revoking_an_access_token_refuses_it_at_once(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    tokens = (await oauth.exchange(await oauth.authorize(client["client_id"], DCR_REDIRECT))).json()
    assert (await oauth.mcp(tokens["access_token"], "tools/list")).status == 200  # now cached
    revoked = await oauth.form(
        "/revoke", {"token": tokens["access_token"], "client_id": client["client_id"]}
    )
    assert revoked.status == 200
    assert (await oauth.mcp(tokens["access_token"], "tools/list")).status == 401
    # The refresh token still works: RFC 7009 revoked only the access token.
    assert (await oauth.refresh(client["client_id"], tokens["refresh_token"])).status == 200


async def test_replaying_a_rotated_refresh_token_revokes_the_grant(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    tokens = (await oauth.exchange(await oauth.authorize(client["client_id"], DCR_REDIRECT))).json()
    newer = (await oauth.refresh(client["client_id"], tokens["refresh_token"])).json()
    replay = await oauth.refresh(client["client_id"], tokens["refresh_token"])
    assert replay.json()["error"] == "invalid_grant"
    assert (await oauth.refresh(client["client_id"], newer["refresh_token"])).status == 400
    assert (await oauth.mcp(newer["access_token"], "tools/list")).status == 401


async def test_another_client_cannot_use_a_code_or_refresh_token(oauth: OAuthDriver) -> None:
    mine, theirs = await oauth.register(), await oauth.register()
    auth = await oauth.authorize(mine["client_id"], DCR_REDIRECT)
    stolen = await oauth.exchange(auth, client_id=theirs["client_id"])
    assert stolen.json()["error"] == "invalid_grant"


async def test_a_client_with_a_secret_must_present_it(oauth: OAuthDriver) -> None:
    client = await oauth.register(token_endpoint_auth_method="client_secret_post")
    assert client["client_secret"].startswith("ams_")
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    without = await oauth.exchange(auth)
    assert (without.status, without.json()["error"]) == (401, "invalid_client")
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT)
    with_secret = await oauth.exchange(auth, client_secret=client["client_secret"])
    assert with_secret.status == 200, with_secret.body


async def test_a_client_document_on_a_private_address_is_refused_without_traffic(
    oauth: OAuthDriver,
) -> None:
    oauth.vars = {"OUTBOUND_ALLOWED_HOSTS": ""}
    oauth.addresses["inside.example.test"] = ["10.0.0.7"]
    _v, challenge = pkce_pair()
    for client_id in (
        "https://inside.example.test/client.json",  # resolves to a private address
        "https://169.254.169.254/latest/client.json",  # cloud metadata
        "https://127.0.0.1:8443/client.json",
        "https://metadata.google.internal/client.json",
    ):
        page = await oauth.authorize_page(client_id, "https://x.example/cb", challenge)
        assert page.status == 400, client_id
        assert "private or link-local" in page.body.decode()
    assert oauth.documents.requests == []


async def test_bad_client_documents_are_refused(oauth: OAuthDriver) -> None:
    _v, challenge = pkce_pair()
    base = "https://client.example.test/"
    oauth.documents.by_url.update(
        {
            base + "wrong-id.json": {
                "client_id": base + "other.json",
                "redirect_uris": [CIMD_REDIRECT],
            },
            base + "secret.json": {
                "client_id": base + "secret.json",
                "redirect_uris": [CIMD_REDIRECT],
                "token_endpoint_auth_method": "client_secret_basic",
            },
            base + "huge.json": json.dumps({"client_id": "x", "pad": "a" * 6000}).encode(),
            base + "no-redirects.json": {"client_id": base + "no-redirects.json"},
        }
    )
    for name, why in (
        ("wrong-id.json", "not its own URL"),
        ("secret.json", "token_endpoint_auth_method none"),
        ("huge.json", "exceeds"),
        ("no-redirects.json", "redirect_uris"),
        ("missing.json", "HTTP 404"),
    ):
        page = await oauth.authorize_page(base + name, CIMD_REDIRECT, challenge)
        assert page.status == 400, name
        assert why in page.body.decode(), (name, page.body)


async def test_dcr_refuses_unsafe_redirect_uris(oauth: OAuthDriver) -> None:
    for uris in (["http://evil.example/cb"], ["javascript:alert(1)"], [], ["https://x/#frag"]):
        body = json.dumps({"redirect_uris": uris, "token_endpoint_auth_method": "none"})
        response = await oauth.send("POST", "/register", body.encode())
        assert response.status == 400, uris
        assert response.json()["error"] == "invalid_redirect_uri"


# --- scopes ---------------------------------------------------------------------------------


async def test_a_token_without_memory_write_cannot_store_memory(oauth: OAuthDriver) -> None:
    memory = FakeMemory()
    oauth.use_memory(memory)
    client = await oauth.register()
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT, scopes=["memory:read"])
    tokens = (await oauth.exchange(auth)).json()
    assert tokens["scope"] == "memory:read"
    listed = (await oauth.mcp(tokens["access_token"], "tools/list")).json()["result"]
    assert [t["name"] for t in listed["tools"]] == ["recall_memory"]
    recall = await oauth.mcp(
        tokens["access_token"], "tools/call", {"name": "recall_memory", "arguments": {"query": "q"}}
    )
    assert recall.json()["result"]["isError"] is False
    store = await oauth.mcp(
        tokens["access_token"],
        "tools/call",
        {"name": "store_memory", "arguments": {"content": "x"}},
    )
    assert store.status == 403
    assert store.json()["error"]["data"] == {"code": "insufficient_scope"}
    assert store.headers.get("www-authenticate", "").startswith(
        'Bearer error="insufficient_scope", scope="memory:write"'
    )
    assert [call[1] for call in memory.calls] == ["recall_memory"]


async def test_a_refresh_cannot_widen_scopes(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    auth = await oauth.authorize(client["client_id"], DCR_REDIRECT, scopes=["tools"])
    tokens = (await oauth.exchange(auth)).json()
    wider = await oauth.refresh(
        client["client_id"], tokens["refresh_token"], scope="tools memory:write"
    )
    assert wider.json()["error"] == "invalid_scope"


# --- consent --------------------------------------------------------------------------------


async def test_authorize_needs_cloudflare_access(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    _v, challenge = pkce_pair()
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge, access="")
    assert page.status == 401
    assert "Cloudflare Access" in page.body.decode()


async def test_the_consent_page_offers_only_the_persons_tenants(oauth: OAuthDriver) -> None:
    bindings = oauth.bindings()
    from authorization.operator_grants import grant

    await grant(bindings, "globex", "email", "dev@example.com", "test")
    client = await oauth.register()
    _v, challenge = pkce_pair()
    dev = oauth.access("dev@example.com")
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge, access=dev)
    html = page.body.decode()
    assert "<option value='globex'>" in html
    assert "<option value='acme'>" not in html
    forged = await oauth.decide(page, tenant=TENANT, access=dev)
    assert forged.status == 403
    nobody = oauth.access("nobody@example.com")
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge, access=nobody)
    assert page.status == 403
    assert "holds no tenant grant" in page.body.decode()


async def test_a_consent_ticket_is_single_use_and_bound_to_its_person(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    _v, challenge = pkce_pair()
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge)
    other = await oauth.decide(page, access=oauth.access("operator@localhost"))
    assert other.status == 400  # another person cannot answer it
    assert (await oauth.decide(page)).status == 302
    assert (await oauth.decide(page)).status == 400  # already answered


async def test_denying_redirects_access_denied(oauth: OAuthDriver) -> None:
    client = await oauth.register()
    _v, challenge = pkce_pair()
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge)
    response = await oauth.decide(page, decision="deny")
    params = redirect_params(response)
    assert (params["error"], params["state"], params["iss"]) == ("access_denied", "st-1", BASE)
    assert "code" not in params


async def test_the_consent_page_cannot_be_framed_or_cached(oauth: OAuthDriver) -> None:
    client = await oauth.register(client_name="<script>alert(1)</script>")
    _v, challenge = pkce_pair()
    page = await oauth.authorize_page(client["client_id"], DCR_REDIRECT, challenge)
    assert "frame-ancestors 'none'" in (page.headers.get("content-security-policy") or "")
    assert page.headers.get("cache-control") == "no-store"
    assert "<script>" not in page.body.decode()


# --- operators ------------------------------------------------------------------------------


async def test_an_operator_lists_and_revokes_a_tenants_connected_clients(
    oauth: OAuthDriver,
) -> None:
    client = await oauth.register(client_name="Cursor")
    tokens = (await oauth.exchange(await oauth.authorize(client["client_id"], DCR_REDIRECT))).json()
    operator = {ACCESS_HEADER: oauth.access()}
    listed = await oauth.send("GET", f"/admin/tenants/{TENANT}/oauth-clients", headers=operator)
    assert listed.status == 200, listed.body
    [connected] = listed.json()["clients"]
    assert connected["client_name"] == "Cursor"
    assert connected["principal"] == "ops@example.com"
    assert connected["scopes"] == ["tools", "memory:read", "memory:write"]
    path = f"/admin/tenants/{TENANT}/oauth-clients/{connected['grant_id']}"
    assert (await oauth.send("DELETE", path, headers=operator)).status == 200
    assert (await oauth.send("DELETE", path, headers=operator)).status == 404
    assert (await oauth.mcp(tokens["access_token"], "tools/list")).status == 401
    assert (await oauth.refresh(client["client_id"], tokens["refresh_token"])).status == 400
    nobody = {ACCESS_HEADER: oauth.access("nobody@example.com")}
    refused = await oauth.send("GET", f"/admin/tenants/{TENANT}/oauth-clients", headers=nobody)
    assert refused.status == 403


async def test_api_keys_keep_working(oauth: OAuthDriver) -> None:
    from gateway import admin_ops

    issued = await admin_ops.issue_api_key(oauth.runtime.kv, oauth.runtime.clock, TENANT)
    response = await oauth.mcp(issued.api_key, "tools/list")
    assert response.status == 200, response.body
