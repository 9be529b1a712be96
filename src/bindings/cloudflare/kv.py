"""`KVNamespace` over a Workers KV binding (`env.KV`; kv/api/*, the SDK's `test_kv.py`).

KV enforces its own rules, so its answers are kept verbatim: a `TypeError` about a key name
and any `KV <OP> failed: 4xx ...` become `BindingLimitError` (the texts the local adapter
raises), anything else `BindingUnavailableError`. Options travel as one JS object: in raw mode
a Python dict would reach KV as an opaque proxy, silently losing the TTL and metadata.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingError, BindingLimitError, BindingUnavailableError
from bindings.ports.kv import KV_MAX_LIST_LIMIT, KVKey, KVListResult, KVValueWithMetadata

# "KV PUT failed: 400 Invalid expiration_ttl of 30..." -> 400
_KV_STATUS = re.compile(r"KV \w+ failed: (\d{3})")


class CloudflareKVNamespace:
    def __init__(self, binding: Any) -> None:
        self._kv = binding
        self._raw = ffi.is_raw(binding)

    async def get(self, key: str) -> str | None:
        try:
            value = ffi.to_py(await self._kv.get(key))
        except ffi.JsException as exc:
            raise _kv_error("get", key, exc) from exc
        return None if value is None else str(value)

    async def get_with_metadata(self, key: str) -> KVValueWithMetadata:
        try:
            result = ffi.to_py(await self._kv.getWithMetadata(key))
        except ffi.JsException as exc:
            raise _kv_error("getWithMetadata", key, exc) from exc
        result = result or {}
        value = result.get("value")
        return KVValueWithMetadata(
            value=None if value is None else str(value), metadata=result.get("metadata")
        )

    async def put(
        self,
        key: str,
        value: str,
        *,
        expiration_ttl: int | None = None,
        expiration: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(value, str):
            raise TypeError("KV values are text; encode JSON before put()")
        if metadata is not None:
            try:
                json.dumps(metadata, allow_nan=False)
            except (TypeError, ValueError) as exc:
                # KV stores metadata as JSON; JS would drop what it cannot serialise.
                raise TypeError(f"KV metadata must be JSON-serialisable: {exc}") from None
        options = {
            "expirationTtl": expiration_ttl,
            "expiration": expiration,
            "metadata": metadata,
        }
        try:
            if any(option is not None for option in options.values()):
                await self._kv.put(key, value, ffi.to_js_options(self._raw, **options))
            else:
                await self._kv.put(key, value)
        except ffi.JsException as exc:
            raise _kv_error("put", key, exc) from exc

    async def delete(self, key: str) -> None:
        try:
            await self._kv.delete(key)
        except ffi.JsException as exc:
            raise _kv_error("delete", key, exc) from exc

    async def list(
        self, *, prefix: str = "", limit: int = KV_MAX_LIST_LIMIT, cursor: str | None = None
    ) -> KVListResult:
        options = ffi.to_js_options(self._raw, prefix=prefix or None, limit=limit, cursor=cursor)
        try:
            page = ffi.to_py(await self._kv.list(options)) or {}
        except ffi.JsException as exc:
            raise _kv_error("list", prefix, exc) from exc
        complete = bool(page.get("list_complete", True))
        keys = [
            KVKey(
                name=str(item["name"]),
                expiration=_int_or_none(item.get("expiration")),
                metadata=item.get("metadata"),
            )
            for item in page.get("keys") or []
        ]
        next_cursor = page.get("cursor") or None
        return KVListResult(
            keys=keys, list_complete=complete, cursor=None if complete else next_cursor
        )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _kv_error(operation: str, key: str, exc: BaseException) -> BindingError:
    text = ffi.error_message(exc)
    message = f"{text} (KV {operation} {key[:100]!r})"
    if getattr(exc, "name", None) == "TypeError":  # key-name rules, checked by workerd
        return BindingLimitError(message)
    status = _KV_STATUS.search(text)
    # 4xx (429 included: the 1 write/s per key rule) is the caller breaking a KV rule.
    if status is not None and 400 <= int(status.group(1)) < 500:
        return BindingLimitError(message)
    return BindingUnavailableError(message)
