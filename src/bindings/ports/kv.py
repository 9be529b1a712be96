"""Workers KV port, with Cloudflare's limits (kv/platform/limits.mdx): keys ≤ 512 bytes,
`expiration_ttl` ≥ 60 s, metadata ≤ 1024 bytes of JSON, `list` ≤ 1000 keys per page with an
opaque cursor, in key order. Values are text (callers encode JSON). Value types are stdlib
dataclasses: they must load in bare Pyodide (tests/pyodide).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

KV_MAX_KEY_BYTES = 512
KV_MIN_EXPIRATION_TTL = 60
KV_MAX_METADATA_BYTES = 1024
KV_MAX_LIST_LIMIT = 1000
KV_MAX_VALUE_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KVKey:
    name: str
    expiration: int | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class KVListResult:
    """A page of keys. When `list_complete` is false, pass `cursor` to get the next page."""

    keys: list[KVKey]
    list_complete: bool
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class KVValueWithMetadata:
    """`getWithMetadata`: both None when the key is missing."""

    value: str | None
    metadata: dict[str, Any] | None = None


class KVNamespace(Protocol):
    async def get(self, key: str) -> str | None:
        """The value, or None when the key is missing or expired."""

    async def get_with_metadata(self, key: str) -> KVValueWithMetadata: ...

    async def put(
        self,
        key: str,
        value: str,
        *,
        expiration_ttl: int | None = None,
        expiration: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Write a value. Raises `BindingLimitError` on a limit Cloudflare enforces."""

    async def delete(self, key: str) -> None: ...

    async def list(
        self, *, prefix: str = "", limit: int = KV_MAX_LIST_LIMIT, cursor: str | None = None
    ) -> KVListResult: ...


class KVReadCache:
    """A TTL + LRU map from KV key to a parsed value, kept for the isolate's life (isolates are
    single-threaded): what a hot path reads from KV on every request, read once per TTL."""

    def __init__(self, ttl_seconds: float, max_entries: int) -> None:
        self._ttl = ttl_seconds
        self._max = max_entries
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        """`(True, value)` for a fresh entry, else `(False, None)` (and the entry is dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        read_at, value = entry
        # A clock that moved backwards also invalidates: never serve an entry of unknown age.
        if not (read_at <= now < read_at + self._ttl):
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, value

    def put(self, key: str, value: Any, now: float) -> None:
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def forget(self, key: str) -> None:
        """Drop one entry (a revocation in this isolate takes effect here at once)."""
        self._entries.pop(key, None)
