"""Behaviour specific to the local SQLite adapters (not part of the port contracts).

Persistence across reopening, the Durable Object registry, the choices the local adapters
make where Cloudflare's behaviour is undocumented (documented in each adapter module), and
the SQL statement splitter the engine and the migrations runner share.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Error
from bindings.ports.errors import BindingError, BindingLimitError
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.adapters.do_sql import (
    DurableObjectStorageRegistry,
    LocalDurableObjectStorage,
    split_sql_statements,
)
from local_runtime.adapters.kv import SqliteKV

# --- KV ----------------------------------------------------------------------------------------


async def test_kv_persists_across_reopening(tmp_path: Path) -> None:
    clock = FixedClock()
    first = SqliteKV(tmp_path / "kv.sqlite", clock=clock)
    await first.put("k", "v", expiration_ttl=120, metadata={"a": 1})
    first.close()
    second = SqliteKV(tmp_path / "kv.sqlite", clock=clock)
    try:
        got = await second.get_with_metadata("k")
        assert (got.value, got.metadata) == ("v", {"a": 1})
        clock.advance(120)
        assert await second.get("k") is None
    finally:
        second.close()


async def test_kv_rejects_metadata_that_is_not_json() -> None:
    kv = SqliteKV(":memory:")
    try:
        with pytest.raises(TypeError, match="JSON"):
            await kv.put("k", "v", metadata={"when": object()})
    finally:
        kv.close()


async def test_kv_rejects_a_garbage_cursor() -> None:
    kv = SqliteKV(":memory:")
    try:
        with pytest.raises(BindingLimitError, match="Invalid cursor"):
            await kv.list(cursor="%%%not-base64%%%")
    finally:
        kv.close()


async def test_kv_non_positive_limit_means_the_default_page() -> None:
    kv = SqliteKV(":memory:")
    try:
        for i in range(3):
            await kv.put(f"k{i}", "v")
        page = await kv.list(limit=0)
        assert [k.name for k in page.keys] == ["k0", "k1", "k2"]
    finally:
        kv.close()


# --- D1 ----------------------------------------------------------------------------------------


@pytest.fixture
async def d1() -> SqliteD1:
    return SqliteD1(":memory:")


async def test_d1_persists_across_reopening(tmp_path: Path) -> None:
    first = SqliteD1(tmp_path / "d1.sqlite")
    await first.batch(
        [first.prepare("CREATE TABLE t (a INTEGER)"), first.prepare("INSERT INTO t VALUES (7)")]
    )
    first.close()
    second = SqliteD1(tmp_path / "d1.sqlite")
    try:
        assert await second.prepare("SELECT a FROM t").first_value("a") == 7
    finally:
        second.close()


async def test_d1_limit_errors_are_also_binding_limit_errors(d1: SqliteD1) -> None:
    sql = "SELECT 1 IN (" + ", ".join("?" for _ in range(101)) + ") AS found"
    with pytest.raises(BindingLimitError, match="too many SQL variables"):
        await d1.prepare(sql).bind(*range(101)).first()
    with pytest.raises(BindingLimitError):
        await d1.prepare("SELECT '" + "x" * 100_001 + "'").first()


async def test_d1_integers_bind_as_integers_and_whole_floats_too(d1: SqliteD1) -> None:
    row = (
        await d1.prepare("SELECT typeof(?) AS i, typeof(?) AS f, typeof(?) AS r")
        .bind(5, 5.0, 5.5)
        .first()
    )
    assert row == {"i": "integer", "f": "integer", "r": "real"}


async def test_d1_dict_binding_fails_with_d1s_type_error(d1: SqliteD1) -> None:
    with pytest.raises(
        D1Error, match=re.escape("D1_TYPE_ERROR: Type 'object' not supported for value '[object")
    ):
        d1.prepare("SELECT ?").bind({"a": 1})  # type: ignore[arg-type]


async def test_d1_non_finite_floats_bind_null(d1: SqliteD1) -> None:
    row = (
        await d1.prepare("SELECT ? IS NULL AS a, ? IS NULL AS b")
        .bind(float("nan"), float("inf"))
        .first()
    )
    assert row == {"a": 1, "b": 1}


async def test_d1_byte_lists_bind_as_blobs(d1: SqliteD1) -> None:
    assert await d1.prepare("SELECT ? AS b").bind([1, 2, 255]).first_value("b") == [1, 2, 255]  # type: ignore[arg-type]
    with pytest.raises(D1Error, match="D1_TYPE_ERROR"):
        d1.prepare("SELECT ?").bind([1, 256])  # type: ignore[arg-type]


async def test_d1_duplicate_column_names_keep_the_last(d1: SqliteD1) -> None:
    assert await d1.prepare("SELECT 1 AS a, 2 AS a").first() == {"a": 2}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT sqlite_version()",
        "PRAGMA journal_mode = DELETE",
        "ATTACH DATABASE 'other.db' AS other",
        "CREATE TEMP TABLE scratch (a)",
        "CREATE VIRTUAL TABLE r USING rtree(id, x0, x1)",
    ],
)
async def test_d1_refuses_what_workerds_authorizer_refuses(d1: SqliteD1, sql: str) -> None:
    with pytest.raises(D1Error):
        await d1.prepare(sql).run()


async def test_d1_allows_the_documented_pragmas(d1: SqliteD1) -> None:
    await d1.prepare("CREATE TABLE t (a INTEGER, b TEXT)").run()
    info = await d1.prepare("PRAGMA table_info(t)").all()
    assert [row["name"] for row in info.results] == ["a", "b"]
    assert (await d1.prepare("PRAGMA foreign_keys").first()) == {"foreign_keys": 1}
    assert await d1.prepare("PRAGMA table_list").all()


async def test_d1_deferred_foreign_key_violation_fails_the_whole_batch(d1: SqliteD1) -> None:
    await d1.batch(
        [
            d1.prepare("CREATE TABLE p (id INTEGER PRIMARY KEY)"),
            d1.prepare(
                "CREATE TABLE c (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL REFERENCES p(id))"
            ),
        ]
    )
    with pytest.raises(D1Error, match="FOREIGN KEY constraint failed"):
        await d1.batch(
            [
                d1.prepare("PRAGMA defer_foreign_keys = on"),
                d1.prepare("INSERT INTO c (pid) VALUES (99)"),
            ]
        )
    assert await d1.prepare("SELECT COUNT(*) AS n FROM c").first_value("n") == 0


async def test_d1_batch_refuses_foreign_statements(d1: SqliteD1) -> None:
    other = SqliteD1(":memory:")
    try:
        with pytest.raises(TypeError):
            await d1.batch([other.prepare("SELECT 1")])
    finally:
        other.close()


# --- Durable Object SQL -----------------------------------------------------------------


def test_do_sql_refuses_booleans_and_bigints() -> None:
    storage = LocalDurableObjectStorage(":memory:")
    try:
        with pytest.raises(BindingError, match="bind 1 or 0"):
            storage.sql.exec("SELECT ?", True)
        with pytest.raises(BindingError, match="BigInt"):
            storage.sql.exec("SELECT ?", 2**53 + 1)
        assert storage.sql.exec("SELECT ? AS v", 2**53).one() == {"v": 2**53}
    finally:
        storage.close()


def test_do_sql_transaction_sync_refuses_async_functions() -> None:
    storage = LocalDurableObjectStorage(":memory:")
    storage.sql.exec("CREATE TABLE t (a INTEGER)")

    async def work() -> None:
        return None

    def starts_then_returns_coroutine() -> object:
        storage.sql.exec("INSERT INTO t VALUES (1)")
        return work()

    try:
        with pytest.raises(TypeError, match="synchronous"):
            storage.transaction_sync(starts_then_returns_coroutine)
        assert storage.sql.exec("SELECT COUNT(*) AS n FROM t").one() == {"n": 0}
    finally:
        storage.close()


def test_do_sql_limit_errors_are_binding_limit_errors() -> None:
    storage = LocalDurableObjectStorage(":memory:")
    try:
        with pytest.raises(BindingLimitError, match="too many SQL variables"):
            storage.sql.exec("SELECT 1 IN (" + ",".join("?" * 101) + ")", *range(101))
        with pytest.raises(BindingLimitError, match="string or blob too big"):
            storage.sql.exec("SELECT zeroblob(3000000)")
    finally:
        storage.close()


def test_do_sql_reports_its_size() -> None:
    storage = LocalDurableObjectStorage(":memory:")
    try:
        storage.sql.exec("CREATE TABLE t (a TEXT)")
        storage.sql.exec("INSERT INTO t VALUES (?)", "x" * 10_000)
        assert storage.sql.database_size > 10_000
    finally:
        storage.close()


def test_registry_gives_one_file_per_object_named_by_hash(tmp_path: Path) -> None:
    registry = DurableObjectStorageRegistry(tmp_path / "objects")
    try:
        a = registry.storage("tenant-a/sdr")
        assert registry.storage("tenant-a/sdr") is a
        b = registry.storage("tenant-b/sdr")
        a.sql.exec("CREATE TABLE t (v TEXT)")
        a.sql.exec("INSERT INTO t VALUES ('from a')")
        with pytest.raises(BindingError, match="no such table"):
            b.sql.exec("SELECT * FROM t")
        digest = hashlib.sha256(b"tenant-a/sdr").hexdigest()
        assert registry.path("tenant-a/sdr") == tmp_path / "objects" / f"{digest}.sqlite"
        assert (tmp_path / "objects" / f"{digest}.sqlite").exists()
    finally:
        registry.close()
    reopened = DurableObjectStorageRegistry(tmp_path / "objects")
    try:
        assert reopened.storage("tenant-a/sdr").sql.exec("SELECT v FROM t").one() == {"v": "from a"}
    finally:
        reopened.close()


async def test_registry_lock_serialises_one_object_only() -> None:
    registry = DurableObjectStorageRegistry(None)
    try:
        assert registry.lock("a") is registry.lock("a")
        assert registry.lock("a") is not registry.lock("b")
        order: list[str] = []

        async def call(name: str, tag: str) -> None:
            async with registry.lock(name):
                order.append(f"{tag}-start")
                await asyncio.sleep(0)
                order.append(f"{tag}-end")

        await asyncio.gather(call("a", "1"), call("a", "2"))
        assert order == ["1-start", "1-end", "2-start", "2-end"]
    finally:
        registry.close()


def test_registry_in_memory_mode_keeps_objects_apart() -> None:
    registry = DurableObjectStorageRegistry(None)
    try:
        assert registry.path("x") is None
        registry.storage("x").sql.exec("CREATE TABLE t (a)")
        registry.storage("y").sql.exec("CREATE TABLE t (a)")  # no clash: separate databases
    finally:
        registry.close()


# --- statement splitting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1; SELECT 2;", ["SELECT 1;", "SELECT 2;"]),
        ("SELECT ';'; SELECT \"a;b\" FROM [x;y]", ["SELECT ';';", 'SELECT "a;b" FROM [x;y]']),
        ("SELECT 'it''s; fine';", ["SELECT 'it''s; fine';"]),
        ("-- only; a comment\n", []),
        ("/* c; */ SELECT 1; ;; ", ["/* c; */ SELECT 1;"]),
        (
            "CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES (1); END; SELECT 2",
            [
                "CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES (1); END;",
                "SELECT 2",
            ],
        ),
    ],
)
def test_split_sql_statements(sql: str, expected: list[str]) -> None:
    assert list(split_sql_statements(sql)) == expected


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["SELECT", "SELECT DISTINCT"]),
            st.text(alphabet="ab;' -\n", max_size=10),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_split_recovers_statements_with_arbitrary_string_literals(
    parts: list[tuple[str, str]],
) -> None:
    statements = [f"{verb} '{text.replace(chr(39), chr(39) * 2)}';" for verb, text in parts]
    assert list(split_sql_statements("\n".join(statements))) == statements
