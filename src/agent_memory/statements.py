"""D1's statement limits, and slicing work to fit them: at most 100 bound parameters per
statement (`IDS_PER_STATEMENT` ids leave room for the tenant and a few others) and batches of
`STATEMENTS_PER_BATCH` (a batch is one transaction), the same for every tier and job."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

from bindings.ports.d1 import D1Database
from bindings.ports.sql import SqlValue

T = TypeVar("T")

IDS_PER_STATEMENT = 90  # + the tenant id and a few others stays under D1's 100
STATEMENTS_PER_BATCH = 50


def chunks(items: Sequence[T], size: int = IDS_PER_STATEMENT) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `size` (≥ 1)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def distinct_tenants_sql(table: str, condition: str = "") -> str:
    """Every tenant id of `table` (where `condition` holds), sorted: a recursive CTE seeks the
    tenant-first index once per distinct tenant, so the cost grows with tenants, not rows.
    `table` and `condition` are SQL text from the caller's code, never from input."""
    where = f" WHERE {condition}" if condition else ""
    further = f"{condition} AND " if condition else ""
    return (
        "WITH RECURSIVE t(tenant_id) AS ("
        f"SELECT (SELECT MIN(tenant_id) FROM {table}{where}) "
        f"UNION ALL SELECT (SELECT MIN(tenant_id) FROM {table} "
        f"WHERE {further}tenant_id > t.tenant_id) FROM t WHERE t.tenant_id IS NOT NULL) "
        "SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL"
    )


async def delete_ids(
    db: D1Database, sql: str, tenant: str, ids: Sequence[str], extra: Sequence[SqlValue] = ()
) -> int:
    """Run `sql` (with `{marks}` for a slice of ids; parameters: tenant, `extra`, the ids)
    over `ids` in batches; the rows it deleted (`meta.changes`)."""
    statements = [
        db.prepare(sql.format(marks=", ".join("?" for _ in chunk))).bind(tenant, *extra, *chunk)
        for chunk in chunks(list(ids))
    ]
    total = 0
    for start in range(0, len(statements), STATEMENTS_PER_BATCH):
        results = await db.batch(statements[start : start + STATEMENTS_PER_BATCH])
        total += sum(r.meta.changes for r in results)
    return total


async def count_then_delete(
    db: D1Database, table: str, column: str, tenant: str, ids: Sequence[str]
) -> int:
    """Delete the tenant's rows of `table` whose `column` is among `ids`; how many there
    were (counted first: `meta.changes` may include trigger writes). `table` and `column`
    are SQL text from the owning store's code, never from input."""
    total = 0
    for chunk in chunks(list(ids)):
        marks = ", ".join("?" for _ in chunk)
        value = await (
            db.prepare(
                f"SELECT COUNT(*) AS n FROM {table} WHERE tenant_id = ? AND {column} IN ({marks})"
            )
            .bind(tenant, *chunk)
            .first_value("n")
        )
        total += int(value or 0)
    await delete_ids(
        db, f"DELETE FROM {table} WHERE tenant_id = ? AND {column} IN ({{marks}})", tenant, ids
    )
    return total
