"""Object storage port: the cold tier, an R2 bucket (r2/api/workers/workers-api-reference,
r2/platform/limits). `put` replaces; `list` pages in key order (`truncated`: another page
follows); deleting a missing key is no error. Every adapter checks limits with `check_key` /
`check_custom_metadata`; deletes go in chunks of `OBJECT_STORE_MAX_DELETE_KEYS`.
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


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """R2's `R2Object`; `uploaded_ms` is epoch milliseconds."""

    key: str
    size: int
    etag: str = ""
    uploaded_ms: int | None = None
    custom_metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectBody(ObjectInfo):
    data: bytes


@dataclass(frozen=True, slots=True)
class ObjectList:
    objects: list[ObjectInfo]
    truncated: bool
    cursor: str | None = None


def check_key(key: str) -> str:
    """Return `key` if R2 accepts it (1..1024 bytes of UTF-8), else raise `BindingLimitError`."""
    if not isinstance(key, str) or not key:
        raise BindingLimitError("object keys must be non-empty strings")
    size = len(key.encode("utf-8"))
    if size > OBJECT_STORE_MAX_KEY_BYTES:
        raise BindingLimitError(
            f"object key is {size} bytes; R2 allows at most {OBJECT_STORE_MAX_KEY_BYTES}"
        )
    return key


def check_custom_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """The metadata as a dict if R2 accepts it (strings, ≤ 8192 bytes), else `BindingLimitError`."""
    out = dict(metadata or {})
    if not all(isinstance(name, str) and isinstance(value, str) for name, value in out.items()):
        raise BindingLimitError("custom metadata keys and values must be strings")
    size = sum(len(name.encode()) + len(value.encode()) for name, value in out.items())
    if size > OBJECT_STORE_MAX_METADATA_BYTES:
        raise BindingLimitError(
            f"custom metadata is {size} bytes; R2 allows at most {OBJECT_STORE_MAX_METADATA_BYTES}"
        )
    return out


class ObjectStore(Protocol):
    async def put(
        self, key: str, data: bytes, *, custom_metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo: ...

    async def get(self, key: str) -> ObjectBody | None: ...

    async def list(
        self,
        *,
        prefix: str = "",
        cursor: str | None = None,
        limit: int = OBJECT_STORE_MAX_LIST_LIMIT,
    ) -> ObjectList: ...

    async def delete(self, keys: str | Sequence[str]) -> None: ...
