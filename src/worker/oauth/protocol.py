"""OAuth 2.1 building blocks: RFC 6749 errors (`no-store`; `invalid_client` is 401), form bodies,
PKCE (S256 only, constant-time compare), scopes, secrets (256 random bits, stored as SHA-256),
tokens and the RFC 8414 / RFC 9728 metadata. Access-token records live in KV for the gateway's
hot path (`gateway.credentials`); revoking a grant deletes them and forgets them in this isolate's
cache. The issuer is `OAUTH_ISSUER` (else the request's origin: a token minted on one host is
refused on another). The metadata advertises what MCP clients check: S256, CIMD with `none`
(claude.ai), DCR, RFC 9207. A tenant's connected clients are its live grants, newest first;
revoking one ends its tokens, as does revoking the operator grant its consent relied on.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import hmac
import re
import secrets
from typing import Any
from urllib.parse import parse_qsl

from authorization import oauth_store
from authorization.oauth_store import Grant
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from bindings.ports.kv import KVNamespace
from gateway.credentials import (
    ACCESS_TOKEN_PREFIX,
    ISOLATE_CACHE,
    MCP_PATH,
    OAUTH_SCOPES,
    AccessTokenRecord,
    access_token_key,
    hash_token,
)
from gateway.routes import issuer_of
from http_messages import ApiError, CodedError, HttpResponse, json_response
from worker.routing import Call

ACCESS_TOKEN_TTL = 3600
REFRESH_TOKEN_TTL = 30 * 24 * 3600
CODE_TTL = 60
CONSENT_TTL = 600
# KV's expirationTtl must be at least 60 s; access-token records outlive their expiry a
# little so an expired token is answered `token_expired`, not `invalid_token`.
KV_TTL_MARGIN = 300
REFRESH_TOKEN_PREFIX = "amr_"
CODE_PREFIX = "amc_"
CLIENT_SECRET_PREFIX = "ams_"
SCOPE_DESCRIPTIONS = {
    "tools": "Call the tenant's tools through the gateway",
    "memory:read": "Read the tenant's long-term memory (recall_memory)",
    "memory:write": "Write to the tenant's long-term memory (store_memory)",
}
MAX_FORM_BYTES = 16_384
_VERIFIER_RE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")
_CHALLENGE_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")


class OAuthError(CodedError):
    """An RFC 6749 error, answered by the router in that shape (`{"error", "error_description"}`,
    `no-store`; a 401 with its Basic challenge, a 429 with `Retry-After`)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = self.code = error
        self.description = description
        self.status = status
        self.headers = {"cache-control": "no-store", "pragma": "no-cache"}
        if status == 401:
            self.headers["www-authenticate"] = 'Basic realm="agent-memory-oauth"'
        if status == 429:
            self.headers["retry-after"] = "60"

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "error_description": self.description}


def stores(bindings: Bindings) -> tuple[D1Database, KVNamespace]:
    if bindings.db is None or bindings.kv is None:
        raise OAuthError("temporarily_unavailable", "the authorization server needs D1 and KV", 503)
    return bindings.db, bindings.kv


def d1(bindings: Bindings) -> D1Database:
    if bindings.db is None:
        raise OAuthError("temporarily_unavailable", "the authorization server needs D1", 503)
    return bindings.db


def new_secret(prefix: str) -> str:
    """`prefix` + 256 random bits, URL-safe. Only inside a request (never at import)."""
    return prefix + secrets.token_urlsafe(32)


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(8)


def parse_form(body: bytes) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body; a repeated parameter is refused
    (RFC 6749 §3.1: "Request and response parameters MUST NOT be included more than once")."""
    if len(body) > MAX_FORM_BYTES:
        raise OAuthError("invalid_request", "the request body is too large")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "the body must be form-encoded UTF-8") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise OAuthError("invalid_request", f"parameter {name!r} appears more than once")
        form[name] = value
    return form


def check_challenge(challenge: str | None, method: str | None) -> str:
    """The authorization request's PKCE challenge, or an OAuthError (S256 only)."""
    if not challenge:
        raise OAuthError("invalid_request", "code_challenge is required (PKCE)")
    if method != "S256":
        raise OAuthError("invalid_request", "code_challenge_method must be S256")
    if not _CHALLENGE_RE.fullmatch(challenge):
        raise OAuthError("invalid_request", "code_challenge must be 43 base64url characters")
    return challenge


def verify_pkce(verifier: str | None, challenge: str) -> bool:
    """True when `verifier` is well formed and hashes to `challenge` (RFC 7636 §4.6)."""
    if not verifier or not _VERIFIER_RE.fullmatch(verifier):
        return False
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    computed = base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
    return hmac.compare_digest(computed, challenge)


def parse_scopes(raw: str | None, default: tuple[str, ...] = OAUTH_SCOPES) -> tuple[str, ...]:
    """Requested scopes in our order; `offline_access` (asked for by some clients to get a
    refresh token, which every grant here has) is accepted and dropped. Unknown scopes are
    `invalid_scope`; none requested means all."""
    if raw is None or not raw.strip():
        return default
    asked = set(raw.split())
    asked.discard("offline_access")
    unknown = sorted(asked - set(OAUTH_SCOPES))
    if unknown:
        raise OAuthError("invalid_scope", f"unknown scope(s): {' '.join(unknown)}")
    chosen = tuple(s for s in OAUTH_SCOPES if s in asked)
    if not chosen:
        raise OAuthError("invalid_scope", "no usable scope was requested")
    return chosen


