"""Who is calling: Cloudflare Access assertions (RS256; docs/agent-runtime.md, "Cloudflare
Access": its refusals, failing closed) and agent memory tokens (HS256, ADR-29; docs/memory-api.md:
their keys, refusals and deny-list), both verified by `worker.jwt_verification.verify_jwt`; the
routes that mint and revoke memory tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import warnings
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from agent_memory.ids import new_ulid
from agent_memory.namespace import (
    AGENT_TYPE_PATTERN,
    API_AGENT_TYPE,
    INSTANCE_PATTERN,
    TENANT_PATTERN,
)
from authorization.operator_grants import Principal, granted
from bindings.environment import Bindings
from bindings.ports.background import BackgroundTasks
from bindings.ports.crypto import RsaPublicJwk, Signatures
from bindings.ports.kv import KVNamespace
from gateway.credentials import origin_of
from http_messages import ApiError, HttpRequest
from worker.jwt_verification import JwtRefused, JwtRules, verify_jwt
from worker.routing import Call, StrictModel

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

    @property
    def principal(self) -> str:
        """A printable name for logs and audit fields (a verified identity has one)."""
        return self.email or self.common_name or ""


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


def _cookie_token(request: HttpRequest) -> str | None:
    pairs = (
        part.strip().partition("=") for part in (request.headers.get("cookie") or "").split(";")
    )
    return next((value for name, _, value in pairs if name == ACCESS_COOKIE and value), None)


# Methods that never change anything (RFC 9110 §9.2.1): the cookie alone may read.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _same_origin(request: HttpRequest) -> bool:
    """`Sec-Fetch-Site: same-origin` and/or an `Origin` equal to the request's own: at least
    one present, none saying otherwise."""
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is None and origin is None:
        return False
    if site is not None and site.strip().lower() != "same-origin":
        return False
    return origin is None or origin.strip().lower() == origin_of(request.url)


def check_not_cross_site(request: HttpRequest) -> None:
    """CSRF (issue 26): another site's page can make a browser send the `CF_Authorization`
    cookie (it may be `SameSite=None`), so a state-changing request with only the cookie needs
    a same-origin `Origin`/`Sec-Fetch-Site` and a JSON content type; else 403
    `cross_site_request`. No other site can set the `Cf-Access-Jwt-Assertion` header."""
    if request.method.upper() in SAFE_METHODS or request.headers.get(ACCESS_HEADER):
        return
    if _cookie_token(request) is None:
        return  # no credentials at all: the 401 of `require_access`
    # A form (urlencoded, multipart, text/plain) is what a page of another site can send
    # without a CORS preflight; application/json it cannot.
    media_type = (request.headers.get("content-type") or "").split(";", 1)[0]
    if not (_same_origin(request) and media_type.strip().lower() == "application/json"):
        raise ApiError(
            403,
            "cross_site_request",
            "a state-changing request authenticated by the CF_Authorization cookie must be "
            f"same-origin (Origin / Sec-Fetch-Site) with Content-Type application/json; "
            f"send the token as {ACCESS_HEADER} otherwise",
        )


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


def _identity(claims: dict[str, Any]) -> AccessIdentity:
    def text(name: str) -> str | None:
        value = claims.get(name)
        return value if isinstance(value, str) and value else None

    groups = claims.get("groups")
    return AccessIdentity(
        email=text("email"),
        common_name=text("common_name"),
        groups=tuple(g for g in groups if isinstance(g, str) and g)
        if isinstance(groups, list)
        else (),
    )


async def verify_access_token(token: str, bindings: Bindings) -> AccessIdentity:
    """Check a token completely; raise `ApiError` 403 (or 503) unless it is good."""
    settings = bindings.settings
    if not settings.access_team_domain or not settings.access_aud:
        message = "Cloudflare Access is not configured (set ACCESS_TEAM_DOMAIN and ACCESS_AUD)"
        raise ApiError(503, "access_not_configured", message)
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
    identity = _identity(claims)
    if identity.email is None and identity.common_name is None:
        raise _invalid("token names neither a user (email) nor a service token")
    return identity


async def require_access(request: HttpRequest, bindings: Bindings) -> AccessIdentity:
    """The gate: the caller's identity, or `ApiError` 401 (no token) / 403 (bad token)."""
    # The header is what Access guarantees (cheat sheet §9); the cookie is only a fallback.
    header = request.headers.get(ACCESS_HEADER)
    token = header.strip() if header else _cookie_token(request)
    if not token:
        message = f"this route needs a Cloudflare Access token ({ACCESS_HEADER})"
        raise ApiError(401, "access_token_missing", message)
    return await verify_access_token(token, bindings)


