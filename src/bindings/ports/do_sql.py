"""Durable Object storage ports: SQL (`ctx.storage.sql`, synchronous), with workerd's semantics
(`BEGIN`/`COMMIT` are refused: use `transaction_sync`; integers may come back as floats), and
the alarm, with Cloudflare's (durable-objects/api/alarms.mdx: one alarm per object, setting
replaces it, a past time fires at once, a raising handler is retried; times are epoch seconds,
adapters convert to milliseconds).
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
    @property
    def sql(self) -> SqlStorage: ...

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` atomically: if it raises, every write it made is rolled back."""

    async def replace_all(self, fill: Callable[[], T]) -> T:
        """`storage.deleteAll()`, then `fill()` writes the new database through `sql`: no page
        of the old one is left (nor the alarm: compatibility date 2026-02-24), and what `fill`
        writes is committed with the deletion, never after it (workerd's deleteAll commits
        with the implicit transaction the writes before the next await open:
        io/actor-sqlite.c++; locally a rename)."""


class AlarmStorage(Protocol):
    async def get_alarm(self) -> float | None: ...

    async def set_alarm(self, at: float) -> None: ...

    async def delete_alarm(self) -> None: ...
