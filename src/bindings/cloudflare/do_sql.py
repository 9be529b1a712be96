"""`bindings.ports.do_sql.DurableObjectStorage` over a Durable Object's `ctx.storage`.

Source: workerd `src/workerd/api/sql.c++` (SqlStorage, cursor), the SDK's
`DurableObjectContext` (which wraps `ctx.storage` in a `_BindingWrapper`), and the SDK
bindings test `worker_durable_object.py`. `sql.exec` is synchronous and returns a cursor;
BEGIN/SAVEPOINT are refused by workerd, so atomic groups go through
`storage.transactionSync(fn)`. JS errors become `BindingError` (`BindingLimitError` when
SQLite reports a limit), with workerd's text.

Values: workerd binds every JS number as a double and returns int64 as a double (Pyodide
then hands integral values back as int); None binds NULL in both modes (raw mode sends JS
null). Booleans are refused here: workerd would store them as the text 'true'/'false'
(checked against Miniflare by the local adapter's contract tests), which no caller wants.

Cursors are lazy, as workerd's are (api/sql.c++, util/sqlite.c++): `exec` runs the statement
up to its first row, so a write is done (and counted) before its cursor is read; each further
row is computed when the cursor is advanced, and an error in a later row is raised by the read
that reaches it. A cursor left with rows unread keeps its statement in progress, and workerd
cannot commit the object's writes until it ends (SQLITE_BUSY, an internal error): read
cursors to the end.

The SDK wrapper caches an attribute after its first read (workers-runtime-sdk `rpc.py`,
`_BindingWrapper.__getattr__` does `setattr(self, name, result)`), so a value that changes
is never read through it: a cursor's counter is read by item (`cursor["rowsWritten"]`), and
`database_size` from the unwrapped JS object (through the wrapper it stayed at its first
value, 8192 before and after 320 KiB of inserts; tests/workerd).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingError, BindingLimitError
from bindings.ports.sql import Row, SqlValue

T = TypeVar("T")


def _sql_error(exc: BaseException, context: str = "") -> BindingError:
    message = ffi.error_message(exc)
    kind = BindingLimitError if ffi.SQLITE_LIMIT_ERRORS.search(message) else BindingError
    return kind(f"{message}{context}")


def _call(fn: Callable[[], Any]) -> Any:
    try:
        return ffi.to_py(fn())
    except ffi.JsException as exc:
        raise _sql_error(exc) from exc


class CloudflareSqlCursor:
    """Implements `SqlCursor` over a JS `SqlStorageCursor`."""

    def __init__(self, handle: Any, raw: bool) -> None:
        self._cursor = handle
        self._raw = raw

    def to_array(self) -> list[Row]:
        return [dict(row) for row in _call(lambda: self._cursor.toArray()) or []]

    def one(self) -> Row:
        """Exactly one row; `BindingError` when there are none or several (workerd's check)."""
        return dict(_call(lambda: self._cursor.one()))

    def __iter__(self) -> Iterator[Row]:
        try:
            for row in self._cursor:
                yield dict(ffi.to_py(row))
        except ffi.JsException as exc:
            raise _sql_error(exc) from exc

    @property
    def rows_written(self) -> int:
        """Rows the statement has written (final once `exec` returns, for a write)."""
        value = self._cursor.rowsWritten if self._raw else self._cursor["rowsWritten"]
        return int(ffi.to_py(value) or 0)


class CloudflareSqlStorage:
    """Implements `SqlStorage` over `ctx.storage.sql`."""

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
        """Bytes used by this object's SQLite database, as of now (read from the JS object
        behind the SDK wrapper, its `_binding`: see the module docstring)."""
        js = self._sql if self._raw else getattr(self._sql, "_binding", self._sql)
        return int(ffi.to_py(js.databaseSize) or 0)


class CloudflareDurableObjectStorage:
    """Implements `DurableObjectStorage` over `ctx.storage` (wrapped or raw)."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self._raw = ffi.is_raw(storage)
        self._sql: CloudflareSqlStorage | None = None

    @property
    def sql(self) -> CloudflareSqlStorage:
        if self._sql is None:
            self._sql = CloudflareSqlStorage(self._storage.sql, self._raw)
        return self._sql

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside `storage.transactionSync`: its writes commit together or not at all.

        The result and any exception travel in Python variables, not through JS, so the
        caller sees its own exception (JS only sees that the callback threw, which makes it
        roll back). The callback crosses as a proxy created and destroyed here: given a plain
        callable, the SDK's wrapper makes a `create_proxy` nobody destroys (`rpc.py`,
        `_python_to_rpc_default_converter`), one leaked proxy per transaction
        (tests/pyodide/py/test_do_sql.py).
        """
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