async def signed_in(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> AccessIdentity:
    """The gate of an `ACCESS_SIGNED_IN` route: a verified caller, no grant needed (the
    handler answers with what the caller's grants allow). A state-changing request carrying
    only the cookie must pass `check_not_cross_site` first (403 `cross_site_request`)."""
    check_not_cross_site(request)
    return await require_access(request, bindings)


async def operator(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> AccessIdentity:
    """The gate of every `ACCESS` route: `signed_in`, with a grant for the route's `{tenant}`
    or the platform-admin role for a route naming none; else 403 `tenant_forbidden`."""
    identity = await signed_in(request, params, bindings)
    tenant = params.get("tenant")
    if not await granted(identity, tenant, bindings):
        target = f"tenant {tenant!r}" if tenant is not None else "cross-tenant routes"
        raise ApiError(403, "tenant_forbidden", f"this identity has no grant for {target}")
    return identity


MemoryTier = Literal["working", "episodic", "semantic", "procedural"]
Scope = Literal["read", "write"]
ALL_TIERS: tuple[MemoryTier, ...] = ("working", "episodic", "semantic", "procedural")
ALL_SCOPES: tuple[Scope, ...] = ("read", "write")
ISSUER = "agent-memory"
AUDIENCE = "agent-memory-api"
MIN_TTL_SECONDS = 60
MAX_TTL_SECONDS = 30 * 86_400
MIN_SECRET_CHARS = 32
MAX_TOKEN_CHARS = 4096
REVOKED_PREFIX = "memory_token_revoked:"
KID_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
JTI_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"


class MemoryTokenClaims(BaseModel):
    """What a memory token lets its bearer do. `semantic` is shared within the tenant."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    iss: Literal["agent-memory"]
    aud: Literal["agent-memory-api"]
    tenant: str = Field(pattern=TENANT_PATTERN)
    # The agent is (agent_type, agent_id): a token reaches that one agent's working and
    # episodic memory, not another type's instance of the same id (issue 25).
    agent_type: str = Field(default=API_AGENT_TYPE, pattern=AGENT_TYPE_PATTERN)
    agent_id: str = Field(pattern=INSTANCE_PATTERN)
    tiers: tuple[MemoryTier, ...] = Field(min_length=1)
    scopes: tuple[Scope, ...] = Field(min_length=1)
    # Strict: a string such as "1760000000" is not a time (issue 26).
    iat: int = Field(strict=True)
    exp: int = Field(strict=True)
    jti: str = Field(pattern=JTI_PATTERN)
    # The deny-list lookup, when the gate left it in flight (`agent_token`).
    _revocation: asyncio.Future[str | None] | None = PrivateAttr(default=None)

    async def confirm(self) -> None:
        """Raise 401 `memory_token_revoked` when the token is on the deny-list; nothing when
        the gate checked it already (idempotent)."""
        if self._revocation is not None and await self._revocation is not None:
            raise _token_revoked()

    @field_validator("tiers", "scopes")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value))


class MintRequest(StrictModel):
    agent_type: str = Field(default=API_AGENT_TYPE, pattern=AGENT_TYPE_PATTERN)
    agent_id: str = Field(pattern=INSTANCE_PATTERN)
    tiers: list[MemoryTier] = Field(default_factory=lambda: list(ALL_TIERS), min_length=1)
    scopes: list[Scope] = Field(default_factory=lambda: list(ALL_SCOPES), min_length=1)
    ttl_seconds: int = Field(default=3600, ge=MIN_TTL_SECONDS, le=MAX_TTL_SECONDS)


class MintedToken(BaseModel):
    token: str
    kid: str
    jti: str
    tenant: str
    agent_type: str
    agent_id: str
    tiers: list[MemoryTier]
    scopes: list[Scope]
    expires_at: int


def _token_invalid(message: str) -> ApiError:
    return ApiError(401, "memory_token_invalid", message)


def _not_configured(message: str) -> ApiError:
    return ApiError(503, "memory_tokens_not_configured", message)


def signing_keys(bindings: Bindings) -> tuple[str, dict[str, bytes]]:
    """(current kid, secrets by kid) from the settings, or 503 when absent or malformed."""
    raw = bindings.settings.memory_token_keys
    if not raw.strip():
        raise _not_configured("memory tokens need the MEMORY_TOKEN_KEYS secret")
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise _not_configured("MEMORY_TOKEN_KEYS is not JSON") from None
    if not isinstance(parsed, dict) or not parsed:
        raise _not_configured("MEMORY_TOKEN_KEYS must be a non-empty JSON object")
    keys: dict[str, bytes] = {}
    for kid, secret in parsed.items():
        if not re.fullmatch(KID_PATTERN, kid) or not isinstance(secret, str):
            raise _not_configured("MEMORY_TOKEN_KEYS has a malformed kid or secret")
        if len(secret) < MIN_SECRET_CHARS:
            raise _not_configured(f"every memory token secret needs {MIN_SECRET_CHARS}+ chars")
        keys[kid] = secret.encode("utf-8")
    current = bindings.settings.memory_token_kid or next(iter(keys))
    if current not in keys:
        raise _not_configured("MEMORY_TOKEN_KID names no key in MEMORY_TOKEN_KEYS")
    return current, keys


def _signatures(bindings: Bindings) -> Signatures:
    if bindings.signatures is None:
        raise _not_configured("this deployment has no signature verifier")
    return bindings.signatures


def _segment(data: bytes | dict[str, Any]) -> str:
    """One JWT segment, of bytes or a JSON object: unpadded base64url (RFC 7515 §2)."""
    import jwt.utils  # when first used, like PyJWT in verify_jwt

    raw = json.dumps(data, separators=(",", ":")).encode() if isinstance(data, dict) else data
    return jwt.utils.base64url_encode(raw).decode("ascii")


async def mint_memory_token(bindings: Bindings, tenant: str, request: MintRequest) -> MintedToken:
    """Sign a token for `tenant` with the current key. The caller checked who may mint."""
    kid, keys = signing_keys(bindings)
    now = int(bindings.clock.now())
    claims = MemoryTokenClaims(
        iss=ISSUER,
        aud=AUDIENCE,
        tenant=tenant,
        **request.model_dump(exclude={"ttl_seconds"}),
        iat=now,
        exp=now + request.ttl_seconds,
        jti=new_ulid(bindings.clock.now()),
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": kid}
    payload = claims.model_dump(mode="json")
    signing_input = f"{_segment(header)}.{_segment(payload)}"
    mac = await _signatures(bindings).hmac_sign(keys[kid], signing_input.encode("ascii"))
    return MintedToken(
        token=f"{signing_input}.{_segment(mac)}", kid=kid, expires_at=claims.exp, **payload
    )


def bearer_token(request: HttpRequest) -> str:
    value = (request.headers.get("authorization") or "").strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        message = "this route needs an agent memory token (Bearer)"
        raise ApiError(401, "memory_token_missing", message)
    return token.strip()


RULES = JwtRules("HS256", ISSUER, AUDIENCE, LEEWAY_SECONDS, MAX_TOKEN_CHARS, ("exp", "iat", "jti"))


async def verify_memory_token(
    token: str, bindings: Bindings, *, overlap: bool = False
) -> MemoryTokenClaims:
    """The token's claims when it is genuine, current and not revoked; else `ApiError`. With
    `overlap`, the deny-list lookup is left in flight: the caller must `confirm()` the
    claims before writing or answering."""
    _, keys = signing_keys(bindings)

    async def key_for(kid: str) -> bytes | None:
        return keys.get(kid)

    try:
        raw = await verify_jwt(token, RULES, key_for, _signatures(bindings), bindings.clock.now())
    except JwtRefused as refused:
        raise _token_invalid(refused.message) from None
    try:
        claims = MemoryTokenClaims.model_validate(raw)
    except ValidationError:
        raise _token_invalid("token claims are not those of an agent memory token") from None
    denied = _kv(bindings).get(_revoked_key(claims.tenant, claims.jti))
    if overlap:
        claims._revocation = asyncio.ensure_future(denied)
    elif await denied is not None:
        raise _token_revoked()
    return claims


def _token_revoked() -> ApiError:
    return ApiError(401, "memory_token_revoked", "this token has been revoked")


@dataclass(frozen=True)
class _AfterConfirmation:
    """A background that starts each piece of after-response work only once the token is
    confirmed: a revoked token's request records nothing (no event, no recall statistics)."""

    inner: BackgroundTasks
    claims: MemoryTokenClaims

    def wait_until(self, work: Coroutine[Any, Any, Any]) -> None:
        held = [work]  # the only reference, so dropping it frees it (and what it holds) at once

        async def when_confirmed() -> Any:
            try:
                await self.claims.confirm()
            except Exception:
                # Dropped unstarted; a coroutine it was handed (`after_response(work)`) is
                # freed with it, which CPython reports as "never awaited": intended here.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    held.pop().close()
                return None
            return await held.pop()

        self.inner.wait_until(when_confirmed())


def confirmed_bindings(bindings: Bindings, claims: MemoryTokenClaims) -> Bindings:
    """`bindings` whose after-response work waits for the token's confirmation."""
    return dataclasses.replace(bindings, background=_AfterConfirmation(bindings.background, claims))


def _kv(bindings: Bindings) -> KVNamespace:
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "the KV binding is missing")
    return bindings.kv


def _revoked_key(tenant: str, jti: str) -> str:
    # Keyed by tenant too: an operator of one tenant cannot revoke another tenant's tokens.
    return f"{REVOKED_PREFIX}{tenant}:{jti}"


async def revoke(bindings: Bindings, tenant: str, jti: str) -> None:
    """Deny-list `tenant`'s token `jti` for the longest lifetime a token can have
    (idempotent; a jti of another tenant's token is not affected)."""
    await _kv(bindings).put(
        _revoked_key(tenant, jti),
        json.dumps({"tenant": tenant, "revoked_at": int(bindings.clock.now())}),
        expiration_ttl=MAX_TTL_SECONDS + LEEWAY_SECONDS,
    )


async def agent_token(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> MemoryTokenClaims:
    """The gate of every `MEMORY_TOKEN` route: the verified claims (else 401/503) with the
    deny-list lookup in flight; the router confirms them before the handler, or after it for an
    `overlap_auth` route. What they allow is the handler's check (`memory_routes.authorize`)."""
    return await verify_memory_token(bearer_token(request), bindings, overlap=True)


class TokenRevoked(BaseModel):
    tenant: str
    jti: str
    revoked: bool


async def mint(call: Call[MintRequest, None]) -> MintedToken:
    return await mint_memory_token(call.bindings, call.params["tenant"], call.body)


async def revoke_token(call: Call[None, None]) -> TokenRevoked:
    tenant, jti = call.params["tenant"], call.params["jti"]
    await revoke(call.bindings, tenant, jti)
    return TokenRevoked(tenant=tenant, jti=jti, revoked=True)
