"""Who is calling the gateway, from KV alone (docs/gateway.md, "The hot path" and "KV layout"):
tenants, API keys, OAuth access tokens (RFC 9728 challenges), sealed credentials, the isolate
cache of hot-path reads, and the gateway's errors (the shared `ApiError`, answered with
`x-gateway-error`). Keys hold only SHA-256s of secrets; the tenant always comes from the key
or token, never the request.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bindings.ports.clock import Clock
from bindings.ports.crypto import Cipher, CipherError, KeyEncryptionKeys, base64url_bytes
from bindings.ports.errors import BindingError
from bindings.ports.kv import KVNamespace
from http_messages import ApiError, HttpResponse

# A gateway error carries `x-gateway-error: <code>`; a relayed upstream answer never does, and
# always has `x-upstream-status`.
GATEWAY_ERROR_HEADER = "x-gateway-error"
UPSTREAM_STATUS_HEADER = "x-upstream-status"
TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")

# MCP clients accept tool names of letters, digits, `_`, `-` and `.`; 64 keeps them readable.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

KEY_ID_RE = re.compile(r"^k_[0-9a-f]{16}$")


CACHE_TTL_SECONDS = 30.0

# Bounds memory in a 128 MB isolate: a few thousand small records at most.
CACHE_MAX_ENTRIES = 4096


M = TypeVar("M", bound=BaseModel)


def gateway_error_response(exc: ApiError) -> HttpResponse:
    """The gateway's answer for `exc`: its JSON error with `x-gateway-error`."""
    return exc.to_response({GATEWAY_ERROR_HEADER: exc.code})


def unauthorized(code: str, message: str) -> ApiError:
    """A 401; every gateway route adds its challenge (`add_resource_metadata`)."""
    return ApiError(401, code, message)


def tenant_key(tenant: str) -> str:
    return f"gw:tenant:{tenant}"


def api_key_key(sha256_hex: str) -> str:
    return f"gw:apikey:{sha256_hex}"


def key_id_key(tenant: str, key_id: str) -> str:
    return f"gw:keyid:{tenant}:{key_id}"


def credential_key(tenant: str, provider: str) -> str:
    return f"gw:cred:{tenant}:{provider}"


def tool_key(tenant: str, tool: str) -> str:
    return f"gw:tool:{tenant}:{tool}"


