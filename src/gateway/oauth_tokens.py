"""OAuth access tokens on the hot path: an opaque secret whose SHA-256 is the KV key of its grant.

An access token issued by the Worker's authorization server (`worker.oauth`) is
`amo_` + 43 random URL-safe characters (256 bits). Nothing about it is signed or parsed:
the token endpoint writes `gw:oauth:at:{sha256 hex}` → `AccessTokenRecord` (tenant, the
person who consented, client, scopes, resource, expiry) with a KV expiration, and
`authenticate_bearer` reads it exactly as `gateway.api_keys.authenticate` reads an API key
(same isolate cache, same 30 s staleness bound). No D1, Durable Object or signature is on
this path (tests/gateway/test_hot_path_isolation.py).

Checks, in order: the record exists (revocation deletes it; within 30 s in isolates that
cached it, at once in the isolate that revoked it), it has not expired (against the clock,
so the KV TTL's coarseness does not matter), and its RFC 8707 `resource` is one this
server answers for (`resources_for_origin`): a token minted for another deployment sharing
the KV namespace, or for another host name of this one, is refused.

Scopes: `tools` (proxied tool calls), `memory:read` (recall_memory), `memory:write`
(store_memory). API keys keep their `tools` / `memory` scopes (`memory` = both).
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway import kv_layout
from gateway.api_keys import Principal, Scope, authenticate, bearer_token
from gateway.errors import unauthorized
from gateway.kv_cache import KVReadCache, read_cached
from http_messages import HttpResponse
from http_messages.errors import ApiError

ACCESS_TOKEN_PREFIX = "amo_"
OAUTH_SCOPES: tuple[Scope, ...] = ("tools", "memory:read", "memory:write")
MCP_PATH = "/mcp"
PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"


class AccessTokenRecord(BaseModel):
    """The value at `gw:oauth:at:{sha256}`: what one access token allows, until when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(pattern=kv_layout.TENANT_RE.pattern)
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
    """The RFC 8707 resource identifiers this server accepts at `origin`: the MCP endpoint
    (what clients connecting to `/mcp` send) and the origin itself (what the plain tool
    route's metadata names)."""
    return frozenset({origin, f"{origin}/", f"{origin}{MCP_PATH}"})


def metadata_url_for(request_url: str) -> str:
    """The RFC 9728 metadata URL a 401 challenge names: `/mcp` has its own document (its
    resource is `{origin}/mcp`); every other protected path uses the origin's."""
    origin = origin_of(request_url)
    path = urlsplit(request_url).path
    suffix = MCP_PATH if path == MCP_PATH else ""
    return f"{origin}{PROTECTED_RESOURCE_WELL_KNOWN}{suffix}"


def _parse_record(raw: str) -> AccessTokenRecord:
    try:
        return AccessTokenRecord.model_validate_json(raw)
    except ValidationError as exc:
        raise ApiError(
            500,
            "gateway_misconfigured",
            f"the stored record for this access token is invalid ({exc.error_count()} problems)",
        ) from None


async def authenticate_bearer(
    kv: KVNamespace,
    cache: KVReadCache,
    clock: Clock,
    authorization: str | None,
    resources: frozenset[str],
) -> Principal:
    """The caller of a gateway route: an OAuth access token (`amo_…`) or an API key.

    Raises a 401 `ApiError`: `invalid_token` (unknown or revoked), `token_expired`,
    `token_resource_mismatch` (issued for another resource), or the API-key codes.
    """
    token = bearer_token(authorization)
    if not token.startswith(ACCESS_TOKEN_PREFIX):
        return await authenticate(kv, cache, clock, authorization)
    record = await read_cached(kv, cache, clock, access_token_key(hash_token(token)), _parse_record)
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
    """Name the protected-resource metadata in a 401/403 bearer challenge (RFC 9728 §5.1),
    so an MCP client can discover the authorization server from a refusal.

    A 403 `insufficient_scope` becomes RFC 6750's `error="insufficient_scope"` with the
    scope the call needs (`x-required-scope`, set by the refusal), which MCP clients answer
    with a step-up authorization.
    """
    if response.status not in (401, 403):
        return response
    code = response.headers.get("x-gateway-error")
    url = metadata_url_for(request_url)
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
