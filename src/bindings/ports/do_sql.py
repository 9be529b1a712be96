"""Durable Object SQL storage port (`ctx.storage.sql`, synchronous), with workerd's
semantics: `exec` returns a cursor; `BEGIN`/`COMMIT`/`SAVEPOINT` are refused (use
`transaction_sync`); `_cf_` tables are reserved; integers may come back as floats (int64 →
double), so callers must not depend on the Python type of an integer column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from bindings.ports.sql import Row, SqlValue

T = TypeVar("T")


class SqlCursor(Protocol):
    def to_array(self) -> list[Row]: ...

    def one(self) -> Row:
        """Exactly one row; raises if there are zero or several."""

    def __iter__(self) -> Iterator[Row]: ...

    @property
    def rows_written(self) -> int: ...


class SqlStorage(Protocol):
    def exec(self, sql: str, *params: SqlValue) -> SqlCursor: ...


class DurableObjectStorage(Protocol):
    """The parts of `ctx.storage` the AgentRuntime uses."""

    @property
    def sql(self) -> SqlStorage: ...

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` atomically: if it raises, every write it made is rolled back."""

    async def delete_all(self) -> None:
        """`storage.deleteAll()`: every table and row goes with the object's SQLite database
        (nothing of it is left in free pages); the object starts empty again."""