class KVReadCache:
    """A TTL + LRU map from KV key to a parsed value (isolates are single-threaded)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        """`(True, value)` for a fresh entry, else `(False, None)` (and the entry is dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        read_at, value = entry
        # A clock that moved backwards also invalidates: never serve an entry of unknown age.
        if not (read_at <= now < read_at + CACHE_TTL_SECONDS):
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, value

    def put(self, key: str, value: Any, now: float) -> None:
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        while len(self._entries) > CACHE_MAX_ENTRIES:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def forget(self, key: str) -> None:
        """Drop one entry (a revocation in this isolate takes effect here at once)."""
        self._entries.pop(key, None)


ISOLATE_CACHE = KVReadCache()


async def read_record(
    kv: KVNamespace,
    cache: KVReadCache,
    clock: Clock,
    key: str,
    model: type[M],
    what: str,
    fix: str = "write it again",
) -> M | None:
    """The `model` at `key` through the cache, None when missing; 503 `kv_unavailable`, or 500
    `gateway_misconfigured` naming the problem and `fix` when the stored `what` does not parse."""
    now = clock.now()
    hit, value = cache.get(key, now)
    if hit:
        return value  # type: ignore[no-any-return]
    try:
        raw = await kv.get(key)
    except BindingError as exc:
        raise ApiError(503, "kv_unavailable", f"the gateway's KV store failed: {exc}") from None
    if raw is None:
        return None
    try:
        parsed = model.model_validate_json(raw)
    except ValidationError as exc:
        problem = exc.errors(include_url=False, include_input=False)[0]["msg"]
        raise ApiError(
            500, "gateway_misconfigured", f"the stored {what} is invalid: {problem}; {fix}"
        ) from None
    cache.put(key, parsed, now)
    return parsed


async def list_keys(kv: KVNamespace, prefix: str) -> list[str]:
    """Every key under `prefix`, in key order (all of KV's list pages)."""
    keys: list[str] = []
    cursor: str | None = None
    while True:
        try:
            page = await kv.list(prefix=prefix, cursor=cursor)
        except BindingError as exc:
            raise ApiError(503, "kv_unavailable", f"listing {prefix}* failed: {exc}") from None
        keys.extend(key.name for key in page.keys)
        if page.list_complete or not page.cursor:
            return keys
        cursor = page.cursor


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
            raise ApiError(403, "insufficient_scope", f"this API key lacks the {scope!r} scope")


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


async def load_tenant(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, tenant: str
) -> TenantRecord | None:
    return await read_record(kv, cache, clock, tenant_key(tenant), TenantRecord, "tenant record")


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
    """Lower-case hex SHA-256 of a secret's UTF-8 bytes (what KV and D1 store): API key,
    access, refresh, code or client secret."""
    return hashlib.sha256(token.encode()).hexdigest()


def access_token_key(sha256_hex: str) -> str:
    return f"gw:oauth:at:{sha256_hex}"


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, lower-cased (the issuer and resource base)."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def resources_for_origin(origin: str, path: str | None = None) -> frozenset[str]:
    """The RFC 8707 resources served at `origin` (a token names one, and is accepted only
    where it names: `/mcp` for `MCP_PATH`, the origin itself for the tool route); all of
    them when `path` is None."""
    tools, mcp = frozenset({origin, f"{origin}/"}), frozenset({f"{origin}{MCP_PATH}"})
    return {None: tools | mcp, MCP_PATH: mcp}.get(path, tools)


async def authenticate_bearer(
    kv: KVNamespace,
    cache: KVReadCache,
    clock: Clock,
    authorization: str | None,
    resources: frozenset[str],
) -> Principal:
    """The caller, by OAuth access token (`amo_…`) or API key; else a 401 `ApiError`
    (missing, malformed, unknown, revoked or expired)."""
    token = bearer_token(authorization)
    if not token.startswith(ACCESS_TOKEN_PREFIX):
        key = api_key_key(hash_token(token))
        what = "record for this API key"
        api_key = await read_record(kv, cache, clock, key, ApiKeyRecord, what, "re-issue the key")
        if api_key is None:
            raise unauthorized("invalid_api_key", "this API key is not known to the gateway")
        if api_key.status != "active":
            raise unauthorized("revoked_api_key", f"API key {api_key.key_id} has been revoked")
        return Principal(tenant=api_key.tenant, key_id=api_key.key_id, scopes=api_key.scopes)
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


def add_resource_metadata(response: HttpResponse, issuer: str, path: str) -> HttpResponse:
    """Name the protected-resource metadata in a 401/403 challenge (RFC 9728 §5.1); a 403
    `insufficient_scope` names the scope needed (`x-required-scope`) for a step-up."""
    if response.status not in (401, 403):
        return response
    code = response.headers.get(GATEWAY_ERROR_HEADER)
    # `/mcp` has its own metadata document (resource `{issuer}/mcp`).
    suffix = MCP_PATH if path == MCP_PATH else ""
    url = f"{issuer}{PROTECTED_RESOURCE_WELL_KNOWN}{suffix}"
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


class SealedSecret(BaseModel):
    """The KEK's id, the nonce and the ciphertext with its tag (unpadded base64url)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kid: str = Field(min_length=1, max_length=64)
    nonce: str = Field(min_length=1, max_length=64)
    ciphertext: str = Field(min_length=1, max_length=12_000)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unavailable(message: str) -> ApiError:
    return ApiError(503, "credential_key_unavailable", message)


@dataclass(frozen=True)
class CredentialSealer:
    """Seals and opens upstream credentials; `aad` is the KV key."""

    cipher: Cipher
    keks: KeyEncryptionKeys

    async def seal(self, aad: str, secret: str) -> SealedSecret:
        kid, kek = self.keks.newest
        nonce, sealed = await self.cipher.encrypt(kek, secret.encode("utf-8"), aad.encode())
        return SealedSecret(kid=kid, nonce=_b64(nonce), ciphertext=_b64(sealed))

    async def open(self, aad: str, sealed: SealedSecret) -> str:
        """The secret; 503 `credential_key_unavailable` when no configured key opens it."""
        kek = self.keks.get(sealed.kid)
        if kek is None:
            raise _unavailable(f"the credential is sealed under key {sealed.kid!r}, not configured")
        try:
            nonce, data = base64url_bytes(sealed.nonce), base64url_bytes(sealed.ciphertext)
            return (await self.cipher.decrypt(kek, nonce, data, aad.encode())).decode("utf-8")
        except (CipherError, ValueError):
            raise _unavailable("the stored credential does not open; set it again") from None


def credential_sealer(
    cipher: Cipher | None, keks: KeyEncryptionKeys | None
) -> CredentialSealer | None:
    return None if cipher is None or keks is None else CredentialSealer(cipher, keks)
