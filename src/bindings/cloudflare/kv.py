"""`KVNamespace` over a Workers KV binding (`env.KV`; kv/api/*). KV's own answers are kept
verbatim: a `TypeError` about a key name and `KV <OP> failed: 4xx` become `BindingLimitError`,
anything else `BindingUnavailableError`. Options travel as one JS object (a raw dict would
reach KV as an opaque proxy, losing the TTL and metadata).
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

    async def _call(self, operation: str, label: str, *args: Any) -> Any:
        try:
            return ffi.to_py(await getattr(self._kv, operation)(*args))
        except ffi.JsException as exc:
            raise _kv_error(operation, label, exc) from exc

    async def get(self, key: str) -> str | None:
        value = await self._call("get", key, key)
        return None if value is None else str(value)

    async def get_with_metadata(self, key: str) -> KVValueWithMetadata:
        result = await self._call("getWithMetadata", key, key) or {}
        value = result.get("value")
        return KVValueWithMetadata(None if value is None else str(value), result.get("metadata"))

    async def put(
        self,
        key: str,
        value: str,
        *,
        expiration_ttl: int | None = None,
        expiration: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if metadata is not None:
            try:
                json.dumps(metadata, allow_nan=False)
            except (TypeError, ValueError) as exc:
                # KV stores metadata as JSON; JS would drop what it cannot serialise.
                raise TypeError(f"KV metadata must be JSON-serialisable: {exc}") from None
        options = {"expirationTtl": expiration_ttl, "expiration": expiration, "metadata": metadata}
        given = any(option is not None for option in options.values())
        extra = [ffi.to_js_options(self._raw, **options)] if given else []
        await self._call("put", key, key, value, *extra)

    async def delete(self, key: str) -> None:
        await self._call("delete", key, key)

    async def list(
        self, *, prefix: str = "", limit: int = KV_MAX_LIST_LIMIT, cursor: str | None = None
    ) -> KVListResult:
        options = ffi.to_js_options(self._raw, prefix=prefix or None, limit=limit, cursor=cursor)
        page = await self._call("list", prefix, options) or {}
        complete = bool(page.get("list_complete", True))
        keys = [
            KVKey(
                name=str(item["name"]),
                expiration=None if item.get("expiration") is None else int(item["expiration"]),
                metadata=item.get("metadata"),
            )
            for item in page.get("keys") or []
        ]
        return KVListResult(keys, complete, None if complete else page.get("cursor") or None)


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
