"""Tenants and their API keys. `authenticate`: `Authorization: Bearer <key>` → SHA-256 → KV
`gw:apikey:{hex}` → `Principal` (the tenant comes from the key, never the request). Keys are
256 random bits, so an unsalted SHA-256 leaves nothing to brute-force in a KV dump.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway.errors import forbidden, unauthorized
from gateway.kv_cache import KEY_ID_RE, TENANT_RE, KVReadCache, api_key_key, read_record, tenant_key

# `memory` (API keys) allows both memory tools; OAuth grants split it into `memory:read`
# (recall_memory) and `memory:write` (store_memory) (gateway.oauth_tokens).
Scope = Literal["tools", "memory", "memory:read", "memory:write"]
ALL_SCOPES: tuple[Scope, ...] = ("tools", "memory")

# RFC 6750 b64token characters; the length bounds reject junk before any hashing or KV read.
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._~+/=-]{16,256}$")


class TenantRecord(BaseModel):
    """The value at `gw:tenant:{tenant}` (MCP reads `memory_enabled`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(pattern=TENANT_RE.pattern)
    display_name: str = Field(default="", max_length=200)
    # ADR-0030: memory tools are granted by the platform when enabled, not declared per tool.
    memory_enabled: bool = False
    created_at: float = 0.0


class ApiKeyRecord(BaseModel):
    """The value at `gw:apikey:{sha256}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(pattern=TENANT_RE.pattern)
    key_id: str = Field(pattern=KEY_ID_RE.pattern)
    scopes: tuple[Scope, ...] = ALL_SCOPES
    status: Literal["active", "revoked"] = "active"
    label: str = Field(default="", max_length=200)
    created_at: float = 0.0
    revoked_at: float | None = None


class Principal(BaseModel):
    """Who is calling: a tenant, the key (or OAuth grant) and its scopes."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    key_id: str
    scopes: tuple[Scope, ...]

    def require(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise forbidden("insufficient_scope", f"this API key lacks the {scope!r} scope")


def hash_api_key(api_key: str) -> str:
    """Lower-case hex SHA-256 of the key's UTF-8 bytes (what KV stores)."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer` header, or a 401 `ApiError`."""
    if not authorization or not authorization.strip():
        raise unauthorized("missing_api_key", "send the API key as 'Authorization: Bearer <key>'")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not _TOKEN_RE.fullmatch(token):
        raise unauthorized(
            "malformed_api_key",
            "the Authorization header must be 'Bearer <key>' with a key of 16-256 token characters",
        )
    return token


async def authenticate(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, authorization: str | None
) -> Principal:
    """Resolve the caller, or raise 401 (missing, malformed, unknown or revoked key)."""
    key = api_key_key(hash_api_key(bearer_token(authorization)))
    record = await read_record(
        kv, cache, clock, key, ApiKeyRecord, "record for this API key", "re-issue the key"
    )
    if record is None:
        raise unauthorized("invalid_api_key", "this API key is not known to the gateway")
    if record.status != "active":
        raise unauthorized("revoked_api_key", f"API key {record.key_id} has been revoked")
    return Principal(tenant=record.tenant, key_id=record.key_id, scopes=record.scopes)


async def load_tenant(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, tenant: str
) -> TenantRecord | None:
    return await read_record(kv, cache, clock, tenant_key(tenant), TenantRecord, "tenant record")
