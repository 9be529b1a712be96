"""Identifiers, content hashes, and how many ids fit in one D1 statement.

ULIDs: 26 Crockford base32 characters, 48-bit millisecond timestamp then 80 random bits, so
ids sort by creation time (useful for cursors) and are unique without coordination. They
are generated per call, never at import time (Workers snapshots forbid entropy in globals).

D1 allows at most 100 bound parameters per statement (`IDS_PER_STATEMENT` ids leave room for
the tenant and a few others) and a batch is one transaction (`STATEMENTS_PER_BATCH`): work on
many ids is sliced to fit, the same for every tier and job.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import TypeVar

from bindings.ports.d1 import D1Database, D1Result, D1Statement
from bindings.ports.sql import SqlValue

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

ULID_PATTERN = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def new_ulid(now_seconds: float) -> str:
    """A new ULID for time `now_seconds` (epoch seconds, from the Clock port)."""
    millis = int(now_seconds * 1000)
    if not 0 <= millis < 2**48:
        raise ValueError(f"timestamp out of ULID range: {now_seconds}")
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def ulid_time_ms(ulid: str) -> int:
    """The millisecond timestamp a ULID was minted at."""
    value = 0
    for char in ulid[:10]:
        value = value * 32 + _CROCKFORD.index(char)
    return value


def is_ulid(value: str) -> bool:
    return bool(ULID_PATTERN.fullmatch(value))


def normalize_content(text: str) -> str:
    """Canonical form for hashing: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the normalised content: equal for trivially different spellings."""
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def sha256_hex(data: str | bytes) -> str:
    """SHA-256 (hex) of exact bytes (no normalisation), e.g. for `memory_written` events."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


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
    A tenant fenced in this database (moving in or out: `agent_memory.directory`) is left
    out, so no job touches rows a move is copying or deleting. `table` and `condition` are
    SQL text from the caller's code, never from input."""
    where = f" WHERE {condition}" if condition else ""
    further = f"{condition} AND " if condition else ""
    return (
        "WITH RECURSIVE t(tenant_id) AS ("
        f"SELECT (SELECT MIN(tenant_id) FROM {table}{where}) "
        f"UNION ALL SELECT (SELECT MIN(tenant_id) FROM {table} "
        f"WHERE {further}tenant_id > t.tenant_id) FROM t WHERE t.tenant_id IS NOT NULL) "
        "SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL "
        "AND tenant_id NOT IN (SELECT tenant_id FROM tenant_fences)"
    )


async def run_batches(db: D1Database, statements: Sequence[D1Statement]) -> list[D1Result]:
    """Run `statements` in order, `STATEMENTS_PER_BATCH` to a D1 batch (each batch one
    transaction); every statement's result."""
    results: list[D1Result] = []
    for batch in chunks(statements, STATEMENTS_PER_BATCH):
        results += await db.batch(list(batch))
    return results


async def delete_ids(
    db: D1Database, sql: str, tenant: str, ids: Sequence[str], extra: Sequence[SqlValue] = ()
) -> int:
    """Run `sql` (with `{marks}` for a slice of ids; parameters: tenant, `extra`, the ids)
    over `ids` in batches; the rows it deleted (`meta.changes`)."""
    statements = [
        db.prepare(sql.format(marks=", ".join("?" for _ in chunk))).bind(tenant, *extra, *chunk)
        for chunk in chunks(list(ids))
    ]
    return sum(r.meta.changes for r in await run_batches(db, statements))


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
