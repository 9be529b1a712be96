"""Durable Object SQL storage port (`ctx.storage.sql`, synchronous).

Semantics follow workerd's SqlStorage: `exec` is synchronous and returns a cursor;
`BEGIN`/`COMMIT`/`SAVEPOINT` statements are rejected (use `transaction_sync`); tables
prefixed `_cf_` are reserved. Integers come back as floats in workerd (int64 → double):
callers must not depend on the Python type of an integer column.
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
        ...

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
        ...
