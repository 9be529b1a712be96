"""Object storage port: the cold tier (an R2 bucket binding; docs r2/api/workers/
workers-api-reference.mdx and r2/platform/limits.mdx).

The minimum surface the lifecycle uses:

* `put(key, data, custom_metadata=)` stores bytes under `key`, replacing any object there,
  and returns what was stored. R2 writes are strongly consistent: once `put` returns,
  every read sees the new object.
* `get(key)` returns the object with its bytes, or None when there is none.
* `list(prefix=, cursor=, limit=)` pages through keys in lexicographic order, at most
  1000 per page; `truncated` says whether another page follows (do not compare the page
  length with `limit`: R2 may return fewer).
* `delete(keys)` removes one key or a list of keys; deleting a missing key is not an error.

Limits (checked by every adapter with `check_key` / `check_custom_metadata`, so a bad call
fails the same way everywhere): keys are 1..1024 bytes of UTF-8; custom metadata (string
keys and values) at most 8192 bytes in total; at most `OBJECT_STORE_MAX_DELETE_KEYS` keys
per `delete` call (the S3 DeleteObjects cap; adapters split longer lists).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bindings.ports.errors import BindingLimitError

OBJECT_STORE_MAX_KEY_BYTES = 1024
OBJECT_STORE_MAX_METADATA_BYTES = 8192
OBJECT_STORE_MAX_LIST_LIMIT = 1000
OBJECT_STORE_MAX_DELETE_KEYS = 1000


# Frozen stdlib dataclasses, not pydantic: they must load in bare Pyodide (tests/pyodide).


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """An object's metadata (R2's `R2Object`). `uploaded_ms` is epoch milliseconds."""

    key: str
    size: int
    etag: str = ""
    uploaded_ms: int | None = None
    custom_metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectBody(ObjectInfo):
    """An object with its bytes (R2's `R2ObjectBody`, read whole). `data` is keyword-only
    (a field without a default cannot follow the inherited defaults otherwise)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class ObjectList:
    """One page of `list`. When `truncated`, pass `cursor` to get the next page."""

    objects: list[ObjectInfo]
    truncated: bool
    cursor: str | None = None


def check_key(key: str) -> str:
    """Return `key` if R2 accepts it, else raise `BindingLimitError`."""
    if not isinstance(key, str) or not key:
        raise BindingLimitError("object keys must be non-empty strings")
    size = len(key.encode("utf-8"))
    if size > OBJECT_STORE_MAX_KEY_BYTES:
        raise BindingLimitError(
            f"object key is {size} bytes; R2 allows at most {OBJECT_STORE_MAX_KEY_BYTES}"
        )
    return key


def check_custom_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Return the metadata as a plain dict if R2 accepts it, else raise `BindingLimitError`."""
    if not metadata:
        return {}
    out: dict[str, str] = {}
    size = 0
    for name, value in metadata.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise BindingLimitError("custom metadata keys and values must be strings")
        size += len(name.encode("utf-8")) + len(value.encode("utf-8"))
        out[name] = value
    if size > OBJECT_STORE_MAX_METADATA_BYTES:
        raise BindingLimitError(
            f"custom metadata is {size} bytes; R2 allows at most {OBJECT_STORE_MAX_METADATA_BYTES}"
        )
    return out


class ObjectStore(Protocol):
    """A bucket of objects addressed by key."""

    async def put(
        self, key: str, data: bytes, *, custom_metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        """Store `data` under `key` (replacing what was there); returns the stored object."""
        ...

    async def get(self, key: str) -> ObjectBody | None:
        """The object under `key` with its bytes, or None when there is none."""
        ...

    async def list(
        self,
        *,
        prefix: str = "",
        cursor: str | None = None,
        limit: int = OBJECT_STORE_MAX_LIST_LIMIT,
    ) -> ObjectList:
        """Up to `limit` (≤ 1000) objects whose key starts with `prefix`, in key order,
        starting after `cursor`."""
        ...

    async def delete(self, keys: str | Sequence[str]) -> None:
        """Delete one key or many; missing keys are ignored."""
        ...