async def issue_tokens(db: D1Database, kv: KVNamespace, grant: Grant, now: int) -> dict[str, Any]:
    """A fresh access token (KV record + D1 index row) and refresh token (D1) for `grant`, as
    the token response's fields."""
    access, refresh = new_secret(ACCESS_TOKEN_PREFIX), new_secret(REFRESH_TOKEN_PREFIX)
    access_hash, expires_at = hash_token(access), now + ACCESS_TOKEN_TTL
    refresh_row = (hash_token(refresh), now + REFRESH_TOKEN_TTL)
    record = AccessTokenRecord(
        tenant=grant.tenant,
        principal=grant.principal,
        client_id=grant.client_id,
        grant_id=grant.grant_id,
        scopes=grant.scopes,
        resource=grant.resource,
        issued_at=now,
        expires_at=expires_at,
    )
    ttl = ACCESS_TOKEN_TTL + KV_TTL_MARGIN
    # KV first, then the rows, only while the grant is live: a revocation running meanwhile
    # either finds the row (and deletes the record) or makes the insert fail (and we do).
    await kv.put(access_token_key(access_hash), record.model_dump_json(), expiration_ttl=ttl)
    if not await oauth_store.add_tokens(db, grant, (access_hash, expires_at), refresh_row, now):
        await forget_access_token(kv, access_hash)
        raise OAuthError("invalid_grant", "this grant was revoked")
    return {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_TTL,
        "refresh_token": refresh,
    }


async def forget_access_token(kv: KVNamespace, token_hash: str) -> None:
    key = access_token_key(token_hash)
    await kv.delete(key)
    ISOLATE_CACHE.forget(key)


async def revoke_grant(
    db: D1Database, kv: KVNamespace, tenant: str, grant_id: str, reason: str, now: int
) -> bool:
    """End a grant and every token it holds; False when there was no such live grant."""
    forget = functools.partial(forget_access_token, kv)
    return await oauth_store.revoke_grant(db, tenant, grant_id, reason, now, forget)


async def finish_revocations(bindings: Bindings) -> int:
    """End the access tokens revoked grants still hold (`oauth_store.finish_revocations`):
    after `operators revoke`, and every minute for a grant revoked by SQL alone."""
    db, kv = _db_kv(bindings)
    return await oauth_store.finish_revocations(db, functools.partial(forget_access_token, kv))


# A registration (or a fetched client document) nobody consented to within a day is dropped;
# a revoked grant's row (when and why) is kept a month.
UNUSED_CLIENT_SECONDS = 86_400
REVOKED_GRANT_SECONDS = 30 * 86_400


async def sweep(bindings: Bindings) -> int:
    """The daily cron's OAuth housekeeping (`oauth_store.sweep`): rows deleted."""
    now = int(bindings.clock.now())
    db = _db_kv(bindings)[0]
    return await oauth_store.sweep(db, now, UNUSED_CLIENT_SECONDS, REVOKED_GRANT_SECONDS)


AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]
# Metadata is public and the same for everyone (browsers: the router's CORS, `worker.app`).
_PUBLIC = {"cache-control": "public, max-age=300"}


async def authorization_server_route(call: Call[None, None]) -> HttpResponse:
    issuer = issuer_of(call.bindings, call.request)
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "revocation_endpoint": f"{issuer}/revoke",
        "scopes_supported": list(OAUTH_SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }
    return json_response(document, headers=_PUBLIC)


async def protected_resource_route(call: Call[None, None]) -> HttpResponse:
    """`GET /.well-known/oauth-protected-resource` (the origin, for the plain tool route) and
    `.../mcp` (RFC 9728 §3.1: the well-known segment inserted before the resource's path)."""
    issuer = issuer_of(call.bindings, call.request)
    resource = f"{issuer}{MCP_PATH}" if call.request.path.endswith(MCP_PATH) else issuer
    document: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": [issuer],
        "scopes_supported": list(OAUTH_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "agent-memory tool gateway",
    }
    return json_response(document, headers=_PUBLIC)


def _db_kv(bindings: Bindings) -> tuple[D1Database, KVNamespace]:
    if bindings.db is None or bindings.kv is None:
        raise ApiError(503, "oauth_unavailable", "connected clients need the D1 and KV bindings")
    return bindings.db, bindings.kv


async def list_connected(bindings: Bindings, tenant: str) -> list[dict[str, Any]]:
    db, _kv = _db_kv(bindings)
    grants = await oauth_store.list_grants(db, tenant)
    names = await oauth_store.client_names(db, sorted({g.client_id for g in grants}))
    return [
        {k: v for k, v in dataclasses.asdict(g).items() if k not in ("tenant", "revoked_at")}
        | {"client_name": names.get(g.client_id, ""), "scopes": list(g.scopes)}
        for g in grants
    ]


async def revoke_connected(bindings: Bindings, tenant: str, grant_id: str, by: str) -> bool:
    db, kv = _db_kv(bindings)
    now = int(bindings.clock.now())
    return await revoke_grant(db, kv, tenant, grant_id, f"revoked_by:{by}"[:200], now)


async def connected_clients_route(call: Call[None, None]) -> HttpResponse:
    tenant = call.params["tenant"]
    clients = await list_connected(call.bindings, tenant)
    return json_response({"tenant": tenant, "clients": clients})


async def revoke_client_route(call: Call[None, None]) -> HttpResponse:
    tenant, grant_id = call.params["tenant"], call.params["grant_id"]
    if not await revoke_connected(call.bindings, tenant, grant_id, call.auth.principal):
        raise ApiError(404, "grant_not_found", f"no live grant {grant_id!r} on tenant {tenant!r}")
    return json_response({"tenant": tenant, "grant_id": grant_id, "revoked": True})
