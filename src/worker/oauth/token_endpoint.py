"""`POST /token` (RFC 6749 + PKCE + RFC 8707), `POST /revoke` (RFC 7009), `POST /register`.

A code is single use (a second use revokes what the first issued), one minute, bound to client,
redirect URI and PKCE challenge; `resource` must be the consented one (`invalid_target`). Every
refresh rotates the token; a rotated one presented again revokes the grant (OAuth 2.1 §4.3.1).
Clients authenticate by `client_id` (`none`) or a secret, compared by hash in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from authorization import oauth_store as store
from authorization.oauth_store import ClientInfo
from bindings.environment import Bindings
from gateway.credentials import ACCESS_TOKEN_PREFIX, AccessTokenRecord, access_token_key
from gateway.credentials import hash_token as _hash
from http_messages import HttpRequest, HttpResponse, empty_response, json_response
from worker.app import Call
from worker.oauth.clients import register, resolve_client
from worker.oauth.protocol import (
    MAX_FORM_BYTES,
    REFRESH_TOKEN_PREFIX,
    OAuthError,
    forget_access_token,
    issue_tokens,
    new_id,
    parse_form,
    revoke_grant,
    stores,
    verify_pkce,
)

_CORS = {"access-control-allow-origin": "*"}
_NO_STORE = {"cache-control": "no-store", **_CORS}


def _basic_credentials(request: HttpRequest) -> tuple[str, str] | None:
    scheme, _, value = (request.headers.get("authorization") or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise OAuthError("invalid_client", "malformed Basic credentials", 401)
    return unquote(client_id), unquote(secret)


async def authenticate_client(
    bindings: Bindings, request: HttpRequest, form: dict[str, str]
) -> ClientInfo:
    """The client making a token or revocation request (RFC 6749 §2.3, OAuth 2.1 §2.4)."""
    basic = _basic_credentials(request)
    if basic and form.get("client_id") not in (None, basic[0]):
        raise OAuthError("invalid_request", "client_id differs from the Basic credentials")
    client_id, secret = basic or (form.get("client_id"), form.get("client_secret"))
    try:
        client = await resolve_client(bindings, client_id)
    except OAuthError as exc:
        raise OAuthError("invalid_client", exc.description, 401) from None
    if client.secret_hash is None:
        if secret:
            raise OAuthError("invalid_client", "this client has no secret", 401)
    elif not secret or not hmac.compare_digest(_hash(secret), client.secret_hash):
        raise OAuthError("invalid_client", "client authentication failed", 401)
    return client


def _check_resource(form: dict[str, str], consented: str) -> None:
    if form.get("resource") not in (None, consented):
        raise OAuthError("invalid_target", "resource differs from the one consented to")


async def _authorization_code(
    bindings: Bindings, client: ClientInfo, form: dict[str, str], now: int
) -> store.Grant:
    db, kv = stores(bindings)
    code = form.get("code")
    if not code:
        raise OAuthError("invalid_request", "code is required")
    row, first_use = await store.redeem_code(db, _hash(code), now)
    if row is None:
        raise OAuthError("invalid_grant", "unknown authorization code")
    if not first_use:
        if row.grant_id:
            await revoke_grant(db, kv, row.grant.tenant, row.grant_id, "code_reuse", now)
        raise OAuthError("invalid_grant", "this authorization code was already used")
    if row.grant.client_id != client.client_id:
        raise OAuthError("invalid_grant", "this code was issued to another client")
    if now >= row.expires_at:
        raise OAuthError("invalid_grant", "this authorization code has expired")
    if form.get("redirect_uri") != row.redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request")
    if not verify_pkce(form.get("code_verifier"), row.code_challenge):
        raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
    _check_resource(form, row.grant.resource)
    grant = replace(row.grant, grant_id=new_id("g_"), created_at=now, last_used_at=now)
    await store.create_grant(db, grant)
    await store.bind_code_to_grant(db, _hash(code), grant.grant_id)
    return grant


async def _refresh_token(
    bindings: Bindings, client: ClientInfo, form: dict[str, str], now: int
) -> store.Grant:
    db, kv = stores(bindings)
    token = form.get("refresh_token")
    if not token:
        raise OAuthError("invalid_request", "refresh_token is required")
    grant, status = await store.rotate_refresh_token(db, _hash(token), now)
    if grant is None or status == "expired":
        raise OAuthError("invalid_grant", "unknown or expired refresh token")
    if status == "reused" or grant.client_id != client.client_id:
        # A rotated token presented again (or by another client) means it leaked: end the
        # grant, so whoever holds the newer token loses it too (OAuth 2.1 §4.3.1).
        await revoke_grant(db, kv, grant.tenant, grant.grant_id, "refresh_token_reuse", now)
        raise OAuthError("invalid_grant", "this refresh token was already used; grant revoked")
    if grant.revoked_at is not None:
        raise OAuthError("invalid_grant", "this grant was revoked")
    _check_resource(form, grant.resource)
    scopes = grant.scopes
    if form.get("scope"):
        asked = tuple(s for s in form["scope"].split() if s != "offline_access")
        if not set(asked) <= set(grant.scopes):
            raise OAuthError("invalid_scope", "a refresh cannot widen the granted scopes")
        scopes = tuple(s for s in grant.scopes if s in asked) or grant.scopes
    await store.touch_grant(db, grant, now)
    return replace(grant, scopes=scopes)


async def token_route(call: Call[None, None]) -> HttpResponse:
    """`POST /token`."""
    request, bindings = call.request, call.bindings
    try:
        form = parse_form(request.body)
        grant_type = form.get("grant_type")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise OAuthError(
                "unsupported_grant_type", "grant_type must be authorization_code or refresh_token"
            )
        client = await authenticate_client(bindings, request, form)
        exchange = _authorization_code if grant_type == "authorization_code" else _refresh_token
        now = int(bindings.clock.now())
        grant = await exchange(bindings, client, form, now)
        tokens = await issue_tokens(*stores(bindings), grant, now)
    except OAuthError as exc:
        return exc.response(_CORS)
    body = {**tokens, "scope": " ".join(grant.scopes)}
    return json_response(body, headers={"pragma": "no-cache", **_NO_STORE})


async def revoke_route(call: Call[None, None]) -> HttpResponse:
    """`POST /revoke` (RFC 7009): 200 whether or not the token was known (§2.2)."""
    request, bindings = call.request, call.bindings
    try:
        form = parse_form(request.body)
        client = await authenticate_client(bindings, request, form)
        db, kv = stores(bindings)
        token = form.get("token")
        if not token:
            raise OAuthError("invalid_request", "token is required")
    except OAuthError as exc:
        return exc.response()
    token_hash, now = _hash(token), int(bindings.clock.now())
    if token.startswith(ACCESS_TOKEN_PREFIX):
        raw = await kv.get(access_token_key(token_hash))
        if raw and AccessTokenRecord.model_validate_json(raw).client_id == client.client_id:
            await forget_access_token(kv, token_hash)
    elif token.startswith(REFRESH_TOKEN_PREFIX):
        grant = await store.refresh_token_grant(db, token_hash)
        if grant is not None and grant.client_id == client.client_id:
            await revoke_grant(db, kv, grant.tenant, grant.grant_id, "revoked_by_client", now)
    return empty_response(200, _NO_STORE)


async def register_route(call: Call[None, None]) -> HttpResponse:
    """`POST /register` (RFC 7591 §3): 201 with the client's information."""
    try:
        if len(call.request.body) > MAX_FORM_BYTES:
            raise OAuthError("invalid_client_metadata", "the metadata is too large")
        try:
            metadata: Any = json.loads(call.request.body or b"null")
        except ValueError:
            raise OAuthError("invalid_client_metadata", "the body must be JSON") from None
        body = await register(call.bindings, metadata)
    except OAuthError as exc:
        return exc.response(_CORS)
    return json_response(body, status=201, headers=_NO_STORE)
