"""Agent-scoped memory tokens (ADR-29): HS256 JWTs that bind tenant, agent, tiers, scopes;
the gate of every memory-API route, and the operator routes that mint and revoke them.

Keys: `MEMORY_TOKEN_KEYS`, a JSON object of secrets (32+ characters) by `kid`; new tokens
use `MEMORY_TOKEN_KID` (default: the first) and name it, so a key rotates by adding the new
one, making it current, then removing the old. The MAC is the `Signatures` port's;
verification is `verify_jwt`, then the claims' strict model, then the deny-list. Refusals:
401 `memory_token_missing` / `memory_token_invalid` / `memory_token_revoked`, 503
`memory_tokens_not_configured` (fail closed). Revocation writes
`memory_token_revoked:{tenant}:{jti}` to KV with the longest token lifetime as TTL.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_memory.ids import new_ulid
from agent_memory.namespace import INSTANCE_PATTERN, TENANT_PATTERN
from bindings.environment import Bindings
from bindings.ports.kv import KVNamespace
from bindings.ports.signatures import Signatures
from http_messages import HttpRequest
from worker.errors import ApiError
from worker.jwt_verification import JwtRefused, JwtRules, verify_jwt
from worker.router import Call

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
LEEWAY_SECONDS = 30
REVOKED_PREFIX = "memory_token_revoked:"
KID_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
JTI_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"


class MemoryTokenClaims(BaseModel):
    """What a memory token lets its bearer do. `semantic` is shared within the tenant."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    iss: Literal["agent-memory"]
    aud: Literal["agent-memory-api"]
    tenant: str = Field(pattern=TENANT_PATTERN)
    agent_id: str = Field(pattern=INSTANCE_PATTERN)
    tiers: tuple[MemoryTier, ...] = Field(min_length=1)
    scopes: tuple[Scope, ...] = Field(min_length=1)
    # Strict: a string such as "1760000000" is not a time (issue 26).
    iat: int = Field(strict=True)
    exp: int = Field(strict=True)
    jti: str = Field(pattern=JTI_PATTERN)

    @field_validator("tiers", "scopes")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value))


class MintRequest(BaseModel):
    """Body of the mint route (and the CLI's arguments)."""

    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(pattern=INSTANCE_PATTERN)
    tiers: list[MemoryTier] = Field(default_factory=lambda: list(ALL_TIERS), min_length=1)
    scopes: list[Scope] = Field(default_factory=lambda: list(ALL_SCOPES), min_length=1)
    ttl_seconds: int = Field(default=3600, ge=MIN_TTL_SECONDS, le=MAX_TTL_SECONDS)


class MintedToken(BaseModel):
    token: str
    kid: str
    jti: str
    tenant: str
    agent_id: str
    tiers: list[MemoryTier]
    scopes: list[Scope]
    expires_at: int


def _invalid(message: str) -> ApiError:
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


def _segment(data: bytes) -> str:
    """One JWT segment: unpadded base64url (RFC 7515 §2)."""
    import jwt.utils  # when first used, like PyJWT in worker.jwt_verification

    return jwt.utils.base64url_encode(data).decode("ascii")


def _json_segment(value: dict[str, Any]) -> str:
    return _segment(json.dumps(value, separators=(",", ":")).encode())


async def mint_memory_token(bindings: Bindings, tenant: str, request: MintRequest) -> MintedToken:
    """Sign a token for `tenant` with the current key. The caller checked who may mint."""
    kid, keys = signing_keys(bindings)
    now = int(bindings.clock.now())
    jti = new_ulid(bindings.clock.now())
    claims = MemoryTokenClaims(
        iss=ISSUER,
        aud=AUDIENCE,
        tenant=tenant,
        agent_id=request.agent_id,
        tiers=tuple(request.tiers),
        scopes=tuple(request.scopes),
        iat=now,
        exp=now + request.ttl_seconds,
        jti=jti,
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": kid}
    payload = claims.model_dump(mode="json")
    signing_input = f"{_json_segment(header)}.{_json_segment(payload)}"
    mac = await _signatures(bindings).hmac_sign(keys[kid], signing_input.encode("ascii"))
    return MintedToken(
        token=f"{signing_input}.{_segment(mac)}", kid=kid, expires_at=claims.exp, **payload
    )


def bearer_token(request: HttpRequest) -> str:
    value = (request.headers.get("authorization") or "").strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401, "memory_token_missing", "this route needs an agent memory token (Bearer)"
        )
    return token.strip()


RULES = JwtRules("HS256", ISSUER, AUDIENCE, LEEWAY_SECONDS, MAX_TOKEN_CHARS, ("exp", "iat", "jti"))


async def verify_memory_token(token: str, bindings: Bindings) -> MemoryTokenClaims:
    """The token's claims when it is genuine, current and not revoked; else `ApiError`."""
    _, keys = signing_keys(bindings)

    async def key_for(kid: str) -> bytes | None:
        return keys.get(kid)

    try:
        raw = await verify_jwt(token, RULES, key_for, _signatures(bindings), bindings.clock.now())
    except JwtRefused as refused:
        raise _invalid(refused.message) from None
    try:
        claims = MemoryTokenClaims.model_validate(raw)
    except ValidationError:
        raise _invalid("token claims are not those of an agent memory token") from None
    if await _kv(bindings).get(_revoked_key(claims.tenant, claims.jti)) is not None:
        raise ApiError(401, "memory_token_revoked", "this token has been revoked")
    return claims


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
    if not re.fullmatch(JTI_PATTERN, jti):
        raise ApiError(422, "invalid_path", "jti must be a 26-character ULID")
    await _kv(bindings).put(
        _revoked_key(tenant, jti),
        json.dumps({"tenant": tenant, "revoked_at": int(bindings.clock.now())}),
        expiration_ttl=MAX_TTL_SECONDS + LEEWAY_SECONDS,
    )


async def agent_token(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> MemoryTokenClaims:
    """The gate of every `MEMORY_TOKEN` route (`worker.router`): the caller's verified
    claims, or a 401/503. What the claims allow is checked by the handler, which knows the
    tier and the operation (`worker.memory_routes.authorize`)."""
    return await verify_memory_token(bearer_token(request), bindings)


class TokenRevoked(BaseModel):
    tenant: str
    jti: str
    revoked: bool


async def mint(call: Call[MintRequest, None]) -> MintedToken:
    """`POST /admin/tenants/{tenant}/memory-tokens` (Access)."""
    return await mint_memory_token(call.bindings, call.params["tenant"], call.body)


async def revoke_token(call: Call[None, None]) -> TokenRevoked:
    """`DELETE /admin/tenants/{tenant}/memory-tokens/{jti}` (Access; idempotent)."""
    tenant, jti = call.params["tenant"], call.params["jti"]
    await revoke(call.bindings, tenant, jti)
    return TokenRevoked(tenant=tenant, jti=jti, revoked=True)
