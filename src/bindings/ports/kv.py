"""Workers KV port, with Cloudflare's limits (kv/platform/limits.mdx). Values are text; value
types are stdlib dataclasses (they load in bare Pyodide).
"""

from __future__ import annotations

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
    keys: list[KVKey]
    list_complete: bool
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class KVValueWithMetadata:
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
