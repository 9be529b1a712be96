"""The Durable Object SQL adapter over a REAL SQLite-backed Durable Object (workerd), in
real Pyodide, raw and through the SDK's `DurableObjectContext` (wrapped `ctx.storage`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import harness_js
from workers import DurableObject

from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage
from bindings.ports.errors import BindingError


class ProbeObject(DurableObject):  # type: ignore[misc]
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)


def storages() -> list[tuple[str, Any, CloudflareDurableObjectStorage]]:
    """(mode, JS storage, adapter): raw `ctx.storage`, and the SDK-wrapped one."""
    raw_js = harness_js.newStorage()
    wrapped_js = harness_js.newStorage()
    obj = ProbeObject(harness_js.newDurableObjectState(wrapped_js), harness_js.env)
    return [
        ("raw", raw_js, CloudflareDurableObjectStorage(raw_js)),
        ("wrapped", wrapped_js, CloudflareDurableObjectStorage(obj.ctx.storage)),
    ]


def test_exec_binds_and_reads_back_workerds_values() -> None:
    for mode, _js, storage in storages():
        sql = storage.sql
        sql.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, b BLOB, s TEXT)")
        sql.exec("INSERT INTO t (n, b, s) VALUES (9007199254740993, ?, ?)", b"\x00\xff", None)
        [row] = sql.exec("SELECT n, b, s FROM t").to_array()
        # int64 comes back as a double (2^53 + 1 -> 2^53); a BLOB as bytes-like; NULL None.
        assert row["n"] == 2**53 and row["s"] is None, (mode, row)
        assert bytes(row["b"]) == b"\x00\xff", (mode, row)
        assert sql.exec("SELECT count(*) AS c FROM t").one() == {"c": 1}
        try:
            # A Python int beyond 2^53 reaches JS as a BigInt, which workerd's SQL refuses.
            sql.exec("SELECT ?", 2**60)
        except BindingError as exc:
            assert "BigInt" in str(exc), str(exc)
        else:
            raise AssertionError(f"{mode}: a BigInt was bound")
        try:
            sql.exec("SELECT * FROM missing_table")
        except BindingError as exc:
            assert "no such table" in str(exc), str(exc)
        else:
            raise AssertionError(f"{mode}: a bad query passed")


def test_transaction_sync_commits_on_return_and_rolls_back_on_raise() -> None:
    for mode, _js, storage in storages():
        storage.sql.exec("CREATE TABLE t (k TEXT PRIMARY KEY)")

        def add(*keys: str, storage: CloudflareDurableObjectStorage = storage) -> int:
            for key in keys:
                storage.sql.exec("INSERT INTO t (k) VALUES (?)", key)
            return len(keys)

        assert storage.transaction_sync(lambda: add("a", "b")) == 2, mode

        def add_then_fail() -> None:
            add("c")
            raise ValueError("caller changed its mind")

        try:
            storage.transaction_sync(add_then_fail)
        except ValueError as exc:
            assert "changed its mind" in str(exc)
        else:
            raise AssertionError("the exception was swallowed")
        keys = [row["k"] for row in storage.sql.exec("SELECT k FROM t ORDER BY k").to_array()]
        assert keys == ["a", "b"], (mode, keys)


def test_transaction_sync_releases_the_proxy_of_its_callback() -> None:
    # The SDK's wrapper turns a Python callable argument into a create_proxy() proxy that
    # nobody destroys: one leaked proxy (and its closure) per transaction. The adapter must
    # hand JS a proxy it destroys itself once the transaction is over.
    for mode, js_storage, storage in storages():
        storage.sql.exec("CREATE TABLE t (k TEXT)")
        sql = storage.sql
        storage.transaction_sync(lambda sql=sql: sql.exec("INSERT INTO t VALUES ('x')").to_array())
        released = list(harness_js.transactionCallbacksReleased(js_storage))
        assert released == [True], f"{mode}: callback proxies released: {released}"


def test_a_write_is_done_by_exec_even_if_its_cursor_is_never_read() -> None:
    # workerd steps a statement to its first row inside exec() (util/sqlite.c++,
    # Query::init -> nextRow): an INSERT/UPDATE/DELETE has run, and is counted, before anyone
    # reads the cursor. The core relies on it (fire-and-forget `sql.exec("INSERT ...")`).
    for mode, _js, storage in storages():
        sql = storage.sql
        sql.exec("CREATE TABLE t (k TEXT)")
        unread = sql.exec("INSERT INTO t VALUES ('a'), ('b')")
        assert unread.rows_written == 2, mode
        assert sql.exec("SELECT count(*) AS n FROM t").one() == {"n": 2}, mode
        # RETURNING: every change is made by the first step, before any row is read.
        returning = sql.exec("UPDATE t SET k = k || '!' RETURNING k")
        assert returning.rows_written == 2, mode
        assert sql.exec("SELECT count(*) AS n FROM t WHERE k LIKE '%!'").one() == {"n": 2}
        assert sorted(row["k"] for row in returning) == ["a!", "b!"], mode


def test_an_error_in_a_later_row_is_raised_by_reading_not_by_exec() -> None:
    # Row 2 makes json_extract fail. exec() only computes row 1, so it succeeds; the read
    # that reaches row 2 raises (as workerd does: found inside workerd, "malformed JSON").
    # The eager model raised it from exec (failed before).
    for mode, _js, storage in storages():
        sql = storage.sql
        sql.exec("CREATE TABLE j (v TEXT)")
        sql.exec("""INSERT INTO j VALUES ('{"a": 1}'), ('not json')""")
        for read in ("to_array", "iterate"):
            cursor = sql.exec("SELECT json_extract(v, '$.a') AS a FROM j ORDER BY rowid")
            try:
                if read == "to_array":
                    cursor.to_array()
                else:
                    list(cursor)
            except BindingError as exc:
                assert "malformed JSON" in str(exc), (mode, read, str(exc))
            else:
                raise AssertionError(f"{mode}/{read}: the bad row was read without an error")


def test_one_refuses_zero_or_several_rows_with_workerds_text() -> None:
    for mode, _js, storage in storages():
        sql = storage.sql
        sql.exec("CREATE TABLE t (x INTEGER)")
        sql.exec("INSERT INTO t VALUES (1), (2)")
        assert sql.exec("SELECT x FROM t WHERE x = 2").one() == {"x": 2}, mode
        for where, text in (("x > 5", "got no results"), ("x > 0", "got multiple results")):
            try:
                sql.exec(f"SELECT x FROM t WHERE {where}").one()
            except BindingError as exc:
                assert text in str(exc), (mode, str(exc))
            else:
                raise AssertionError(f"{mode}: one() accepted {where}")


def refill(storage: CloudflareDurableObjectStorage, kept: str) -> list[Any]:
    """What `replace_all` finds (the new, empty database), then `kept` written into it."""
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf%'"
    before = storage.sql.exec(tables).to_array()
    storage.sql.exec("CREATE TABLE t (k TEXT PRIMARY KEY)")
    storage.sql.exec("INSERT INTO t VALUES (?)", kept)
    return before


async def test_replace_all_drops_every_table_and_keeps_what_fill_writes() -> None:
    # The subject erase's rebuild of every instance (issues 26, 47).
    for mode, _js, storage in storages():
        storage.sql.exec("CREATE TABLE t (k TEXT PRIMARY KEY)")
        storage.sql.exec("INSERT INTO t VALUES ('subject-ada'), ('kept')")
        kept = storage.sql.exec("SELECT k FROM t WHERE k = 'kept'").one()["k"]
        assert await storage.replace_all(partial(refill, storage, kept)) == [], mode
        assert storage.sql.exec("SELECT k FROM t").to_array() == [{"k": "kept"}], mode
