"""`CloudflareD1Database` against the fake D1 (real SQLite), in raw and wrapped mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bindings.ports.d1 import D1Error
from bindings.ports.errors import BindingLimitError
from tests.fakes.js_runtime import FakeD1Database, FakeJsRuntime, JSValue

SCHEMA = (
    "CREATE TABLE facts (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT, "
    "score REAL, active INTEGER, blob BLOB, UNIQUE (tenant_id, body))",
    "CREATE INDEX facts_by_tenant ON facts (tenant_id)",
)


@pytest.fixture
def fake_db(js_runtime: FakeJsRuntime) -> FakeD1Database:
    return js_runtime.d1()


@pytest.fixture
async def db(fake_db: FakeD1Database, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.d1 import CloudflareD1Database

    database = CloudflareD1Database(bind(fake_db))
    await database.batch([database.prepare(sql) for sql in SCHEMA])
    return database


async def insert(db: Any, *values: Any) -> Any:
    return (
        await db.prepare(
            "INSERT INTO facts (tenant_id, body, score, active, blob) VALUES (?, ?, ?, ?, ?)"
        )
        .bind(*values)
        .run()
    )


async def test_binds_every_value_type_including_none(db: Any) -> None:
    written = await insert(db, "t1", "likes tea", 0.75, True, b"\x00\x01")
    assert written.meta.changes == 1
    await insert(db, "t1", None, None, False, None)
    rows = (
        await db.prepare(
            "SELECT body, score, active, blob FROM facts WHERE tenant_id = ? ORDER BY id"
        )
        .bind("t1")
        .all()
    ).results
    assert rows[0] == {"body": "likes tea", "score": 0.75, "active": 1, "blob": [0, 1]}
    assert rows[1] == {"body": None, "score": None, "active": 0, "blob": None}


async def test_first_and_first_value(db: Any) -> None:
    await insert(db, "t1", "a", 1.0, 1, None)
    statement = db.prepare("SELECT id, body FROM facts WHERE tenant_id = ?")
    assert await statement.bind("t1").first() == {"id": 1, "body": "a"}
    assert await statement.bind("t2").first() is None
    assert await statement.bind("t1").first_value("body") == "a"
    assert await statement.bind("t2").first_value("body") is None


async def test_batch_is_all_or_nothing(db: Any) -> None:
    await insert(db, "t1", "a", 1.0, 1, None)
    sql = "INSERT INTO facts (tenant_id, body) VALUES (?, ?)"
    with pytest.raises(D1Error, match="UNIQUE"):
        await db.batch([db.prepare(sql).bind("t1", "b"), db.prepare(sql).bind("t1", "a")])
    count = await db.prepare("SELECT COUNT(*) AS n FROM facts").first_value("n")
    assert count == 1
    results = await db.batch([db.prepare(sql).bind("t1", "c"), db.prepare(sql).bind("t1", "d")])
    assert [r.meta.changes for r in results] == [1, 1]


async def test_sql_errors_become_d1_errors(db: Any) -> None:
    with pytest.raises(D1Error, match="D1_ERROR"):
        await db.prepare("SELECT * FROM missing_table").all()


async def test_limit_errors_are_d1_and_limit_errors(db: Any) -> None:
    placeholders = ",".join("?" * 101)
    statement = db.prepare(f"SELECT {placeholders}").bind(*range(101))
    with pytest.raises(D1Error, match="too many SQL variables") as caught:
        await statement.all()
    assert isinstance(caught.value, BindingLimitError)


async def test_integers_beyond_2_53_travel_as_bigint_which_d1_refuses(db: Any) -> None:
    with pytest.raises(D1Error, match="D1_TYPE_ERROR: Type 'bigint'"):
        db.prepare("SELECT ?").bind(2**53 + 1)
    assert await db.prepare("SELECT ? AS v").bind(2**53 - 1).first_value("v") == 2**53 - 1


async def test_an_empty_batch_is_refused_by_d1(db: Any) -> None:
    with pytest.raises(D1Error):
        await db.batch([])


async def test_raw_d1_rejects_undefined_like_the_real_one(js_runtime: FakeJsRuntime) -> None:
    """Fidelity: a raw bind of Python None sends `undefined`, which D1 refuses."""
    from pyodide.ffi import JsException, jsnull

    raw = js_runtime.proxy(js_runtime.d1()).prepare("SELECT ? AS v")
    with pytest.raises(JsException, match="D1_TYPE_ERROR"):
        raw.bind(None)
    assert (await raw.bind(jsnull).first()).to_py() == {"v": jsnull}


async def test_none_binds_fail_on_python_3_12() -> None:
    """Pyodide 0.26 has no jsnull: None cannot become NULL (documented D1 limitation)."""
    with FakeJsRuntime(pyodide_version="0.26.0a2") as runtime:
        from bindings.cloudflare.d1 import CloudflareD1Database

        db = CloudflareD1Database(runtime.proxy(runtime.d1()))
        with pytest.raises(D1Error, match="D1_TYPE_ERROR"):
            db.prepare("SELECT ?").bind(None)
