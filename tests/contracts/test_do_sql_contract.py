"""Contract suite for Durable Object SQL storage (`bindings.ports.do_sql`).

Sources for the expected behaviour: cloudflare/workerd `src/workerd/api/sql.c++` (cursor,
`one()` texts, int64 -> double, transaction refusal, `_cf_` names) and
`src/workerd/util/sqlite.c++` (several statements per exec, only the last with
parameters; limits; bindings of JS numbers as doubles). Errors must be
`bindings.ports.errors.BindingError`s carrying workerd's text.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings.ports.do_sql import DurableObjectStorage
from bindings.ports.errors import BindingError
from tests.contracts.conftest import DOSqlFactory

TRANSACTION_REFUSED = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements."
)


def _items(storage: DurableObjectStorage) -> None:
    storage.sql.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")


def _names(storage: DurableObjectStorage) -> list[str]:
    return [row["name"] for row in storage.sql.exec("SELECT name FROM items ORDER BY id")]


class Boom(Exception):
    pass


# --- cursors ---------------------------------------------------------------------------------


def test_exec_returns_rows_as_dicts(do_storage: DurableObjectStorage) -> None:
    _items(do_storage)
    do_storage.sql.exec("INSERT INTO items (name) VALUES (?), (?)", "a", "b")
    rows = do_storage.sql.exec("SELECT id, name FROM items ORDER BY id").to_array()
    assert rows == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_a_cursor_is_consumed_once(do_storage: DurableObjectStorage) -> None:
    _items(do_storage)
    do_storage.sql.exec("INSERT INTO items (name) VALUES ('a'), ('b'), ('c')")
    cursor = do_storage.sql.exec("SELECT name FROM items ORDER BY id")
    iterator = iter(cursor)
    assert next(iterator) == {"name": "a"}
    assert cursor.to_array() == [{"name": "b"}, {"name": "c"}]
    assert cursor.to_array() == []


def test_one_returns_exactly_one_row(do_storage: DurableObjectStorage) -> None:
    assert do_storage.sql.exec("SELECT 42 AS answer").one() == {"answer": 42}


def test_one_refuses_zero_rows(do_storage: DurableObjectStorage) -> None:
    _items(do_storage)
    with pytest.raises(
        BindingError,
        match=re.escape("Expected exactly one result from SQL query, but got no results."),
    ):
        do_storage.sql.exec("SELECT * FROM items").one()


def test_one_refuses_several_rows(do_storage: DurableObjectStorage) -> None:
    with pytest.raises(
        BindingError,
        match=re.escape("Expected exactly one result from SQL query, but got multiple results."),
    ):
        do_storage.sql.exec("SELECT 1 UNION ALL SELECT 2").one()


def test_rows_written_counts_changed_rows(do_storage: DurableObjectStorage) -> None:
    _items(do_storage)
    cursor = do_storage.sql.exec("INSERT INTO items (name) VALUES ('a'), ('b'), ('c')")
    cursor.to_array()
    assert cursor.rows_written >= 3
    assert len(do_storage.sql.exec("SELECT * FROM items").to_array()) == 3


# --- several statements ---------------------------------------------------------------------


def test_several_statements_run_and_the_last_one_returns_rows(
    do_storage: DurableObjectStorage,
) -> None:
    cursor = do_storage.sql.exec(
        "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);"
        "SELECT SUM(a) AS total FROM t WHERE a > ?",
        0,
    )
    assert cursor.one() == {"total": 3}


def test_only_the_last_statement_may_take_parameters(do_storage: DurableObjectStorage) -> None:
    do_storage.sql.exec("CREATE TABLE t (a INTEGER)")
    with pytest.raises(
        BindingError,
        match=re.escape(
            "When executing multiple SQL statements in a single call, only the last statement "
            "can have parameters."
        ),
    ):
        do_storage.sql.exec("INSERT INTO t VALUES (?); SELECT 1", 5)


def test_semicolons_inside_strings_and_triggers_do_not_split(
    do_storage: DurableObjectStorage,
) -> None:
    do_storage.sql.exec(
        "CREATE TABLE log (msg TEXT);"
        "CREATE TABLE t (a TEXT);"
        "CREATE TRIGGER t_log AFTER INSERT ON t BEGIN "
        "  INSERT INTO log VALUES ('saw; ' || new.a); "
        "END;"
    )
    do_storage.sql.exec("INSERT INTO t VALUES ('x;y')")
    assert do_storage.sql.exec("SELECT msg FROM log").one() == {"msg": "saw; x;y"}


@pytest.mark.parametrize("sql", ["", "  ", "-- just a comment", "SELECT 1;;", "SELECT 1; -- note"])
def test_empty_statements_are_errors(do_storage: DurableObjectStorage, sql: str) -> None:
    with pytest.raises(BindingError, match=re.escape("SQL code did not contain a statement.")):
        do_storage.sql.exec(sql)


def test_leading_comments_and_trailing_whitespace_are_fine(
    do_storage: DurableObjectStorage,
) -> None:
    assert do_storage.sql.exec("-- why\n/* how */ SELECT 1 AS one; \n\t").one() == {"one": 1}


def test_wrong_number_of_parameters_is_an_error(do_storage: DurableObjectStorage) -> None:
    with pytest.raises(
        BindingError, match=re.escape("Wrong number of parameter bindings for SQL query.")
    ):
        do_storage.sql.exec("SELECT ?", 1, 2)


# --- refused statements -------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "BEGIN",
        "BEGIN TRANSACTION",
        "begin immediate",
        "COMMIT",
        "END TRANSACTION",
        "ROLLBACK",
        "SAVEPOINT sp",
        "RELEASE sp",
        "ROLLBACK TO sp",
        "SELECT 1; BEGIN",
        "/* sneaky */ BEGIN",
    ],
)
def test_transaction_statements_are_refused(do_storage: DurableObjectStorage, sql: str) -> None:
    with pytest.raises(BindingError, match=re.escape(TRANSACTION_REFUSED)):
        do_storage.sql.exec(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE _cf_mine (a INTEGER)",
        "CREATE INDEX _cf_idx ON t (a)",
        "SELECT * FROM _cf_KV",
    ],
)
def test_cf_prefixed_names_are_reserved(do_storage: DurableObjectStorage, sql: str) -> None:
    do_storage.sql.exec("CREATE TABLE t (a INTEGER)")
    with pytest.raises(BindingError):
        do_storage.sql.exec(sql)


def test_a_name_merely_containing_cf_is_allowed(do_storage: DurableObjectStorage) -> None:
    do_storage.sql.exec("CREATE TABLE my_cf_things (id INTEGER)")
    assert do_storage.sql.exec("SELECT COUNT(*) AS n FROM my_cf_things").one() == {"n": 0}


def test_more_than_one_hundred_bound_parameters_fail(do_storage: DurableObjectStorage) -> None:
    sql = "SELECT 7 IN (" + ", ".join("?" for _ in range(101)) + ") AS found"
    with pytest.raises(BindingError, match="too many SQL variables"):
        do_storage.sql.exec(sql, *range(101))
    ok = "SELECT 7 IN (" + ", ".join("?" for _ in range(100)) + ") AS found"
    assert do_storage.sql.exec(ok, *range(100)).one() == {"found": 1}


def test_sql_errors_carry_sqlites_message(do_storage: DurableObjectStorage) -> None:
    with pytest.raises(BindingError, match="no such table: missing"):
        do_storage.sql.exec("SELECT * FROM missing")


# --- values ------------------------------------------------------------------------------------


def test_numbers_arrive_as_javascript_numbers(do_storage: DurableObjectStorage) -> None:
    row = do_storage.sql.exec(
        "SELECT 3.0 AS whole_real, 2.5 AS half, 42 AS int, 1152921504606846976 AS huge"
    ).one()
    assert row["whole_real"] == 3 and type(row["whole_real"]) is int
    assert row["half"] == 2.5
    assert row["int"] == 42 and type(row["int"]) is int
    # int64 -> double: 2**60 is beyond Pyodide's int range, so it arrives as a float.
    assert type(row["huge"]) is float


def test_numbers_bind_as_doubles(do_storage: DurableObjectStorage) -> None:
    # workerd binds every JS number with sqlite3_bind_double: a TEXT column sees "5.0".
    do_storage.sql.exec("CREATE TABLE t (label TEXT, n INTEGER)")
    do_storage.sql.exec("INSERT INTO t VALUES (?, ?)", 5, 5)
    assert do_storage.sql.exec("SELECT label, n FROM t").one() == {"label": "5.0", "n": 5}


def test_none_text_and_bytes_round_trip(do_storage: DurableObjectStorage) -> None:
    do_storage.sql.exec("CREATE TABLE t (a, b, c)")
    do_storage.sql.exec("INSERT INTO t VALUES (?, ?, ?)", None, "naïve ☃", b"\x00\xff")
    row = do_storage.sql.exec("SELECT a, b, c, typeof(c) AS kind FROM t").one()
    assert row["a"] is None
    assert row["b"] == "naïve ☃"
    assert bytes(row["c"]) == b"\x00\xff"
    assert row["kind"] == "blob"


def test_fts5_works(do_storage: DurableObjectStorage) -> None:
    do_storage.sql.exec("CREATE VIRTUAL TABLE notes USING fts5(body)")
    do_storage.sql.exec("INSERT INTO notes VALUES (?), (?)", "alpha beta", "gamma delta")
    rows = do_storage.sql.exec("SELECT body FROM notes WHERE notes MATCH ?", "gamma").to_array()
    assert rows == [{"body": "gamma delta"}]


# --- transaction_sync ---------------------------------------------------------------------


def test_transaction_sync_commits_and_returns_the_result(do_storage: DurableObjectStorage) -> None:
    _items(do_storage)

    def work() -> int:
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('a')")
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('b')")
        return 2

    assert do_storage.transaction_sync(work) == 2
    assert _names(do_storage) == ["a", "b"]


def test_transaction_sync_rolls_back_everything_on_error(do_storage: DurableObjectStorage) -> None:
    _items(do_storage)
    do_storage.sql.exec("INSERT INTO items (name) VALUES ('kept')")

    def work() -> None:
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('lost')")
        do_storage.sql.exec("UPDATE items SET name = name || '!'")
        raise Boom()

    with pytest.raises(Boom):
        do_storage.transaction_sync(work)
    assert _names(do_storage) == ["kept"]


def test_a_failing_statement_inside_transaction_sync_rolls_back_earlier_ones(
    do_storage: DurableObjectStorage,
) -> None:
    _items(do_storage)

    def work() -> None:
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('first')")
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('first')")  # UNIQUE violation

    with pytest.raises(BindingError, match="UNIQUE constraint failed"):
        do_storage.transaction_sync(work)
    assert _names(do_storage) == []


def test_nested_transaction_sync_rolls_back_only_the_inner_work(
    do_storage: DurableObjectStorage,
) -> None:
    _items(do_storage)

    def inner() -> None:
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('inner')")
        raise Boom()

    def outer() -> None:
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('outer-1')")
        with pytest.raises(Boom):
            do_storage.transaction_sync(inner)
        do_storage.sql.exec("INSERT INTO items (name) VALUES ('outer-2')")

    do_storage.transaction_sync(outer)
    assert _names(do_storage) == ["outer-1", "outer-2"]


def test_outer_failure_undoes_a_completed_inner_transaction(
    do_storage: DurableObjectStorage,
) -> None:
    _items(do_storage)

    def outer() -> None:
        do_storage.transaction_sync(
            lambda: do_storage.sql.exec("INSERT INTO items (name) VALUES ('inner')")
        )
        raise Boom()

    with pytest.raises(Boom):
        do_storage.transaction_sync(outer)
    assert _names(do_storage) == []


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    names=st.lists(
        st.text(alphabet="abcdef", min_size=1, max_size=4), min_size=1, max_size=10, unique=True
    ),
    fail_after=st.one_of(st.none(), st.integers(min_value=0, max_value=9)),
)
def test_transaction_sync_is_all_or_nothing(
    make_do_storage: DOSqlFactory, names: list[str], fail_after: int | None
) -> None:
    with make_do_storage() as storage:
        _items(storage)
        storage.sql.exec("INSERT INTO items (name) VALUES ('before')")

        def work() -> None:
            for position, name in enumerate(names):
                if position == fail_after:
                    raise Boom()
                storage.sql.exec("INSERT INTO items (name) VALUES (?)", name)

        failing = fail_after is not None and fail_after < len(names)
        if failing:
            with pytest.raises(Boom):
                storage.transaction_sync(work)
            assert _names(storage) == ["before"]
        else:
            storage.transaction_sync(work)
            assert _names(storage) == ["before", *names]
