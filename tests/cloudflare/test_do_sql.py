"""`CloudflareDurableObjectStorage` against the fake DO storage (real SQLite).

Raw mode hands the adapter a bare JsProxy of `ctx.storage`; wrapped mode hands it what a
Durable Object really gets: the SDK's `DurableObjectContext(...).storage` wrapper.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bindings.ports.errors import BindingError, BindingLimitError
from tests.fakes.js_runtime import FakeDurableObjectStorage, FakeJsRuntime, JSValue


@pytest.fixture
def fake_storage(js_runtime: FakeJsRuntime) -> FakeDurableObjectStorage:
    return js_runtime.do_storage()


@pytest.fixture
def storage(fake_storage: FakeDurableObjectStorage, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage

    adapter = CloudflareDurableObjectStorage(bind(fake_storage))
    adapter.sql.exec(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, weight REAL, raw BLOB)"
    )
    return adapter


def test_exec_binds_and_reads_rows_every_way(storage: Any) -> None:
    sql = storage.sql
    insert = sql.exec("INSERT INTO notes (body, weight, raw) VALUES (?, ?, ?)", "a", 0.5, b"\x01")
    assert insert.to_array() == [] and insert.rows_written == 1
    sql.exec("INSERT INTO notes (body, weight, raw) VALUES (?, ?, ?)", None, 2.0, None)

    rows = sql.exec("SELECT id, body, weight FROM notes ORDER BY id").to_array()
    # workerd returns int64 as double; Pyodide hands integral doubles back as int.
    assert rows == [{"id": 1, "body": "a", "weight": 0.5}, {"id": 2, "body": None, "weight": 2}]
    assert [r["id"] for r in sql.exec("SELECT id FROM notes ORDER BY id")] == [1, 2]
    assert sql.exec("SELECT COUNT(*) AS n FROM notes").one() == {"n": 2}


def test_one_requires_exactly_one_row(storage: Any) -> None:
    with pytest.raises(BindingError, match="no results"):
        storage.sql.exec("SELECT * FROM notes").one()


def test_transaction_statements_are_refused(storage: Any) -> None:
    with pytest.raises(BindingError, match="transactionSync"):
        storage.sql.exec("BEGIN TRANSACTION")


def test_transaction_sync_commits_and_returns_the_result(storage: Any) -> None:
    def write() -> int:
        storage.sql.exec("INSERT INTO notes (body) VALUES (?)", "x")
        storage.sql.exec("INSERT INTO notes (body) VALUES (?)", "y")
        return 2

    assert storage.transaction_sync(write) == 2
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM notes").one()["n"] == 2


def test_transaction_sync_rolls_back_and_reraises_the_original_error(storage: Any) -> None:
    class Boom(Exception):
        pass

    def write() -> None:
        storage.sql.exec("INSERT INTO notes (body) VALUES (?)", "x")
        raise Boom("policy said no")

    with pytest.raises(Boom, match="policy said no"):
        storage.transaction_sync(write)
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM notes").one()["n"] == 0


def test_booleans_are_refused_rather_than_stored_as_text(storage: Any) -> None:
    with pytest.raises(BindingError, match="bind 1 or 0"):
        storage.sql.exec("INSERT INTO notes (weight) VALUES (?)", True)


def test_limit_errors_are_limit_errors(storage: Any) -> None:
    placeholders = ",".join("?" * 101)
    with pytest.raises(BindingLimitError, match="too many SQL variables"):
        storage.sql.exec(f"SELECT {placeholders}", *range(101))


def test_nested_transactions_roll_back_only_the_inner_work(storage: Any) -> None:
    def inner() -> None:
        storage.sql.exec("INSERT INTO notes (body) VALUES ('inner')")
        raise KeyError("inner failed")

    def outer() -> None:
        storage.sql.exec("INSERT INTO notes (body) VALUES ('outer')")
        with pytest.raises(KeyError):
            storage.transaction_sync(inner)

    storage.transaction_sync(outer)
    assert storage.sql.exec("SELECT body FROM notes").to_array() == [{"body": "outer"}]


def test_sql_errors_become_binding_errors(storage: Any) -> None:
    with pytest.raises(BindingError, match="no such table"):
        storage.sql.exec("SELECT * FROM nowhere")


async def test_agent_runtime_schema_runs_on_the_adapter(
    storage: Any, fake_storage: FakeDurableObjectStorage
) -> None:
    from agent_runtime_do.storage import create_schema

    create_schema(storage.sql)
    create_schema(storage.sql)  # idempotent on every object start
    assert {"turn_state", "run_log", "procedural_workflows"} <= fake_storage.table_names()
