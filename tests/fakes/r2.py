"""A fake R2 bucket binding on the fake Pyodide runtime (`tests.fakes.js_runtime`).

Modelled on r2/api/workers/workers-api-reference.mdx and r2/platform/limits.mdx:

* `put(key, value, options?)` takes a string, `ArrayBuffer` or `Uint8Array` (a PyProxy —
  Python bytes sent without `to_js` — is refused like a non-body value), reads
  `options.customMetadata` as a plain object of strings (a PyProxy or Map of options has
  no readable properties, so its metadata is silently lost, as on workerd), and returns an
  `R2Object` (a class instance, not a plain object);
* `get(key)` returns an `R2ObjectBody` (with `arrayBuffer()` and `text()`) or null;
* `list(options?)` returns the plain object `{objects, truncated, cursor?,
  delimitedPrefixes}` with `R2Object` instances, keys in lexicographic order, `limit`
  1..1000 (default 1000), and `customMetadata` filled in only when `include` asks for it;
* `delete(key | keys)` removes up to 1000 keys; missing keys are ignored;
* keys are 1..1024 bytes, custom metadata at most 8192 bytes.

Error texts are modelled on, not copied from, the real service.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from bindings.ports.clock import FixedClock
from tests.fakes.js_runtime import (
    NULL,
    UNDEFINED,
    JSArray,
    JSArrayBuffer,
    JSError,
    JSHost,
    JSPlainObject,
    JSUint8Array,
    js_async,
    js_method,
    js_property,
    prop,
)


@dataclass
class StoredObject:
    data: bytes
    custom_metadata: dict[str, str] = field(default_factory=dict)
    uploaded_ms: int = 0
    version: int = 0


class FakeDate(JSHost):
    js_class = "Date"

    def __init__(self, ms: int) -> None:
        self.ms = ms

    @js_method
    def getTime(self) -> Any:
        return self.ms


class FakeR2Object(JSHost):
    js_class = "R2Object"

    def __init__(self, key: str, stored: StoredObject, *, with_metadata: bool = True) -> None:
        self.key_value = key
        self.stored = stored
        self.with_metadata = with_metadata

    @js_property
    def key(self) -> Any:
        return self.key_value

    @js_property
    def size(self) -> Any:
        return len(self.stored.data)

    @js_property
    def etag(self) -> Any:
        return hashlib.md5(self.stored.data, usedforsecurity=False).hexdigest()

    @js_property
    def httpEtag(self) -> Any:
        return f'"{hashlib.md5(self.stored.data, usedforsecurity=False).hexdigest()}"'

    @js_property
    def version(self) -> Any:
        return f"v{self.stored.version}"

    @js_property
    def uploaded(self) -> Any:
        return FakeDate(self.stored.uploaded_ms)

    @js_property
    def customMetadata(self) -> Any:
        return JSPlainObject(dict(self.stored.custom_metadata) if self.with_metadata else {})


class FakeR2ObjectBody(FakeR2Object):
    js_class = "GetResult"

    def __init__(self, key: str, stored: StoredObject) -> None:
        super().__init__(key, stored)
        self.used = False

    def _consume(self) -> bytes:
        if self.used:
            raise JSError("TypeError", "Body has already been used.")
        self.used = True
        return self.stored.data

    @js_property
    def bodyUsed(self) -> Any:
        return self.used

    @js_async
    def arrayBuffer(self) -> Any:
        return JSArrayBuffer(self._consume())

    @js_async
    def text(self) -> Any:
        return self._consume().decode()


class FakeR2Bucket(JSHost):
    js_class = "R2Bucket"

    def __init__(self, clock: FixedClock | None = None) -> None:
        self.clock = clock or FixedClock()
        self.objects: dict[str, StoredObject] = {}
        self.calls: list[str] = []
        self.failures: list[JSError] = []

    def fail_next(self, message: str = "R2 internal error") -> None:
        self.failures.append(JSError("Error", message))

    def _begin(self, op: str) -> None:
        self.calls.append(op)
        if self.failures:
            raise self.failures.pop(0)

    @staticmethod
    def _key(key: Any, op: str) -> str:
        if not isinstance(key, str):
            raise JSError("TypeError", f"{op}: key must be a string, got {key!r}")
        if not key or len(key.encode()) > 1024:
            raise JSError("Error", f"{op}: The specified object name is not valid. (10020)")
        return key

    @js_async
    def put(self, key: Any = UNDEFINED, value: Any = UNDEFINED, options: Any = UNDEFINED) -> Any:
        self._begin("put")
        name = self._key(key, "put")
        if isinstance(value, str):
            data = value.encode()
        elif isinstance(value, JSUint8Array | JSArrayBuffer):
            data = value.data
        elif value is NULL:
            data = b""
        else:
            raise JSError(
                "TypeError",
                "put: Provided readable stream must have a known length (request/response "
                "body or readable half of FixedLengthStream)",
            )
        metadata: dict[str, str] = {}
        raw = prop(options, "customMetadata")
        if raw not in (UNDEFINED, NULL):
            if type(raw) is not JSPlainObject:
                raise JSError("TypeError", "put: customMetadata must be an object of strings")
            for name_, item in raw.props.items():
                if not isinstance(item, str):
                    raise JSError("TypeError", "put: customMetadata values must be strings")
                metadata[name_] = item
        if sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items()) > 8192:
            raise JSError("Error", "put: Your metadata headers exceed the maximum allowed (10012)")
        previous = self.objects.get(name)
        stored = StoredObject(
            data=data,
            custom_metadata=metadata,
            uploaded_ms=int(self.clock.now() * 1000),
            version=(previous.version + 1) if previous else 1,
        )
        self.objects[name] = stored
        return FakeR2Object(name, stored)

    @js_async
    def get(self, key: Any = UNDEFINED, options: Any = UNDEFINED) -> Any:
        self._begin("get")
        name = self._key(key, "get")
        stored = self.objects.get(name)
        return NULL if stored is None else FakeR2ObjectBody(name, stored)

    @js_async
    def head(self, key: Any = UNDEFINED) -> Any:
        self._begin("head")
        name = self._key(key, "head")
        stored = self.objects.get(name)
        return NULL if stored is None else FakeR2Object(name, stored)

    @js_async
    def list(self, options: Any = UNDEFINED) -> Any:
        self._begin("list")
        prefix = prop(options, "prefix")
        prefix = "" if prefix in (UNDEFINED, NULL) else prefix
        limit = prop(options, "limit")
        limit = 1000 if limit in (UNDEFINED, NULL) else limit
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise JSError("Error", f"list: MaxKeys params must be positive and <= 1000 ({limit})")
        include = prop(options, "include")
        with_metadata = isinstance(include, JSArray) and "customMetadata" in include.items
        cursor = prop(options, "cursor")
        after = None
        if isinstance(cursor, str) and cursor:
            after = base64.b64decode(cursor).decode()
        keys = sorted((k for k in self.objects if k.startswith(prefix)), key=str.encode)
        if after is not None:
            keys = [k for k in keys if k.encode() > after.encode()]
        page = keys[:limit]
        truncated = len(keys) > limit
        result: dict[str, Any] = {
            "objects": JSArray(
                FakeR2Object(k, self.objects[k], with_metadata=with_metadata) for k in page
            ),
            "truncated": truncated,
            "delimitedPrefixes": JSArray([]),
        }
        if truncated:
            result["cursor"] = base64.b64encode(page[-1].encode()).decode()
        return JSPlainObject(result)

    @js_async
    def delete(self, keys: Any = UNDEFINED) -> Any:
        self._begin("delete")
        if isinstance(keys, str):
            names = [keys]
        elif isinstance(keys, JSArray):
            names = list(keys.items)
        else:
            raise JSError("TypeError", f"delete: keys must be a string or an array, got {keys!r}")
        if len(names) > 1000:
            raise JSError("Error", "delete: at most 1000 keys per call (10029)")
        for name in names:
            self.objects.pop(self._key(name, "delete"), None)
        return UNDEFINED
