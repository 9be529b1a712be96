"""Workers KV port.

Semantics follow Cloudflare KV (docs: kv/api/*, kv/platform/limits.mdx): keys ≤ 512 bytes,
`expiration_ttl` ≥ 60 s, metadata ≤ 1024 bytes of JSON, `list` ≤ 1000 keys per page with an
opaque cursor, results in lexicographic key order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

KV_MAX_KEY_BYTES = 512
KV_MIN_EXPIRATION_TTL = 60
KV_MAX_METADATA_BYTES = 1024
KV_MAX_LIST_LIMIT = 1000
KV_MAX_VALUE_BYTES = 25 * 1024 * 1024


# Frozen stdlib dataclasses, not pydantic: they must load in bare Pyodide (no pydantic-core
# wheel there; tests/pyodide runs the Cloudflare adapters in it).


@dataclass(frozen=True, slots=True)
class KVKey:
    """One entry of a `list` page."""

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
    """A KV namespace. Values are text (JSON is encoded by the caller)."""

    async def get(self, key: str) -> str | None:
        """Return the value, or None when the key is missing or expired."""
        ...

    async def get_with_metadata(self, key: str) -> KVValueWithMetadata:
        """Return value and metadata; both None when the key is missing."""
        ...

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
        ...

    async def delete(self, key: str) -> None:
        """Delete a key; deleting a missing key is not an error."""
        ...

    async def list(
        self, *, prefix: str = "", limit: int = KV_MAX_LIST_LIMIT, cursor: str | None = None
    ) -> KVListResult:
        """List keys in key order, starting after `cursor`."""
        ...
