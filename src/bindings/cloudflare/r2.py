"""`ObjectStore` over an R2 bucket binding (`env.COLD`; r2/api/workers/workers-api-reference).
Bytes go as a Uint8Array and come back from `arrayBuffer()`; `list` asks for
`include: ["customMetadata"]` (R2 leaves it empty otherwise). `R2Object` stays a proxy or SDK
wrapper: fields are read as attributes, `uploaded` is a Date proxy (raw) or a `datetime`.
Limits are checked before the call; JS errors become `BindingUnavailableError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingLimitError, BindingUnavailableError
from bindings.ports.object_store import (
    OBJECT_STORE_MAX_DELETE_KEYS,
    OBJECT_STORE_MAX_LIST_LIMIT,
    ObjectBody,
    ObjectInfo,
    ObjectList,
    check_custom_metadata,
    check_key,
)


class CloudflareObjectStore:
    def __init__(self, binding: Any) -> None:
        self._bucket = binding
        self._raw = ffi.is_raw(binding)

    async def put(
        self, key: str, data: bytes, *, custom_metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        check_key(key)
        metadata = check_custom_metadata(custom_metadata)
        value = ffi.to_js_arg(bytes(data), self._raw)
        options = [ffi.to_js_options(self._raw, customMetadata=metadata)] if metadata else []
        try:
            result = await self._bucket.put(key, value, *options)
        except ffi.JsException as exc:
            raise _r2_error("put", key, exc) from exc
        return _info(result, key)

    async def get(self, key: str) -> ObjectBody | None:
        check_key(key)
        try:
            result = await self._bucket.get(key)
            if result is None or result is ffi.jsnull:
                return None
            data = _to_bytes(await result.arrayBuffer())
        except ffi.JsException as exc:
            raise _r2_error("get", key, exc) from exc
        return ObjectBody(**dataclasses.asdict(_info(result, key)), data=data)

    async def list(
        self,
        *,
        prefix: str = "",
        cursor: str | None = None,
        limit: int = OBJECT_STORE_MAX_LIST_LIMIT,
    ) -> ObjectList:
        if not 1 <= limit <= OBJECT_STORE_MAX_LIST_LIMIT:
            raise BindingLimitError(
                f"list limit must be between 1 and {OBJECT_STORE_MAX_LIST_LIMIT}, got {limit}"
            )
        options = ffi.to_js_options(
            self._raw,
            prefix=prefix or None,
            cursor=cursor or None,
            limit=limit,
            include=["customMetadata"],
        )
        try:
            result = await self._bucket.list(options)
        except ffi.JsException as exc:
            raise _r2_error("list", prefix, exc) from exc
        objects = [_info(item, None) for item in ffi.field(result, "objects") or []]
        truncated = bool(ffi.field(result, "truncated"))
        next_cursor = ffi.field(result, "cursor") if truncated else None
        return ObjectList(objects, truncated, str(next_cursor) if next_cursor else None)

    async def delete(self, keys: str | Sequence[str]) -> None:
        names = [keys] if isinstance(keys, str) else list(keys)
        for name in names:
            check_key(name)
        for start in range(0, len(names), OBJECT_STORE_MAX_DELETE_KEYS):
            chunk = names[start : start + OBJECT_STORE_MAX_DELETE_KEYS]
            argument: Any = chunk[0] if len(chunk) == 1 else ffi.to_js_arg(chunk, self._raw)
            try:
                await self._bucket.delete(argument)
            except ffi.JsException as exc:
                raise _r2_error("delete", chunk[0], exc) from exc


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return bytes(value.to_bytes())  # a raw ArrayBuffer proxy


def _info(obj: Any, key: str | None) -> ObjectInfo:
    metadata = ffi.to_py(ffi.field(obj, "customMetadata")) or {}
    found_key = ffi.field(obj, "key")
    return ObjectInfo(
        key=str(found_key) if found_key is not None else (key or ""),
        size=int(ffi.field(obj, "size") or 0),
        etag=str(ffi.field(obj, "etag") or ""),
        uploaded_ms=ffi.epoch_ms(ffi.field(obj, "uploaded")),
        custom_metadata={str(k): str(v) for k, v in dict(metadata).items()},
    )


def _r2_error(operation: str, key: str, exc: BaseException) -> BindingUnavailableError:
    return BindingUnavailableError(f"{ffi.error_message(exc)} (R2 {operation} {key[:100]!r})")
