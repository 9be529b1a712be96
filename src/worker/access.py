"""Cloudflare Access: verify `Cf-Access-Jwt-Assertion` before an admin or agent route runs.

Contract (docs: cloudflare-one/.../authorization-cookie/validating-json/): an RS256 JWT
signed by a key of the team's JWKS `https://<team>/cdn-cgi/access/certs`, chosen by `kid`;
the JWKS is cached `JWKS_TTL_SECONDS` and refetched for an unknown `kid` at most every
`UNKNOWN_KID_REFETCH_SECONDS` (forged kids cannot make us hammer it); `exp`/`nbf` with
`LEEWAY_SECONDS`, `iss` `https://<team>`, `aud` containing the AUD tag. Refusals: 401
`access_token_missing`, 403 `access_token_invalid`, 503 `access_not_configured` /
`access_keys_unavailable` (fail closed). `operator` adds the tenant grant: the gate of every
`auth=ACCESS` route. Verification is `worker.jwt_verification.verify_jwt`; there is no dev
bypass (the local runtime serves a dev JWKS through `Bindings.http_transport`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import ConfigDict

from authorization.operator_grants import Principal, granted
from bindings.environment import Bindings
from bindings.ports.signatures import RsaPublicJwk
from http_messages import HttpRequest
from worker.errors import ApiError
from worker.jwt_verification import JwtRefused, JwtRules, verify_jwt

log = logging.getLogger(__name__)

ACCESS_HEADER = "Cf-Access-Jwt-Assertion"
ACCESS_COOKIE = "CF_Authorization"
JWKS_TTL_SECONDS = 600.0
UNKNOWN_KID_REFETCH_SECONDS = 10.0
LEEWAY_SECONDS = 30
MAX_TOKEN_BYTES = 16_384


class AccessIdentity(Principal):
    """Who passed the gate. `email` for users; service tokens carry `common_name` instead;
    `groups` when the Access application passes them (grants by group)."""

    model_config = ConfigDict(frozen=True)

    subject: str
    issuer: str
    expires_at: int

    @property
    def principal(self) -> str:
        """A printable name for logs and audit fields."""
        return self.email or self.common_name or self.subject


def _invalid(message: str) -> ApiError:
    return ApiError(403, "access_token_invalid", message)


@dataclass
class JwksCache:
    """Keys of one JWKS endpoint reached through one transport, with their fetch time."""

    keys: dict[str, RsaPublicJwk] = field(default_factory=dict)
    fetched_at: float | None = None
    # Held so the id() in the cache key cannot be reused by another transport.
    transport: httpx.AsyncBaseTransport | None = None


# Isolate-level cache (filled during requests, never at import: snapshot rules). Keyed by
# certs URL and transport identity, so two local runtimes with their own dev keys in one
# process do not share keys.
_CACHES: dict[tuple[str, int], JwksCache] = {}
_MAX_CACHES = 32


def team_domain(raw: str) -> str:
    """`acme.cloudflareaccess.com` from any of `acme.cloudflareaccess.com`, `https://…/`."""
    return raw.strip().removeprefix("https://").removeprefix("http://").rstrip("/")


def parse_jwks(document: Any) -> dict[str, RsaPublicJwk]:
    """RSA signing keys by kid from a JWKS document; other key types, and keys whose `n`
    or `e` is not a base64url integer, are skipped."""
    keys: dict[str, RsaPublicJwk] = {}
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError("JWKS document has no 'keys' list")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA":
            continue
        kid, n, e = entry.get("kid"), entry.get("n"), entry.get("e")
        usable = entry.get("use", "sig") == "sig" and entry.get("alg", "RS256") == "RS256"
        if usable and isinstance(kid, str) and isinstance(n, str) and isinstance(e, str):
            with contextlib.suppress(ValueError):
                keys[kid] = RsaPublicJwk(n=n, e=e)
    return keys


def _token_from(request: HttpRequest) -> str | None:
    token = request.headers.get(ACCESS_HEADER)
    if token:
        return token.strip()
    # Browsers reaching the Worker through Access carry the cookie; the header is what Access
    # guarantees (cheat sheet §9), so the cookie is only a fallback.
    cookies = request.headers.get("cookie") or ""
    for part in cookies.split(";"):
        name, _, value = part.strip().partition("=")
        if name == ACCESS_COOKIE and value:
            return value
    return None


async def _fetch_jwks(url: str, bindings: Bindings) -> dict[str, RsaPublicJwk]:
    try:
        async with bindings.http_client(timeout=5.0) as client:
            response = await client.get(url, headers={"accept": "application/json"})
        response.raise_for_status()
        return parse_jwks(response.json())
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("access: fetching JWKS from %s failed: %s", url, exc)
        raise ApiError(
            503, "access_keys_unavailable", "could not fetch the Cloudflare Access signing keys"
        ) from None


async def signing_key(kid: str, bindings: Bindings) -> RsaPublicJwk | None:
    """The key for `kid`: from the cache while fresh; refetched when stale or unknown."""
    url = f"https://{team_domain(bindings.settings.access_team_domain)}/cdn-cgi/access/certs"
    cache = _CACHES.get(key := (url, id(bindings.http_transport)))
    if cache is None:
        if len(_CACHES) >= _MAX_CACHES:
            _CACHES.pop(next(iter(_CACHES)))
        cache = _CACHES[key] = JwksCache(transport=bindings.http_transport)
    now = bindings.clock.now()
    age = None if cache.fetched_at is None else now - cache.fetched_at
    stale = age is None or age >= JWKS_TTL_SECONDS
    unknown = kid not in cache.keys
    if stale or (unknown and age is not None and age >= UNKNOWN_KID_REFETCH_SECONDS):
        try:
            cache.keys = await _fetch_jwks(url, bindings)
            cache.fetched_at = now
        except ApiError:
            # Keys we still hold keep working through a JWKS outage (old key valid 7 days).
            if not cache.keys:
                raise
    return cache.keys.get(kid)


# Access's own words for the refusals whose generic text would not say which check failed.
_ACCESS_MESSAGES = {
    "issuer": "token was issued by another Access team",
    "audience": "token is for another Access application (aud mismatch)",
    "unknown_key": "token is signed with a key this Access team does not publish",
}


def _identity(claims: dict[str, Any], issuer: str) -> AccessIdentity:
    subject = claims.get("sub")
    email, common_name = claims.get("email"), claims.get("common_name")
    groups = claims.get("groups")
    return AccessIdentity(
        subject=subject if isinstance(subject, str) else "",
        email=email if isinstance(email, str) and email else None,
        common_name=common_name if isinstance(common_name, str) and common_name else None,
        issuer=issuer,
        expires_at=int(claims["exp"]),
        groups=tuple(g for g in groups if isinstance(g, str) and g)[:64]
        if isinstance(groups, list)
        else (),
    )


async def verify_access_token(token: str, bindings: Bindings) -> AccessIdentity:
    """Check a token completely; raise `ApiError` 403 (or 503) unless it is good."""
    settings = bindings.settings
    if not settings.access_team_domain or not settings.access_aud:
        raise ApiError(
            503,
            "access_not_configured",
            "Cloudflare Access is not configured (set ACCESS_TEAM_DOMAIN and ACCESS_AUD)",
        )
    if bindings.signatures is None:
        raise ApiError(503, "access_not_configured", "this deployment has no signature verifier")
    issuer = f"https://{team_domain(settings.access_team_domain)}"
    rules = JwtRules("RS256", issuer, settings.access_aud, LEEWAY_SECONDS, MAX_TOKEN_BYTES)
    try:
        claims = await verify_jwt(
            token,
            rules,
            lambda kid: signing_key(kid, bindings),
            bindings.signatures,
            bindings.clock.now(),
        )
    except JwtRefused as refused:
        raise _invalid(_ACCESS_MESSAGES.get(refused.reason, refused.message)) from None
    identity = _identity(claims, issuer)
    if identity.email is None and identity.common_name is None:
        raise _invalid("token names neither a user (email) nor a service token")
    return identity


async def require_access(request: HttpRequest, bindings: Bindings) -> AccessIdentity:
    """The gate: the caller's identity, or `ApiError` 401 (no token) / 403 (bad token)."""
    token = _token_from(request)
    if not token:
        message = f"this route needs a Cloudflare Access token ({ACCESS_HEADER})"
        raise ApiError(401, "access_token_missing", message)
    return await verify_access_token(token, bindings)


async def operator(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> AccessIdentity:
    """The gate of every `ACCESS` route (`worker.router`): a verified caller with a grant for
    the route's `{tenant}`, or the platform-admin role for a route naming no tenant
    (`authorization.operator_grants`); else 403 `tenant_forbidden` and nothing runs."""
    identity = await require_access(request, bindings)
    tenant = params.get("tenant")
    if not await granted(identity, tenant, bindings):
        target = f"tenant {tenant!r}" if tenant is not None else "cross-tenant routes"
        raise ApiError(403, "tenant_forbidden", f"this identity has no grant for {target}")
    return identity
