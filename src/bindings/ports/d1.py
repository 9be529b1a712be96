"""D1 port (async SQL database; docs: d1/worker-api/*, d1/platform/limits.mdx).

`prepare(sql).bind(*params)` is synchronous; execution is async. `batch` runs its
statements in one transaction: all of them or none. At most 100 bound parameters per
statement. Booleans are stored as 1/0; None binds NULL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from bindings.ports.sql import Row, SqlValue

D1_MAX_BOUND_PARAMETERS = 100
D1_MAX_SQL_BYTES = 100_000


class D1Meta(BaseModel):
    changes: int = 0
    last_row_id: int = 0
    rows_read: int = 0
    rows_written: int = 0
    duration: float = 0.0


class D1Result(BaseModel):
    """Shape of `.all()` / `.run()`: `{success, meta, results}`."""

    success: bool = True
    meta: D1Meta = Field(default_factory=D1Meta)
    results: list[Row] = Field(default_factory=list)


class D1ExecResult(BaseModel):
    count: int
    duration: float = 0.0


class D1Error(Exception):
    """A statement failed in the database (constraint, syntax, limit...)."""


class D1Statement(Protocol):
    def bind(self, *params: SqlValue | bool) -> D1Statement:
        """Return a statement with these positional parameters bound."""
        ...

    async def all(self) -> D1Result: ...

    async def run(self) -> D1Result: ...

    async def first(self) -> Row | None:
        """The first row, or None."""
        ...

    async def first_value(self, column: str) -> Any:
        """`first(column)`: the value of one column of the first row, or None."""
        ...


class D1Database(Protocol):
    def prepare(self, sql: str) -> D1Statement: ...

    async def batch(self, statements: Sequence[D1Statement]) -> list[D1Result]:
        """Run statements in one transaction; on any failure none of them take effect."""
        ...

    async def exec(self, sql: str) -> D1ExecResult:
        """Run one or more unbound statements separated by semicolons."""
        ...
