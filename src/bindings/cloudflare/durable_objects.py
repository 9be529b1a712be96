"""`DurableObjectNamespace` over a DO namespace binding (`getByName`). Every call goes to the
object's one generic RPC method, `call(method, payload)` (`worker.entry.AgentRuntime.call`)."""

from __future__ import annotations

from typing import Any

from bindings.cloudflare import ffi


class CloudflareDurableObjectStub:
    def __init__(self, stub: Any, raw: bool, name: str) -> None:
        self._stub = stub
        self._raw = raw
        self.name = name

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """RPC `call(method, payload)`; the object's errors propagate as `JsException`."""
        result = ffi.to_py(await self._stub.call(method, ffi.to_js_arg(payload, self._raw)))
        if not isinstance(result, dict):
            raise TypeError(
                f"Durable Object {self.name!r} answered {method} with "
                f"{type(result).__name__}, not a dict"
            )
        return result


class CloudflareDurableObjectNamespace:
    def __init__(self, binding: Any) -> None:
        self._namespace = binding
        self._raw = ffi.is_raw(binding)

    def get_by_name(self, name: str) -> CloudflareDurableObjectStub:
        if not name:
            raise ValueError("a Durable Object name must be non-empty")
        return CloudflareDurableObjectStub(self._namespace.getByName(name), self._raw, name)
