"""`bindings.ports.d1.D1Database` over a D1 binding (`env.DB`).

Docs: d1/worker-api/{d1-database,prepared-statements,return-object}.mdx, d1/platform/
limits.mdx; Python behaviour from the SDK bindings test `test_d1.py`. `prepare`/`bind` are
synchronous and return new statement objects; `all`/`run`/`first`/`batch`/`exec` are
async. D1 itself enforces its rules (types at bind time, 100 bound parameters, 100 KB of
SQL, one query per line in `exec`, a non-empty `batch`), so this adapter adds none: it only
converts values and turns every JS error (`D1_ERROR: ...`, `D1_TYPE_ERROR: ...`) into
`D1Error`, and into `D1LimitError` (also a `BindingLimitError`) when SQLite reports a limit.

Binding values: in raw mode None must reach D1 as JS `null` (`undefined` is rejected with
D1_TYPE_ERROR) and bytes as a Uint8Array, which `ffi.to_js_arg` does; the SDK wrapper does
the same in wrapped mode. Booleans go as JS booleans (D1 stores 1/0); a Python int beyond
+-2^53 becomes a BigInt, which D1 refuses with D1_TYPE_ERROR (store big ids as TEXT).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from bindings.cloudflare import ffi
from bindings.ports.d1 import D1Error, D1ExecResult, D1Meta, D1Result
from bindings.ports.errors import BindingLimitError
from bindings.ports.sql import Row, SqlValue

# SQLite's own texts for limit errors, as workerd reports them.
_LIMIT_ERRORS = re.compile(
    r"too many SQL variables|SQLITE_TOOBIG|string or blob too big|too many columns"
    r"|LIKE or GLOB pattern too complex|too many terms in compound SELECT"
    r"|Expression tree is too large|too many arguments on function"
)


class D1LimitError(D1Error, BindingLimitError):
    """D1 refused a statement for breaking a documented limit."""


def _d1_error(exc: BaseException, context: str = "") -> D1Error:
    message = ffi.error_message(exc)
    kind = D1LimitError if _LIMIT_ERRORS.search(message) else D1Error
    return kind(f"{message}{context}")


class CloudflareD1Statement:
    """Implements `D1Statement`; holds the JS `D1PreparedStatement`."""

    def __init__(self, handle: Any, raw: bool, sql: str) -> None:
        self._handle = handle
        self._raw = raw
        self.sql = sql

    @property
    def handle(self) -> Any:
        """The binding's statement object (for `batch`)."""
        return self._handle

    def bind(self, *params: SqlValue | bool) -> CloudflareD1Statement:
        values = [ffi.to_js_arg(value, self._raw) for value in params]
        try:
            handle = self._handle.bind(*values)
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc
        return CloudflareD1Statement(handle, self._raw, self.sql)

    async def all(self) -> D1Result:
        return _result(await self._await(lambda: self._handle.all()))

    async def run(self) -> D1Result:
        return _result(await self._await(lambda: self._handle.run()))

    async def first(self) -> Row | None:
        row = await self._await(lambda: self._handle.first())
        return None if row is None else dict(row)

    async def first_value(self, column: str) -> Any:
        return await self._await(lambda: self._handle.first(column))

    async def _await(self, start: Callable[[], Any]) -> Any:
        # The call itself is inside the try: a JS error may be thrown or rejected.
        try:
            return ffi.to_py(await start())
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc


class CloudflareD1Database:
    """Implements `D1Database` over `env.DB` (wrapped or raw)."""

    def __init__(self, binding: Any) -> None:
        self._db = binding
        self._raw = ffi.is_raw(binding)

    def prepare(self, sql: str) -> CloudflareD1Statement:
        try:
            handle = self._db.prepare(sql)
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc
        return CloudflareD1Statement(handle, self._raw, sql)

    async def batch(self, statements: Sequence[Any]) -> list[D1Result]:
        handles = []
        for statement in statements:
            if not isinstance(statement, CloudflareD1Statement):
                raise TypeError("batch() takes statements prepared by this database")
            handles.append(statement.handle)
        try:
            results = ffi.to_py(await self._db.batch(ffi.to_js_arg(handles, self._raw)))
        except ffi.JsException as exc:
            raise _d1_error(exc, " (batch rolled back: nothing was applied)") from exc
        return [_result(item) for item in results or []]

    async def exec(self, sql: str) -> D1ExecResult:
        try:
            result = ffi.to_py(await self._db.exec(sql)) or {}
        except ffi.JsException as exc:
            raise _d1_error(exc) from exc
        return D1ExecResult(
            count=int(result.get("count") or 0), duration=float(result.get("duration") or 0.0)
        )


def _result(raw: Any) -> D1Result:
    """A `D1Result` from `.all()`/`.run()`/`batch` output: the counters callers read, kept
    as D1 reports them; a null counter (e.g. `last_row_id` of a SELECT) means the default."""
    data = raw or {}
    meta = data.get("meta") or {}
    rows = [dict(row) for row in data.get("results") or []]
    return D1Result(
        success=bool(data.get("success", True)),
        meta=D1Meta(
            changes=_int(meta.get("changes")),
            last_row_id=_int(meta.get("last_row_id")),
            rows_read=_int(meta.get("rows_read")),
            rows_written=_int(meta.get("rows_written")),
            duration=float(meta.get("duration") or 0.0),
        ),
        results=rows,
    )


def _int(value: Any) -> int:
    # JS numbers arrive as int when integral (Pyodide's rule); a float here is a D1 double.
    return 0 if value is None else int(value)
