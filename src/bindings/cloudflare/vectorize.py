"""`VectorIndex` over a Vectorize (v2) binding (`env.VECTORIZE`; vectorize/reference/*).
Mutations become visible seconds later; vectors go as float lists.
The documented limits are checked here; a JS error is a `BindingLimitError` when Vectorize
blames the input (a 4xxxx code), else `BindingUnavailableError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingError, BindingLimitError, BindingUnavailableError
from bindings.ports.vectorize import (
    VECTORIZE_MAX_BATCH,
    VECTORIZE_MAX_FILTER_BYTES,
    VECTORIZE_MAX_ID_BYTES,
    VECTORIZE_MAX_NAMESPACE_BYTES,
    VECTORIZE_MAX_TOP_K,
    VECTORIZE_MAX_TOP_K_WITH_DATA,
    MetadataFilter,
    ReturnMetadata,
    VectorIndexInfo,
    VectorMatch,
    VectorQueryResult,
    VectorRecord,
)

# "VECTOR_QUERY_ERROR (code = 40006): ..." -> 40006
_ERROR_CODE = re.compile(r"\(code = (\d+)\)")


class CloudflareVectorIndex:
    def __init__(self, binding: Any) -> None:
        self._index = binding
        self._raw = ffi.is_raw(binding)

    async def upsert(self, vectors: Sequence[VectorRecord]) -> None:
        if not vectors:
            return
        if len(vectors) > VECTORIZE_MAX_BATCH:
            raise BindingLimitError(
                f"Vectorize accepts {VECTORIZE_MAX_BATCH} vectors per write, got {len(vectors)}"
            )
        await self._call("upsert", [_vector_payload(record) for record in vectors])

    async def query(
        self,
        vector: Sequence[float],
        *,
        top_k: int = 5,
        namespace: str | None = None,
        filter: MetadataFilter | None = None,
        return_metadata: ReturnMetadata = "none",
    ) -> VectorQueryResult:
        limit = VECTORIZE_MAX_TOP_K_WITH_DATA if return_metadata == "all" else VECTORIZE_MAX_TOP_K
        if not 1 <= top_k <= limit:
            raise BindingLimitError(
                f"Vectorize topK must be 1..{limit} with these return options, got {top_k}"
            )
        _check_namespace(namespace)
        if filter:
            size = len(json.dumps(filter, separators=(",", ":")).encode())
            if size >= VECTORIZE_MAX_FILTER_BYTES:
                raise BindingLimitError(
                    f"Vectorize filter is {size} bytes of JSON; it must be under "
                    f"{VECTORIZE_MAX_FILTER_BYTES}"
                )
        options = ffi.to_js_options(
            self._raw,
            topK=top_k,
            namespace=namespace,
            filter=filter or None,
            returnMetadata=return_metadata,
        )
        result = await self._call("query", [float(v) for v in vector], options)
        matches = [
            VectorMatch(
                id=str(item["id"]),
                score=float(item.get("score", 0.0)),
                namespace=item.get("namespace"),
                metadata=item.get("metadata"),
            )
            for item in result.get("matches") or []
        ]
        return VectorQueryResult(count=int(result.get("count", len(matches))), matches=matches)

    async def get_by_ids(self, ids: Sequence[str]) -> list[VectorRecord]:
        if not ids:
            return []
        for vector_id in ids:
            _check_id(vector_id)
        found = await self._call("getByIds", list(ids))
        return [
            VectorRecord(
                id=str(item["id"]),
                # A list or a typed array (memoryview); both iterate as numbers.
                values=[float(v) for v in item.get("values") or []],
                namespace=item.get("namespace"),
                metadata=item.get("metadata") or {},
            )
            for item in found or []
        ]

    async def describe(self) -> VectorIndexInfo:
        try:  # VectorizeIndexInfo: {vectorCount, dimensions, processedUpTo...} (workers-types)
            info = ffi.to_py(await self._index.describe()) or {}
        except ffi.JsException as exc:
            message = f"Vectorize describe failed: {ffi.error_message(exc)}"
            raise BindingUnavailableError(message) from exc
        return VectorIndexInfo(
            dimensions=int(info.get("dimensions") or 0),
            vector_count=int(info.get("vectorCount") or 0),
        )

    async def delete_by_ids(self, ids: Sequence[str]) -> None:
        if ids:
            await self._call("deleteByIds", list(ids))

    async def _call(self, operation: str, argument: Any, *options: Any) -> Any:
        method = getattr(self._index, operation)
        try:
            return ffi.to_py(await method(ffi.to_js_arg(argument, self._raw), *options)) or {}
        except ffi.JsException as exc:
            message = f"Vectorize {operation} failed: {ffi.error_message(exc)}"
            code = _ERROR_CODE.search(message)
            kind: type[BindingError] = (
                BindingLimitError
                if code is not None and code.group(1).startswith("4")
                else BindingUnavailableError
            )
            raise kind(message) from exc


def _check_id(vector_id: str) -> None:
    if not vector_id or len(vector_id.encode()) > VECTORIZE_MAX_ID_BYTES:
        raise BindingLimitError(
            f"Vectorize ids are 1..{VECTORIZE_MAX_ID_BYTES} bytes, got {vector_id!r}"
        )


def _check_namespace(namespace: str | None) -> None:
    if namespace is not None and len(namespace.encode()) > VECTORIZE_MAX_NAMESPACE_BYTES:
        raise BindingLimitError(
            f"Vectorize namespaces are at most {VECTORIZE_MAX_NAMESPACE_BYTES} bytes"
        )


def _vector_payload(record: VectorRecord) -> dict[str, Any]:
    _check_id(record.id)
    _check_namespace(record.namespace)
    payload: dict[str, Any] = {"id": record.id, "values": [float(v) for v in record.values]}
    if record.namespace is not None:
        payload["namespace"] = record.namespace
    if record.metadata:
        payload["metadata"] = record.metadata
    return payload
