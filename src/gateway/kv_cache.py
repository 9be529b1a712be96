"""The gateway's KV state: key layout, allowed names, and the isolate cache of hot-path reads.

    gw:tenant:{tenant}             api_keys.TenantRecord
    gw:apikey:{sha256 of the key}  api_keys.ApiKeyRecord
    gw:keyid:{tenant}:{key_id}     admin_ops.ApiKeyIndexEntry (operators only)
    gw:cred:{tenant}:{provider}    tool_config.Credential
    gw:tool:{tenant}:{tool}        tool_config.ToolConfig
    gw:oauth:at:{sha256 of token}  oauth_tokens.AccessTokenRecord

Keys hold only SHA-256s of secrets; names stay far from KV's 512-byte key limit and never
hold `:`. A parsed record is served from the cache for `CACHE_TTL_SECONDS`, so a revocation,
rotation or config change takes effect within 30 s (plus KV propagation, ~60 s, on
Cloudflare); misses are never cached, so a new key or tool works at once.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from bindings.ports.clock import Clock
from bindings.ports.errors import BindingError
from bindings.ports.kv import KVNamespace
from http_messages.errors import ApiError

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
# MCP clients accept tool names of letters, digits, `_`, `-` and `.`; 64 keeps them readable.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KEY_ID_RE = re.compile(r"^k_[0-9a-f]{16}$")

CACHE_TTL_SECONDS = 30.0
# Bounds memory in a 128 MB isolate: a few thousand small records at most.
CACHE_MAX_ENTRIES = 4096

M = TypeVar("M", bound=BaseModel)


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
    """The `model` at `key` through the cache, None when missing. 503 `kv_unavailable` when
    KV fails; 500 `gateway_misconfigured` naming the problem and `fix` when the stored `what`
    (say, hand-written with wrangler) does not parse: never half-used."""
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
