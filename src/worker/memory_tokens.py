"""Agent-scoped memory tokens (ADR-29): HS256 JWTs that bind tenant, agent, tiers, scopes.

Contract:

* Keys come from the `MEMORY_TOKEN_KEYS` Worker secret, a JSON object of secrets by `kid`
  (each ≥ 32 characters). New tokens are signed with `MEMORY_TOKEN_KID` (default: the first
  key) and carry that `kid` in their header, so a key rotates by adding the new one, making
  it current, and removing the old one once its tokens expired.
* Claims: `iss` = `agent-memory`, `aud` = `agent-memory-api`, `tenant`, `agent_id`,
  `tiers` (subset of the four), `scopes` (subset of read / write), `iat`, `exp`, `jti`
  (a ULID). Lifetime 60 s to 30 days.
* The MAC is computed by the `MacSigner` port (`Bindings.mac`): WebCrypto on Cloudflare, the
  stdlib's `hmac` locally; nothing here is crypto but base64url and JSON framing.
* `verify_memory_token` refuses, with stable codes: 401 `memory_token_missing` (no Bearer
  token), 401 `memory_token_invalid` (malformed, wrong algorithm, unknown kid, bad MAC,
  expired, wrong issuer/audience, bad claims), 401 `memory_token_revoked` (its `jti` is on
  the KV deny-list), 503 `memory_tokens_not_configured` (no keys; fail closed).
* Revocation writes `memory_token_revoked:{tenant}:{jti}` to KV with a TTL of the longest token
  lifetime, so the deny-list cleans itself up. The check is one KV read per request.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_memory.ids import new_ulid
from agent_memory.scope import INSTANCE_PATTERN, TENANT_PATTERN
from bindings.environment import Bindings
from bindings.ports.kv import KVNamespace
from http_messages import HttpRequest
from worker.errors import ApiError
from worker.jwt_segments import decode_segment, encode_segment

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
    iat: int
    exp: int
    jti: str = Field(pattern=JTI_PATTERN)

    @field_validator("tiers", "scopes")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value))

    def may(self, tier: str, scope: Scope) -> bool:
        return tier in self.tiers and scope in self.scopes


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


def _unb64(segment: str) -> bytes:
    try:
        return decode_segment(segment)
    except ValueError:
        raise _invalid("token is not base64url") from None


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
    signing_input = (
        f"{encode_segment(json.dumps(header, separators=(',', ':')).encode())}."
        f"{encode_segment(json.dumps(payload, separators=(',', ':')).encode())}"
    )
    mac = await bindings.mac.sign(keys[kid], signing_input.encode("ascii"))
    return MintedToken(
        token=f"{signing_input}.{encode_segment(mac)}",
        kid=kid,
        jti=jti,
        tenant=tenant,
        agent_id=claims.agent_id,
        tiers=list(claims.tiers),
        scopes=list(claims.scopes),
        expires_at=claims.exp,
    )


def bearer_token(request: HttpRequest) -> str:
    value = (request.headers.get("authorization") or "").strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401, "memory_token_missing", "this route needs an agent memory token (Bearer)"
        )
    return token.strip()


def _json_object(segment: str) -> dict[str, Any]:
    try:
        value = json.loads(_unb64(segment))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _invalid("token header or payload is not JSON") from None
    if not isinstance(value, dict):
        raise _invalid("token header and payload must be JSON objects")
    return value


async def verify_memory_token(token: str, bindings: Bindings) -> MemoryTokenClaims:
    """The token's claims when it is genuine, current and not revoked; else `ApiError`."""
    _, keys = signing_keys(bindings)
    if len(token) > MAX_TOKEN_CHARS:
        raise _invalid("token is too long")
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise _invalid("token is not a JWT (expected header.payload.signature)")
    header = _json_object(parts[0])
    if header.get("alg") != "HS256":
        raise _invalid("token algorithm must be HS256")
    kid = header.get("kid")
    if not isinstance(kid, str) or kid not in keys:
        raise _invalid("token is signed with an unknown key")
    signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
    if not await bindings.mac.verify(keys[kid], signing_input, _unb64(parts[2])):
        raise _invalid("token signature does not verify")
    try:
        claims = MemoryTokenClaims.model_validate(_json_object(parts[1]))
    except ValidationError:
        raise _invalid("token claims are not those of an agent memory token") from None
    now = bindings.clock.now()
    if now > claims.exp + LEEWAY_SECONDS:
        raise _invalid("token has expired")
    if now + LEEWAY_SECONDS < claims.iat:
        raise _invalid("token is not valid yet")
    if await is_revoked(_kv(bindings), claims.tenant, claims.jti):
        raise ApiError(401, "memory_token_revoked", "this token has been revoked")
    return claims


def _kv(bindings: Bindings) -> KVNamespace:
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "the KV binding is missing")
    return bindings.kv


def _revoked_key(tenant: str, jti: str) -> str:
    # Keyed by tenant too: an operator of one tenant cannot revoke another tenant's tokens.
    return f"{REVOKED_PREFIX}{tenant}:{jti}"


async def is_revoked(kv: KVNamespace, tenant: str, jti: str) -> bool:
    return await kv.get(_revoked_key(tenant, jti)) is not None


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


async def require_memory_token(request: HttpRequest, bindings: Bindings) -> MemoryTokenClaims:
    """The gate of the memory API: the caller's verified claims, or a 401/503."""
    return await verify_memory_token(bearer_token(request), bindings)
