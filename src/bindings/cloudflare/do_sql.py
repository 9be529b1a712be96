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
row is computed when the cursor is advanced, so `rows_read` grows as rows are read and an error
in a later row is raised by the read that reaches it. A cursor left with rows unread keeps its
statement in progress, and workerd cannot commit the object's writes until it ends (SQLITE_BUSY,
an internal error): read cursors to the end.

Counters: the SDK wrapper caches an attribute after its first read (`_BindingWrapper.
__getattr__`), which would freeze `rows_read` at whatever it was then; in wrapped mode the
counters are read by item (`cursor["rowsRead"]`), which the wrapper does not cache, and
`database_size` is read from the unwrapped JS object.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingError, BindingLimitError
from bindings.ports.sql import Row, SqlValue

T = TypeVar("T")

# SQLite's own texts for limit errors, as workerd reports them.
_LIMIT_ERRORS = re.compile(
    r"too many SQL variables|SQLITE_TOOBIG|string or blob too big|too many columns"
    r"|LIKE or GLOB pattern too complex|too many terms in compound SELECT"
    r"|Expression tree is too large|too many arguments on function"
)


def _sql_error(exc: BaseException, context: str = "") -> BindingError:
    message = ffi.error_message(exc)
    kind = BindingLimitError if _LIMIT_ERRORS.search(message) else BindingError
    return kind(f"{message}{context}")


class CloudflareSqlCursor:
    """Implements `SqlCursor` over a JS `SqlStorageCursor`."""

    def __init__(self, handle: Any, raw: bool) -> None:
        self._cursor = handle
        self._raw = raw

    def to_array(self) -> list[Row]:
        rows = self._call(lambda: self._cursor.toArray())
        return [dict(row) for row in rows or []]

    def one(self) -> Row:
        """Exactly one row; `BindingError` when there are none or several (workerd's check)."""
        return dict(self._call(lambda: self._cursor.one()))

    def raw(self) -> list[list[Any]]:
        """Rows as value lists, in `column_names` order."""
        return [list(row) for row in self._call(lambda: list(self._cursor.raw()))]

    @property
    def column_names(self) -> list[str]:
        return [str(name) for name in ffi.to_py(self._cursor.columnNames) or []]

    def __iter__(self) -> Iterator[Row]:
        try:
            for row in self._cursor:
                yield dict(ffi.to_py(row))
        except ffi.JsException as exc:
            raise _sql_error(exc) from exc

    @property
    def rows_read(self) -> int:
        """Rows the statement has read so far (final once the cursor has been read)."""
        return self._counter("rowsRead")

    @property
    def rows_written(self) -> int:
        """Rows the statement has written (final once `exec` returns, for a write)."""
        return self._counter("rowsWritten")

    def _counter(self, name: str) -> int:
        # A getter whose value changes as the cursor is read: never through the SDK
        # wrapper's attribute cache (see the module docstring).
        value = getattr(self._cursor, name) if self._raw else self._cursor[name]
        return int(ffi.to_py(value) or 0)

    @staticmethod
    def _call(fn: Callable[[], Any]) -> Any:
        try:
            return ffi.to_py(fn())
        except ffi.JsException as exc:
            raise _sql_error(exc) from exc


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
        """Bytes used by this object's SQLite database, as of now.

        Read from the JS `SqlStorage` itself: the SDK's wrapper caches every attribute at its
        first read (workers-runtime-sdk `rpc.py`, `_BindingWrapper.__getattr__` does
        `setattr(self, name, result)`), so through it `databaseSize` stayed at its first
        value (8192 before and after 320 KiB of inserts; tests/workerd).
        """
        return int(ffi.to_py(_js_object(self._sql).databaseSize) or 0)


def _js_object(handle: Any) -> Any:
    """The JS object behind an SDK `_BindingWrapper` (its `_binding`), or `handle` itself
    when it is already a raw JsProxy. The wrapper has no public accessor for it."""
    if ffi.is_raw(handle):
        return handle
    return getattr(handle, "_binding", handle)


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

        The result and any exception are carried back in Python variables rather than
        through JS, so neither needs converting and the caller sees the original exception
        (JS only sees that the callback threw, which is what makes it roll back).

        The callback crosses as a proxy this method creates and destroys: given a plain
        Python callable, the SDK's storage wrapper makes a `create_proxy` that nobody
        destroys (workers-runtime-sdk `rpc.py`, `_python_to_rpc_default_converter`), one
        leaked proxy per transaction (tests/pyodide/py/test_do_sql.py).
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
