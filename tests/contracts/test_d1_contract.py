"""Contract suite for the D1 port (`bindings.ports.d1.D1Database`).

Sources for the expected behaviour: cloudflare/workerd `src/cloudflare/internal/d1-api.ts`
(bind type checks, result shapes, `first(column)`), miniflare
`src/workers/d1/database.worker.ts` (every query and batch in one transaction, BLOBs as
byte arrays), workerd `src/workerd/util/sqlite.c++` (limits, authorizer, transaction
refusal), cloudflare-docs `d1/platform/limits.mdx` and `d1/sql-api/foreign-keys.mdx`.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings.ports.d1 import D1Database, D1Error
from tests.contracts.conftest import D1Factory

TRANSACTION_REFUSED = "To execute a transaction, please use the state.storage.transaction()"


async def _notes(db: D1Database) -> None:
    await db.prepare(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT UNIQUE)"
    ).run()


async def _count(db: D1Database, table: str = "notes") -> int:
    value = await db.prepare(f"SELECT COUNT(*) AS n FROM {table}").first_value("n")
    assert isinstance(value, int)
    return value


# --- result shapes ------------------------------------------------------------------------


async def test_all_returns_rows_as_dicts_with_meta(d1: D1Database) -> None:
    await _notes(d1)
    await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES (?, ?)").bind("t1", "a").run()
    await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES (?, ?)").bind("t1", "b").run()
    result = (
        await d1.prepare("SELECT id, body FROM notes WHERE tenant_id = ? ORDER BY id")
        .bind("t1")
        .all()
    )
    assert result.results == [{"id": 1, "body": "a"}, {"id": 2, "body": "b"}]


async def test_run_reports_changes(d1: D1Database) -> None:
    await _notes(d1)
    first = await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'x')").run()
    second = await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'y')").run()
    assert (first.meta.changes, second.meta.changes) == (1, 1)
    updated = await d1.prepare("UPDATE notes SET body = body || '!' WHERE tenant_id = 't'").run()
    assert updated.meta.changes == 2


async def test_first_returns_the_first_row_or_none(d1: D1Database) -> None:
    await _notes(d1)
    assert await d1.prepare("SELECT * FROM notes").first() is None
    await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'only')").run()
    assert await d1.prepare("SELECT tenant_id, body FROM notes").first() == {
        "tenant_id": "t",
        "body": "only",
    }


async def test_first_value_reads_one_column(d1: D1Database) -> None:
    await _notes(d1)
    query = d1.prepare("SELECT body, NULL AS empty FROM notes WHERE id = ?")
    assert await query.bind(1).first_value("body") is None  # no rows
    await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'hello')").run()
    assert await query.bind(1).first_value("body") == "hello"
    assert await query.bind(1).first_value("empty") is None
    with pytest.raises(D1Error, match=re.escape("D1_COLUMN_NOTFOUND: Column not found (nope)")):
        await query.bind(1).first_value("nope")


async def test_bind_returns_a_new_statement(d1: D1Database) -> None:
    query = d1.prepare("SELECT ? AS v")
    one = query.bind(1)
    two = query.bind(2)
    assert await one.first_value("v") == 1
    assert await two.first_value("v") == 2


async def test_several_statements_in_one_query_return_the_last_ones_rows(
    d1: D1Database,
) -> None:
    await d1.prepare("CREATE TABLE t (a INTEGER)").run()
    result = await d1.prepare(
        "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); SELECT SUM(a) AS total FROM t"
    ).all()
    assert result.results == [{"total": 3}]


async def test_a_query_with_no_statement_is_an_error(d1: D1Database) -> None:
    with pytest.raises(D1Error, match="D1_ERROR"):
        await d1.prepare("SELECT 1;;").all()


# --- binding and value types --------------------------------------------------------------


async def test_booleans_are_stored_as_one_and_zero(d1: D1Database) -> None:
    await d1.prepare("CREATE TABLE flags (name TEXT, on_off INTEGER)").run()
    insert = d1.prepare("INSERT INTO flags VALUES (?, ?)")
    await d1.batch([insert.bind("yes", True), insert.bind("no", False)])
    rows = await d1.prepare("SELECT name, on_off, typeof(on_off) AS kind FROM flags").all()
    assert rows.results == [
        {"name": "yes", "on_off": 1, "kind": "integer"},
        {"name": "no", "on_off": 0, "kind": "integer"},
    ]


async def test_none_binds_null(d1: D1Database) -> None:
    row = (
        await d1.prepare("SELECT ? IS NULL AS is_null, typeof(?) AS kind").bind(None, None).first()
    )
    assert row == {"is_null": 1, "kind": "null"}


async def test_text_and_floats_round_trip(d1: D1Database) -> None:
    row = await d1.prepare("SELECT ? AS s, ? AS f").bind("naïve ☃ 𝄞", 0.1).first()
    assert row == {"s": "naïve ☃ 𝄞", "f": 0.1}


async def test_bytes_bind_as_blob_and_come_back_as_byte_arrays(d1: D1Database) -> None:
    await d1.prepare("CREATE TABLE blobs (b BLOB)").run()
    await d1.prepare("INSERT INTO blobs VALUES (?)").bind(b"\x00\x01\xff").run()
    row = await d1.prepare("SELECT b, typeof(b) AS kind FROM blobs").first()
    assert row == {"b": [0, 1, 255], "kind": "blob"}


async def test_unsupported_types_fail_at_bind_time(d1: D1Database) -> None:
    # On Workers a dict reaches d1-api.ts as a JS object: "D1_TYPE_ERROR: Type 'object' not
    # supported ...". A harness that cannot even send it may raise TypeError instead.
    query = d1.prepare("SELECT ? AS v")
    with pytest.raises((D1Error, TypeError)):
        query.bind({"a": 1})  # type: ignore[arg-type]


async def test_integers_beyond_2_pow_53_are_rejected(d1: D1Database) -> None:
    query = d1.prepare("SELECT ? AS v")
    with pytest.raises(D1Error, match="D1_TYPE_ERROR"):
        query.bind(2**53 + 1)
    safe = 2**53 - 1
    assert await query.bind(safe).first_value("v") == safe


async def test_numbers_arrive_as_javascript_numbers(d1: D1Database) -> None:
    row = await d1.prepare(
        "SELECT 3.0 AS whole_real, 2.5 AS half, 42 AS int, 1152921504606846976 AS huge"
    ).first()
    assert row is not None
    assert row["whole_real"] == 3 and type(row["whole_real"]) is int
    assert row["half"] == 2.5
    assert row["int"] == 42 and type(row["int"]) is int
    # 2**60 does not fit a JS number exactly: Pyodide hands it over as a float.
    assert type(row["huge"]) is float
    assert row["huge"] == float(2**60)


# --- limits --------------------------------------------------------------------------------


def _in_list(count: int) -> str:
    return "SELECT 7 IN (" + ", ".join("?" for _ in range(count)) + ") AS found"


async def test_one_hundred_bound_parameters_are_allowed(d1: D1Database) -> None:
    params = list(range(100))
    assert await d1.prepare(_in_list(100)).bind(*params).first_value("found") == 1


async def test_more_than_one_hundred_bound_parameters_fail(d1: D1Database) -> None:
    with pytest.raises(D1Error, match="too many SQL variables"):
        await d1.prepare(_in_list(101)).bind(*range(101)).first()


async def test_sql_longer_than_100_kb_fails(d1: D1Database) -> None:
    ok = "SELECT '" + "x" * 99_000 + "' AS v"
    assert len(str(await d1.prepare(ok).first_value("v"))) == 99_000
    too_long = "SELECT '" + "x" * 100_001 + "' AS v"
    with pytest.raises(D1Error, match="D1_ERROR"):
        await d1.prepare(too_long).first()


async def test_wrong_number_of_bindings_fails(d1: D1Database) -> None:
    with pytest.raises(D1Error, match="D1_ERROR"):
        await d1.prepare("SELECT ? AS a, ? AS b").bind(1).first()


async def test_sql_errors_are_d1_errors(d1: D1Database) -> None:
    with pytest.raises(D1Error, match="D1_ERROR: no such table: missing"):
        await d1.prepare("SELECT * FROM missing").all()


# --- transactions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    ["BEGIN", "BEGIN TRANSACTION", "COMMIT", "ROLLBACK", "SAVEPOINT sp", "RELEASE sp", "END"],
)
async def test_sql_transaction_statements_are_refused(d1: D1Database, sql: str) -> None:
    with pytest.raises(D1Error, match=re.escape(TRANSACTION_REFUSED)):
        await d1.prepare(sql).run()


async def test_batch_runs_statements_in_order_and_returns_each_result(d1: D1Database) -> None:
    await _notes(d1)
    insert = d1.prepare("INSERT INTO notes (tenant_id, body) VALUES (?, ?)")
    results = await d1.batch(
        [
            insert.bind("t", "one"),
            insert.bind("t", "two"),
            d1.prepare("SELECT body FROM notes ORDER BY id"),
        ]
    )
    assert len(results) == 3
    assert results[0].meta.changes == 1
    assert results[2].results == [{"body": "one"}, {"body": "two"}]


async def test_a_failed_batch_leaves_nothing_written(d1: D1Database) -> None:
    await _notes(d1)
    insert = d1.prepare("INSERT INTO notes (tenant_id, body) VALUES (?, ?)")
    await insert.bind("t", "existing").run()
    with pytest.raises(D1Error, match="UNIQUE constraint failed"):
        await d1.batch(
            [
                insert.bind("t", "new-1"),
                d1.prepare("UPDATE notes SET tenant_id = 'moved'"),
                insert.bind("t", "existing"),  # violates UNIQUE(body)
                insert.bind("t", "new-2"),
            ]
        )
    rows = await d1.prepare("SELECT tenant_id, body FROM notes").all()
    assert rows.results == [{"tenant_id": "t", "body": "existing"}]


async def test_an_empty_batch_is_an_error(d1: D1Database) -> None:
    with pytest.raises(D1Error):
        await d1.batch([])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    bodies=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12, unique=True),
    fail_at=st.one_of(st.none(), st.integers(min_value=0, max_value=11)),
)
async def test_batches_are_all_or_nothing(
    make_d1: D1Factory, bodies: list[str], fail_at: int | None
) -> None:
    async with make_d1() as db:
        await _notes(db)
        insert = db.prepare("INSERT INTO notes (tenant_id, body) VALUES (?, ?)")
        statements = [insert.bind("t", body) for body in bodies]
        failing = fail_at is not None and fail_at < len(statements)
        if failing:
            assert fail_at is not None
            statements.insert(fail_at, db.prepare("INSERT INTO no_such_table VALUES (1)"))
            with pytest.raises(D1Error):
                await db.batch(statements)
            assert await _count(db) == 0
        else:
            await db.batch(statements)
            assert await _count(db) == len(bodies)


async def test_a_failed_statement_leaves_nothing_written(d1: D1Database) -> None:
    await _notes(d1)
    await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'a'), ('t', 'b')").run()
    # The second row of this single statement conflicts: the first must not stick.
    with pytest.raises(D1Error, match="UNIQUE constraint failed"):
        await d1.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'c'), ('t', 'a')").run()
    assert await _count(d1) == 2


# --- SQLite features D1 offers ------------------------------------------------------------


async def test_fts5_full_text_search_works(d1: D1Database) -> None:
    await d1.prepare("CREATE VIRTUAL TABLE docs USING fts5(body, tenant_id UNINDEXED)").run()
    insert = d1.prepare("INSERT INTO docs (body, tenant_id) VALUES (?, ?)")
    await d1.batch(
        [
            insert.bind("the customer prefers ROI framing", "t1"),
            insert.bind("weekly pipeline review on mondays", "t1"),
            insert.bind("customer churn risk is high", "t2"),
        ]
    )
    rows = (
        await d1.prepare(
            "SELECT body FROM docs WHERE docs MATCH ? AND tenant_id = ? ORDER BY bm25(docs)"
        )
        .bind("customer", "t1")
        .all()
    )
    assert rows.results == [{"body": "the customer prefers ROI framing"}]


async def test_json_functions_are_available(d1: D1Database) -> None:
    row = (
        await d1.prepare("SELECT json_extract(?, '$.a.b') AS v, json_valid('{') AS bad")
        .bind('{"a": {"b": 7}}')
        .first()
    )
    assert row == {"v": 7, "bad": 0}


async def test_foreign_keys_are_enforced_by_default(d1: D1Database) -> None:
    await d1.batch(
        [
            d1.prepare("CREATE TABLE parents (id INTEGER PRIMARY KEY)"),
            d1.prepare(
                "CREATE TABLE children (id INTEGER PRIMARY KEY, "
                "parent_id INTEGER NOT NULL REFERENCES parents(id))"
            ),
        ]
    )
    with pytest.raises(D1Error, match="FOREIGN KEY constraint failed"):
        await d1.prepare("INSERT INTO children (parent_id) VALUES (42)").run()
    # Every query runs in a transaction, so this pragma cannot switch enforcement off.
    await d1.prepare("PRAGMA foreign_keys = off").run()
    with pytest.raises(D1Error, match="FOREIGN KEY constraint failed"):
        await d1.prepare("INSERT INTO children (parent_id) VALUES (42)").run()


async def test_defer_foreign_keys_allows_fixing_order_within_a_batch(d1: D1Database) -> None:
    await d1.batch(
        [
            d1.prepare("CREATE TABLE parents (id INTEGER PRIMARY KEY)"),
            d1.prepare(
                "CREATE TABLE children (id INTEGER PRIMARY KEY, "
                "parent_id INTEGER NOT NULL REFERENCES parents(id))"
            ),
        ]
    )
    await d1.batch(
        [
            d1.prepare("PRAGMA defer_foreign_keys = on"),
            d1.prepare("INSERT INTO children (parent_id) VALUES (1)"),
            d1.prepare("INSERT INTO parents (id) VALUES (1)"),
        ]
    )
    assert await _count(d1, "children") == 1


async def test_reserved_cf_table_names_are_refused(d1: D1Database) -> None:
    with pytest.raises(D1Error, match="D1_ERROR"):
        await d1.prepare("CREATE TABLE _cf_mine (a)").run()
