"""`D1Database` over a D1 binding (`env.DB`; d1/worker-api/*). D1 enforces its own rules, so
every JS error becomes `D1Error` (`D1LimitError` when SQLite reports a limit). Raw mode sends
None as JS `null` (D1 rejects `undefined`) and bytes as a Uint8Array; an int beyond ±2^53 is a
BigInt, which D1 refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bindings.cloudflare import ffi
from bindings.ports.d1 import D1Error, D1Meta, D1Result
from bindings.ports.errors import BindingLimitError
from bindings.ports.sql import Row, SqlValue


class D1LimitError(D1Error, BindingLimitError):
    """D1 refused a statement for breaking a documented limit."""


def _d1_error(exc: BaseException, context: str = "") -> D1Error:
    return ffi.sql_error(exc, D1Error, D1LimitError, context)


class CloudflareD1Statement:
    def __init__(self, handle: Any, raw: bool) -> None:
        self.handle = handle
        self._raw = raw

    def bind(self, *params: SqlValue | bool) -> CloudflareD1Statement:
        values = [ffi.to_js_arg(value, self._raw) for value in params]
        try:
            return CloudflareD1Statement(self.handle.bind(*values), self._raw)
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc

    async def all(self) -> D1Result:
        return _result(await self._await(lambda: self.handle.all()))

    async def run(self) -> D1Result:
        return _result(await self._await(lambda: self.handle.run()))

    async def first(self) -> Row | None:
        row = await self._await(lambda: self.handle.first())
        return None if row is None else dict(row)

    async def first_value(self, column: str) -> Any:
        return await self._await(lambda: self.handle.first(column))

    async def _await(self, start: Callable[[], Any]) -> Any:
        # The call itself is inside the try: a JS error may be thrown or rejected.
        try:
            return ffi.to_py(await start())
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc


class CloudflareD1Database:
    def __init__(self, binding: Any) -> None:
        self._db = binding
        self._raw = ffi.is_raw(binding)

    def prepare(self, sql: str) -> CloudflareD1Statement:
        try:
            return CloudflareD1Statement(self._db.prepare(sql), self._raw)
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc

    async def batch(self, statements: Sequence[Any]) -> list[D1Result]:
        handles = [statement.handle for statement in statements]
        try:
            results = ffi.to_py(await self._db.batch(ffi.to_js_arg(handles, self._raw)))
        except ffi.JsException as exc:
            raise _d1_error(exc, " (batch rolled back: nothing was applied)") from exc
        return [_result(item) for item in results or []]


def _result(raw: Any) -> D1Result:
    """A `D1Result` from `.all()`/`.run()`/`batch` output (a null counter means 0)."""
    data = raw or {}
    meta = data.get("meta") or {}
    counters = D1Meta(int(meta.get("changes") or 0), int(meta.get("size_after") or 0))
    return D1Result(counters, [dict(row) for row in data.get("results") or []])
