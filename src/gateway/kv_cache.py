"""Per-isolate cache of parsed KV reads: the staleness bound of the gateway.

A Worker isolate serves many requests; caching the API-key record, tool config,
credential and tenant record for `CACHE_TTL_SECONDS` makes the steady-state hot path
free of KV reads. The price is staleness, bounded as follows:

* an entry is served for at most `CACHE_TTL_SECONDS` (30 s) after it was read, so a
  revoked key, a rotated credential or a changed tool config takes effect in every
  isolate within 30 s of KV returning the new value;
* on Cloudflare, KV itself is eventually consistent (a write can take up to ~60 s to be
  visible in other locations), so the end-to-end bound there is 30 s + KV propagation;
* misses (missing keys) are never cached, so a newly issued key or registered tool works
  on the next request.

Only the module-level `ISOLATE_CACHE` is shared across requests; it holds parsed,
immutable (frozen pydantic) values. Tests call `ISOLATE_CACHE.clear()` between cases.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from bindings.ports.clock import Clock
from bindings.ports.errors import BindingError
from bindings.ports.kv import KVNamespace
from http_messages.errors import ApiError

CACHE_TTL_SECONDS = 30.0
# Bounds memory in a 128 MB isolate: a few thousand small records at most.
CACHE_MAX_ENTRIES = 4096

T = TypeVar("T")


class KVReadCache:
    """A TTL + LRU map from KV key to a parsed value. Not thread-safe (isolates are not)."""

    def __init__(
        self, ttl_seconds: float = CACHE_TTL_SECONDS, max_entries: int = CACHE_MAX_ENTRIES
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        """Return `(True, value)` for a fresh entry, else `(False, None)` (and drop it)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        read_at, value = entry
        # A clock that moved backwards also invalidates: never serve an entry of unknown age.
        if not (read_at <= now < read_at + self.ttl_seconds):
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, value

    def put(self, key: str, value: Any, now: float) -> None:
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def forget(self, key: str) -> None:
        """Drop one entry (a revocation in this isolate takes effect here at once)."""
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


ISOLATE_CACHE = KVReadCache()


async def kv_get(kv: KVNamespace, key: str) -> str | None:
    """`kv.get` with store failures mapped to a 503 gateway error."""
    try:
        return await kv.get(key)
    except BindingError as exc:
        raise ApiError(503, "kv_unavailable", f"the gateway's KV store failed: {exc}") from None


async def read_cached(
    kv: KVNamespace,
    cache: KVReadCache,
    clock: Clock,
    key: str,
    parse: Callable[[str], T],
) -> T | None:
    """Read `key` through the cache; `parse` turns the stored text into a value (or raises).

    Returns None for a missing key (not cached, see the module docstring).
    """
    now = clock.now()
    hit, value = cache.get(key, now)
    if hit:
        return value  # type: ignore[no-any-return]
    raw = await kv_get(kv, key)
    if raw is None:
        return None
    parsed = parse(raw)
    cache.put(key, parsed, now)
    return parsed
