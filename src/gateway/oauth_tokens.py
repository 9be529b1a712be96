"""OAuth access tokens on the hot path, and RFC 9728 challenges pointing to `worker.oauth`.

A token is `amo_` + 256 random bits, opaque; the token endpoint writes
`gw:oauth:at:{sha256}` → `AccessTokenRecord` (with a KV expiration), read like an API key
(same cache, no D1 or signature). Refused unless the record exists (revocation deletes it),
has not expired by the clock, and names an RFC 8707 `resource` this origin answers for (not
another deployment sharing the namespace, nor another host name of this one). Scopes:
`tools`, `memory:read` (recall_memory), `memory:write` (store_memory).
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway.api_keys import Principal, Scope, authenticate, bearer_token
from gateway.errors import unauthorized
from gateway.kv_cache import TENANT_RE, KVReadCache, read_record
from http_messages import HttpResponse

ACCESS_TOKEN_PREFIX = "amo_"
OAUTH_SCOPES: tuple[Scope, ...] = ("tools", "memory:read", "memory:write")
MCP_PATH = "/mcp"
PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"


class AccessTokenRecord(BaseModel):
    """The value at `gw:oauth:at:{sha256}`: what one access token allows, until when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(pattern=TENANT_RE.pattern)
    principal: str = Field(max_length=320)
    client_id: str = Field(max_length=2048)
    grant_id: str = Field(max_length=64)
    scopes: tuple[Scope, ...]
    resource: str = Field(max_length=2048)
    issued_at: float
    expires_at: float


def hash_token(token: str) -> str:
    """Lower-case hex SHA-256 of a token (access, refresh, code or client secret)."""
    return hashlib.sha256(token.encode()).hexdigest()


def access_token_key(sha256_hex: str) -> str:
    return f"gw:oauth:at:{sha256_hex}"


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, lower-cased (the issuer and resource base)."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def resources_for_origin(origin: str) -> frozenset[str]:
    """The RFC 8707 resources accepted at `origin`: `/mcp` (MCP clients) and the origin (the
    tool route's metadata)."""
    return frozenset({origin, f"{origin}/", f"{origin}{MCP_PATH}"})


async def authenticate_bearer(
    kv: KVNamespace,
    cache: KVReadCache,
    clock: Clock,
    authorization: str | None,
    resources: frozenset[str],
) -> Principal:
    """The caller: an OAuth access token (`amo_…`) or an API key. Raises 401 `invalid_token`
    (unknown or revoked), `token_expired`, `token_resource_mismatch`, or the API-key codes."""
    token = bearer_token(authorization)
    if not token.startswith(ACCESS_TOKEN_PREFIX):
        return await authenticate(kv, cache, clock, authorization)
    key = access_token_key(hash_token(token))
    record = await read_record(kv, cache, clock, key, AccessTokenRecord, "access token record")
    if record is None:
        raise unauthorized("invalid_token", "this access token is unknown or was revoked")
    if clock.now() >= record.expires_at:
        raise unauthorized("token_expired", "this access token has expired; refresh it")
    if record.resource not in resources:
        raise unauthorized(
            "token_resource_mismatch",
            "this access token was issued for another resource (RFC 8707)",
        )
    return Principal(tenant=record.tenant, key_id=f"oauth:{record.grant_id}", scopes=record.scopes)


def add_resource_metadata(response: HttpResponse, request_url: str) -> HttpResponse:
    """Name the protected-resource metadata in a 401/403 challenge (RFC 9728 §5.1) so MCP
    clients find the authorization server; a 403 `insufficient_scope` names the scope needed
    (`x-required-scope`), which clients answer with a step-up authorization."""
    if response.status not in (401, 403):
        return response
    code = response.headers.get("x-gateway-error")
    # `/mcp` has its own metadata document (resource `{origin}/mcp`).
    suffix = MCP_PATH if urlsplit(request_url).path == MCP_PATH else ""
    url = f"{origin_of(request_url)}{PROTECTED_RESOURCE_WELL_KNOWN}{suffix}"
    if response.status == 401:
        challenge = f'Bearer resource_metadata="{url}"'
        if code not in (None, "missing_api_key"):
            challenge += ', error="invalid_token"'
    elif code == "insufficient_scope":
        scope = response.headers.get("x-required-scope") or " ".join(OAUTH_SCOPES)
        challenge = f'Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{url}"'
    else:
        return response
    response.headers.set("www-authenticate", challenge)
    return response
