"""`bindings.ports.object_store.ObjectStore` over an R2 bucket binding (`env.COLD`).

Docs: r2/api/workers/workers-api-reference.mdx (methods, `R2Object`, `R2ObjectBody`,
`R2ListOptions`, `R2Objects`), r2/platform/limits.mdx (keys ≤ 1024 bytes, metadata ≤ 8192
bytes). The calls:

* `put(key, value, {customMetadata})` with the bytes as a `Uint8Array` (raw mode converts
  them with `to_js`; a bare `bytes` argument would reach JS as an opaque PyProxy) → an
  `R2Object`;
* `get(key)` → an `R2ObjectBody` or null; the bytes come from `arrayBuffer()` (a memoryview
  in wrapped mode, a JsProxy ArrayBuffer in raw mode);
* `list({prefix, cursor, limit, include: ["customMetadata"]})` → `{objects, truncated,
  cursor}` (the include is needed from compat date 2022-08-04 for `customMetadata` to be
  filled in);
* `delete(key | keys)`, in chunks of `OBJECT_STORE_MAX_DELETE_KEYS`.

`R2Object` is a class instance, not a plain object: conversions leave it a JsProxy (raw) or
an SDK wrapper (wrapped), so its fields are read as attributes, and `uploaded` (a JS Date)
arrives as a Date proxy (raw) or a `datetime` (wrapped). JS errors become
`BindingUnavailableError` (the call may be retried); limit violations are caught before the
call as `BindingLimitError`, like the local adapter.
"""

from __future__ import annotations

import datetime
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
    """Implements `ObjectStore` over an R2 bucket binding (wrapped or raw)."""

    def __init__(self, binding: Any) -> None:
        self._bucket = binding
        self._raw = ffi.is_raw(binding)

    async def put(
        self, key: str, data: bytes, *, custom_metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        check_key(key)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError("object data must be bytes")
        metadata = check_custom_metadata(custom_metadata)
        value = ffi.to_js_arg(bytes(data), self._raw)
        try:
            if metadata:
                options = ffi.to_js_options(self._raw, customMetadata=metadata)
                result = await self._bucket.put(key, value, options)
            else:
                result = await self._bucket.put(key, value)
        except ffi.JsException as exc:
            raise _r2_error("put", key, exc) from exc
        if _is_null(result):
            # Only a failed `onlyIf` precondition answers null, and we never send one.
            raise BindingUnavailableError(f"R2 put {key[:100]!r} stored nothing")
        return _info(result, key)

    async def get(self, key: str) -> ObjectBody | None:
        check_key(key)
        try:
            result = await self._bucket.get(key)
            if _is_null(result):
                return None
            data = _to_bytes(await result.arrayBuffer())
        except ffi.JsException as exc:
            raise _r2_error("get", key, exc) from exc
        info = _info(result, key)
        return ObjectBody(
            key=info.key,
            size=info.size,
            etag=info.etag,
            uploaded_ms=info.uploaded_ms,
            custom_metadata=info.custom_metadata,
            data=data,
        )

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
        objects = [_info(item, None) for item in _field(result, "objects") or []]
        truncated = bool(_field(result, "truncated"))
        next_cursor = _field(result, "cursor") if truncated else None
        return ObjectList(
            objects=objects,
            truncated=truncated,
            cursor=str(next_cursor) if next_cursor else None,
        )

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


def _is_null(value: Any) -> bool:
    return value is None or value is ffi.jsnull


def _field(obj: Any, name: str) -> Any:
    """`obj.name` for a JS object in either mode (a converted dict or an attribute holder)."""
    if obj is None or obj is ffi.jsnull:
        return None
    if isinstance(obj, Mapping):
        value = obj.get(name)
    else:
        try:
            value = getattr(obj, name)
        except AttributeError:
            return None
    return None if value is ffi.jsnull else value


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    to_bytes = getattr(value, "to_bytes", None)  # a raw ArrayBuffer proxy
    if callable(to_bytes):
        return bytes(to_bytes())
    converted = ffi.to_py(value)
    if isinstance(converted, bytes | bytearray | memoryview):
        return bytes(converted)
    raise BindingUnavailableError(f"R2 returned a body of unexpected type {type(value)!r}")


def _millis(value: Any) -> int | None:
    if value is None or value is ffi.jsnull:
        return None
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    get_time = getattr(value, "getTime", None)  # a raw JS Date
    if callable(get_time):
        return int(get_time())
    return None


def _info(obj: Any, key: str | None) -> ObjectInfo:
    metadata = ffi.to_py(_field(obj, "customMetadata")) or {}
    found_key = _field(obj, "key")
    return ObjectInfo(
        key=str(found_key) if found_key is not None else (key or ""),
        size=int(_field(obj, "size") or 0),
        etag=str(_field(obj, "etag") or ""),
        uploaded_ms=_millis(_field(obj, "uploaded")),
        custom_metadata={str(k): str(v) for k, v in dict(metadata).items()},
    )


def _r2_error(operation: str, key: str, exc: BaseException) -> BindingUnavailableError:
    return BindingUnavailableError(f"{ffi.error_message(exc)} (R2 {operation} {key[:100]!r})")
