"""`DurableObjectStorage` over a Durable Object's `ctx.storage` (workerd `api/sql.c++`). JS
errors become `BindingError` (`BindingLimitError` for SQLite limits); booleans are refused
(workerd stores the text 'true'/'false'). Cursors are lazy, as workerd's: an unread cursor keeps
its statement open and blocks the commit (SQLITE_BUSY), so read cursors to the end. The SDK
wrapper caches attributes after the first read, so changing values are read past it
(`cursor["rowsWritten"]`, `database_size` from the JS object; tests/workerd). The alarm's
times are integer epoch milliseconds in JS (durable-objects/api/alarms.mdx), seconds here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingError, BindingLimitError
from bindings.ports.sql import Row, SqlValue

T = TypeVar("T")


def _sql_error(exc: BaseException, context: str = "") -> BindingError:
    return ffi.sql_error(exc, BindingError, BindingLimitError, context)


def _call(fn: Callable[[], Any]) -> Any:
    try:
        return ffi.to_py(fn())
    except ffi.JsException as exc:
        raise _sql_error(exc) from exc


class CloudflareSqlCursor:
    def __init__(self, handle: Any, raw: bool) -> None:
        self._cursor = handle
        self._raw = raw

    def to_array(self) -> list[Row]:
        return [dict(row) for row in _call(lambda: self._cursor.toArray()) or []]

    def one(self) -> Row:
        return dict(_call(lambda: self._cursor.one()))

    def __iter__(self) -> Iterator[Row]:
        try:
            for row in self._cursor:
                yield dict(ffi.to_py(row))
        except ffi.JsException as exc:
            raise _sql_error(exc) from exc

    @property
    def rows_written(self) -> int:
        value = self._cursor.rowsWritten if self._raw else self._cursor["rowsWritten"]
        return int(ffi.to_py(value) or 0)


class CloudflareSqlStorage:
    def __init__(self, handle: Any, raw: bool) -> None:
        self._sql = handle
        self._raw = raw

    def exec(self, sql: str, *params: SqlValue) -> CloudflareSqlCursor:
        if any(isinstance(value, bool) for value in params):
            raise BindingError(
                "Booleans are not a documented Durable Object SQL binding type (workerd stores "
                "them as the text 'true'/'false'); bind 1 or 0."
            )
        values = [ffi.to_js_arg(value, self._raw) for value in params]
        try:
            cursor = self._sql.exec(sql, *values)
        except ffi.JsException as exc:
            raise _sql_error(exc, f" (in: {sql[:200]})") from exc
        return CloudflareSqlCursor(cursor, self._raw)

    @property
    def database_size(self) -> int:
        """Bytes used by this object's SQLite database, read past the SDK wrapper's cache."""
        js = self._sql if self._raw else getattr(self._sql, "_binding", self._sql)
        return int(ffi.to_py(js.databaseSize) or 0)


class CloudflareDurableObjectStorage:
    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self._raw = ffi.is_raw(storage)
        self._sql: CloudflareSqlStorage | None = None

    @property
    def sql(self) -> CloudflareSqlStorage:
        if self._sql is None:
            self._sql = CloudflareSqlStorage(self._storage.sql, self._raw)
        return self._sql

    async def replace_all(self, fill: Callable[[], T]) -> T:
        deleted = self._storage.deleteAll()  # gone now; committed with fill's writes
        self._sql = None  # the SQL handle of the database that was deleted
        result = fill()
        await deleted
        return result

    async def get_alarm(self) -> float | None:
        value = ffi.to_py(await self._storage.getAlarm())
        return None if value is None else float(value) / 1000.0

    async def set_alarm(self, at: float) -> None:
        if not math.isfinite(at):
            raise ValueError(f"an alarm time must be a finite number of seconds, not {at!r}")
        await self._storage.setAlarm(math.ceil(at * 1000.0))

    async def delete_alarm(self) -> None:
        await self._storage.deleteAlarm()

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside `storage.transactionSync`. The result and any exception travel in
        Python variables, so the caller sees its own exception (JS only sees that the callback
        threw, and rolls back). The callback is a proxy destroyed here: given a plain callable,
        the SDK leaks one proxy per call (tests/pyodide/py/test_do_sql.py)."""
        outcome: list[T] = []
        failure: list[BaseException] = []

        def body() -> None:
            try:
                outcome.append(fn())
            except BaseException as exc:
                failure.append(exc)
                raise

        callback = ffi.create_proxy(body)
        try:
            self._storage.transactionSync(callback)
        except BaseException as exc:
            if failure:
                raise failure[0] from None
            if isinstance(exc, ffi.JsException):
                raise _sql_error(exc, " (transactionSync)") from exc
            raise
        finally:
            callback.destroy()
        if failure:  # JS swallowed the error: the transaction still must not count as done.
            raise failure[0]
        return outcome[0]
