"""Cloudflare Access: verify `Cf-Access-Jwt-Assertion` before an admin or agent route runs.

Contract (docs: cloudflare-one/access-controls/applications/http-apps/authorization-cookie/
validating-json/):

* the token is an RS256 JWT signed by one of the keys in the team's JWKS
  `https://<team>/cdn-cgi/access/certs` (current + previous key; rotation every 6 weeks);
* the key is chosen by the header's `kid`; the JWKS is fetched with httpx, cached for
  `JWKS_TTL_SECONDS` and refetched at once when a token names a `kid` the cache lacks
  (rate-limited by `UNKNOWN_KID_REFETCH_SECONDS`, so forged kids cannot make us hammer the
  endpoint);
* `exp` (required) and `nbf` are checked with `LEEWAY_SECONDS` of clock skew, `iss` must be
  `https://<team>` and `aud` (a string or a list) must contain the configured AUD tag.

`await require_access(request, bindings)` returns the caller's `AccessIdentity` or raises an
`ApiError`: 401 `access_token_missing` when there is no token, 403 `access_token_invalid`
when there is one that fails any check, 503 `access_not_configured` /
`access_keys_unavailable` when the Worker cannot check at all (fail closed). Handlers call
it first, so nothing runs for a caller that is not let in.

Verification is pure Python (the Worker may depend on pydantic, httpx and numpy only):
RSASSA-PKCS1-v1_5 is `pow(signature, e, n)` followed by an exact comparison with the
expected encoded message for SHA-256. There is no dev bypass: the local runtime serves a
dev JWKS through `Bindings.http_transport` and mints tokens with the matching key, so this
same code checks them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from bindings.environment import Bindings
from http_messages import HttpRequest, HttpResponse
from worker.errors import ApiError
from worker.jwt_segments import decode_segment
from worker.operators import Principal, require_tenant_grant

log = logging.getLogger(__name__)

ACCESS_HEADER = "Cf-Access-Jwt-Assertion"
ACCESS_COOKIE = "CF_Authorization"
JWKS_TTL_SECONDS = 600.0
UNKNOWN_KID_REFETCH_SECONDS = 10.0
LEEWAY_SECONDS = 30
MAX_TOKEN_BYTES = 16_384

# DER prefix of DigestInfo for SHA-256 (RFC 8017 §9.2, note 1).
_SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


class AccessIdentity(BaseModel):
    """Who passed the gate. `email` for users; service tokens carry `common_name` instead."""

    model_config = ConfigDict(frozen=True)

    subject: str
    email: str | None = None
    common_name: str | None = None
    issuer: str
    expires_at: int
    # Access groups, when the application passes them as a `groups` claim (grants by group).
    groups: tuple[str, ...] = ()

    @property
    def principal(self) -> str:
        """A printable name for logs and audit fields."""
        return self.email or self.common_name or self.subject


def access_missing(message: str) -> ApiError:
    return ApiError(401, "access_token_missing", message)


def access_invalid(message: str) -> ApiError:
    return ApiError(403, "access_token_invalid", message)


@dataclass(frozen=True)
class RsaPublicKey:
    n: int
    e: int

    @property
    def size_bytes(self) -> int:
        return (self.n.bit_length() + 7) // 8


@dataclass
class JwksCache:
    """Keys of one JWKS endpoint reached through one transport, with their fetch time."""

    keys: dict[str, RsaPublicKey] = field(default_factory=dict)
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
    value = raw.strip()
    for prefix in ("https://", "http://"):
        if value.startswith(prefix):
            value = value[len(prefix) :]
    return value.rstrip("/")


def certs_url(domain: str) -> str:
    return f"https://{team_domain(domain)}/cdn-cgi/access/certs"


def _b64url_decode(segment: str) -> bytes:
    try:
        return decode_segment(segment)
    except ValueError:
        raise access_invalid("token is not a well-formed JWT (bad base64url)") from None


def _b64url_int(segment: str) -> int:
    return int.from_bytes(_b64url_decode(segment), "big")


def parse_jwks(document: Any) -> dict[str, RsaPublicKey]:
    """RSA signing keys by kid from a JWKS document; other key types are skipped."""
    keys: dict[str, RsaPublicKey] = {}
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError("JWKS document has no 'keys' list")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA":
            continue
        kid, n, e = entry.get("kid"), entry.get("n"), entry.get("e")
        if not (isinstance(kid, str) and isinstance(n, str) and isinstance(e, str)):
            continue
        if entry.get("use", "sig") != "sig" or entry.get("alg", "RS256") != "RS256":
            continue
        try:
            keys[kid] = RsaPublicKey(n=_b64url_int(n), e=_b64url_int(e))
        except ApiError:
            continue
    return keys


def rs256_verify(key: RsaPublicKey, signing_input: bytes, signature: bytes) -> bool:
    """RSASSA-PKCS1-v1_5 verification with SHA-256 (RFC 8017 §8.2.2), in pure Python."""
    k = key.size_bytes
    if len(signature) != k or k < 11 + len(_SHA256_DIGEST_INFO) + 32:
        return False
    s = int.from_bytes(signature, "big")
    if s >= key.n:
        return False
    encoded = pow(s, key.e, key.n).to_bytes(k, "big")
    digest_info = _SHA256_DIGEST_INFO + hashlib.sha256(signing_input).digest()
    # EM = 0x00 || 0x01 || PS (0xff…, ≥ 8 bytes) || 0x00 || DigestInfo. Comparing with the
    # whole expected EM (not parsing it) rules out the classic lenient-parser forgeries.
    expected = b"\x00\x01" + b"\xff" * (k - len(digest_info) - 3) + b"\x00" + digest_info
    return hmac.compare_digest(encoded, expected)


@dataclass(frozen=True)
class _Token:
    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def _decode(token: str) -> _Token:
    if len(token) > MAX_TOKEN_BYTES:
        raise access_invalid("token is too long")
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise access_invalid("token is not a JWT (expected header.payload.signature)")
    try:
        header = json.loads(_b64url_decode(parts[0]))
        claims = json.loads(_b64url_decode(parts[1]))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise access_invalid("token header or payload is not JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise access_invalid("token header and payload must be JSON objects")
    return _Token(
        header=header,
        claims=claims,
        signing_input=f"{parts[0]}.{parts[1]}".encode("ascii"),
        signature=_b64url_decode(parts[2]),
    )


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


def _cache_for(url: str, bindings: Bindings) -> JwksCache:
    key = (url, id(bindings.http_transport))
    cache = _CACHES.get(key)
    if cache is None:
        if len(_CACHES) >= _MAX_CACHES:
            _CACHES.pop(next(iter(_CACHES)))
        cache = JwksCache(transport=bindings.http_transport)
        _CACHES[key] = cache
    return cache


async def _fetch_jwks(url: str, bindings: Bindings) -> dict[str, RsaPublicKey]:
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


async def signing_key(kid: str, bindings: Bindings) -> RsaPublicKey | None:
    """The key for `kid`: from the cache while fresh; refetched when stale or unknown."""
    url = certs_url(bindings.settings.access_team_domain)
    cache = _cache_for(url, bindings)
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


def _check_claims(claims: dict[str, Any], bindings: Bindings) -> AccessIdentity:
    settings = bindings.settings
    now = bindings.clock.now()
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise access_invalid("token has no numeric 'exp' claim")
    if now > exp + LEEWAY_SECONDS:
        raise access_invalid("token has expired")
    if nbf is not None:
        if not isinstance(nbf, int | float) or isinstance(nbf, bool):
            raise access_invalid("token 'nbf' claim is not a number")
        if now + LEEWAY_SECONDS < nbf:
            raise access_invalid("token is not valid yet")
    issuer = f"https://{team_domain(settings.access_team_domain)}"
    if claims.get("iss") != issuer:
        raise access_invalid("token was issued by another Access team")
    aud = claims.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    if settings.access_aud not in audiences:
        raise access_invalid("token is for another Access application (aud mismatch)")
    subject = claims.get("sub")
    email, common_name = claims.get("email"), claims.get("common_name")
    groups = claims.get("groups")
    return AccessIdentity(
        subject=subject if isinstance(subject, str) else "",
        email=email if isinstance(email, str) and email else None,
        common_name=common_name if isinstance(common_name, str) and common_name else None,
        issuer=issuer,
        expires_at=int(exp),
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
    parsed = _decode(token)
    if parsed.header.get("alg") != "RS256":
        raise access_invalid("token algorithm must be RS256")
    kid = parsed.header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise access_invalid("token header has no 'kid'")
    key = await signing_key(kid, bindings)
    if key is None:
        raise access_invalid("token is signed with a key this Access team does not publish")
    if not rs256_verify(key, parsed.signing_input, parsed.signature):
        raise access_invalid("token signature does not verify")
    identity = _check_claims(parsed.claims, bindings)
    if identity.email is None and identity.common_name is None:
        raise access_invalid("token names neither a user (email) nor a service token")
    return identity


async def require_access(request: HttpRequest, bindings: Bindings) -> AccessIdentity:
    """The gate: the caller's identity, or `ApiError` 401 (no token) / 403 (bad token)."""
    token = _token_from(request)
    if not token:
        raise access_missing(f"this route needs a Cloudflare Access token ({ACCESS_HEADER})")
    return await verify_access_token(token, bindings)


GatedHandler = Callable[
    [HttpRequest, dict[str, str], Bindings, AccessIdentity], Awaitable[HttpResponse]
]
Handler = Callable[[HttpRequest, dict[str, str], Bindings], Awaitable[HttpResponse]]


def access_gated(handler: GatedHandler) -> Handler:
    """Wrap a route handler so it runs only for a verified caller with a grant for the
    route's `{tenant}` (or the platform-admin role: `worker.operators`), who is passed to it."""

    async def gated(
        request: HttpRequest, params: dict[str, str], bindings: Bindings
    ) -> HttpResponse:
        identity = await require_access(request, bindings)
        who = Principal(
            email=identity.email, common_name=identity.common_name, groups=identity.groups
        )
        await require_tenant_grant(who, params.get("tenant"), bindings)
        return await handler(request, params, bindings, identity)

    gated.__name__ = getattr(handler, "__name__", "gated")
    gated.__doc__ = handler.__doc__
    return gated
