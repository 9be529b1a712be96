"""Differential tests: the local SQL adapters against workerd, statement by statement.

The contract suites check rules; these run one script of statements on the local adapter
and on workerd (through Miniflare) and compare what Python gets back — rows with their
Python types, or the error text. Every difference that remains is pinned by its own test
below, with the reason it is accepted, so a change on either side is noticed:

* workerd appends " at offset N" to some SQLite errors; Python's sqlite3 does not expose
  the offset (`sqlite3_error_offset`), so the local text lacks it (otherwise identical).
  The local text may also add a hint in parentheses after workerd's (for example what to
  do with an integer beyond 2^53);
* DO SQL: workerd stores a JS boolean as the text 'true'/'false' and stringifies arrays
  and objects ("1,2", "[object Object]"); the local adapter refuses them instead, so code
  that would store such garbage on Cloudflare fails in tests rather than silently working;
* DO SQL BLOBs reach Python on Cloudflare as a `memoryview` (Pyodide's conversion of an
  ArrayBuffer); the local adapter returns `bytes`. They compare equal; only bytes-only
  methods (`.decode()`) would tell them apart;
* D1 on Miniflare binds every JS number as a REAL (its D1 simulator runs on DO SQL, which
  binds numbers with sqlite3_bind_double), so `typeof(?)` of a bound 3 is 'real'; D1's
  documentation says integers bind as INTEGER, which the local adapter follows. Stored in
  an INTEGER column (or a STRICT table) both end up INTEGER;
* D1 `exec()` on Miniflare reports any failure as "Error in line 1: <first line>"; the
  local adapter names the failing line (real D1 runs the lines one by one);
* KV: a malformed list cursor gives an empty final page on Miniflare and an error locally.

KV is otherwise covered by the contract suite; the KV tests here pin how metadata numbers
and fractional TTLs cross JavaScript, which the local adapter reproduces.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bindings.ports.clock import SystemClock
from bindings.ports.d1 import D1Database, D1Error
from bindings.ports.do_sql import DurableObjectStorage
from bindings.ports.errors import BindingError, BindingLimitError
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.adapters.do_sql import LocalDurableObjectStorage
from local_runtime.adapters.kv import SqliteKV
from tests.contracts.conftest import KVHarness
from tests.miniflare.adapters import MiniflareD1, MiniflareDurableObjectStorage

_OFFSET = re.compile(r" at offset \d+")

# One script, run in order on both sides (later statements see earlier ones' effects).
SCRIPT: list[tuple[str, list[Any]]] = [
    (
        "CREATE TABLE p (id INTEGER PRIMARY KEY, u TEXT UNIQUE, n TEXT NOT NULL, "
        "c INTEGER CHECK (c > 0), r REAL, a ANY, b BLOB)",
        [],
    ),
    ("CREATE TABLE ch (pid INTEGER REFERENCES p(id))", []),
    ("CREATE TABLE s (i INTEGER, t TEXT, r REAL) STRICT", []),
    ("CREATE INDEX p_by_n ON p (n, c DESC)", []),
    ("INSERT INTO p (id, u, n, c, r, a, b) VALUES (1, 'a', 'x', 1, 2.5, 7, x'00ff')", []),
    ("INSERT INTO p (id, u, n, c) VALUES (?, ?, ?, ?) RETURNING id, u", [2, "b", "y", 3]),
    ("SELECT id, u, n, c, r, a, b, typeof(b) AS tb FROM p ORDER BY id", []),
    # Constraint failures: message and result codes.
    ("INSERT INTO p (id, u, n, c) VALUES (1, 'z', 'x', 1)", []),
    ("INSERT INTO p (id, u, n, c) VALUES (9, 'a', 'x', 1)", []),
    ("INSERT INTO p (id, u, n, c) VALUES (9, 'q', NULL, 1)", []),
    ("INSERT INTO p (id, u, n, c) VALUES (9, 'q', 'x', 0)", []),
    ("INSERT INTO ch VALUES (99)", []),
    ("INSERT INTO s (i) VALUES ('text')", []),
    ("INSERT INTO s (i, t, r) VALUES (?, ?, ?) RETURNING i, typeof(i) AS ti, t, r", [3, "3", 1]),
    # Numbers the way Pyodide hands them over.
    ("SELECT 3.0 AS whole, 2.5 AS half, 9007199254740993 AS big, 1e300 * 1e300 AS inf", []),
    ("SELECT -0.0 AS neg_zero, 1152921504606846976 AS huge, 0.1 + 0.2 AS sum", []),
    ("SELECT ? AS x", [2**53]),
    ("SELECT ? AS x", [2**53 + 1]),
    ("SELECT ? AS x", [-(2**53) - 1]),
    ("SELECT ? AS x", [1.5]),
    ("SELECT ? AS x", [None]),
    ("SELECT ? AS x, length(?) AS n", ["héllo ☕", "héllo ☕"]),
    ("SELECT ? AS x, typeof(?) AS t", [b"\x00\x01", b"\x00\x01"]),
    # Shapes.
    ("SELECT 1 AS a, 2 AS a", []),
    ("SELECT * FROM p WHERE id = -1", []),
    ("INSERT INTO p (id, u, n, c) VALUES (3, 'c', 'z', 1); SELECT count(*) AS k FROM p", []),
    ("SELECT 1 AS one; SELECT ? AS two", [2]),
    ("SELECT json_extract(?, '$.a.b') AS j, json_array(1, 'x') AS arr", ['{"a": {"b": [1]}}']),
    # Refusals: workerd's authorizer, limits and transaction rules.
    ("SELECT ?; SELECT ?", [1, 2]),
    ("SELECT ?", []),
    ("SELECT ? AS x", [1, 2]),
    (";", []),
    ("BEGIN", []),
    ("SAVEPOINT sp", []),
    ("COMMIT", []),
    ("CREATE TABLE _cf_mine (x)", []),
    ("ATTACH DATABASE ':memory:' AS other", []),
    ("CREATE TEMP TABLE tmp (x)", []),
    ("PRAGMA journal_mode", []),
    ("PRAGMA foreign_keys", []),
    # No secure delete and no VACUUM of any kind (agent_runtime_do.storage overwrites before
    # it deletes because of this).
    ("PRAGMA secure_delete = ON", []),
    ("PRAGMA secure_delete", []),
    ("PRAGMA auto_vacuum = FULL", []),
    ("PRAGMA incremental_vacuum", []),
    ("VACUUM", []),
    ("SELECT " + ", ".join("?" for _ in range(101)), list(range(101))),
    ("SELECT 1 -- " + "x" * 100_001, []),
    ("SELECT * FROM p WHERE u LIKE ?", ["x" * 51]),
    ("SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6", []),
    ("SELECT * FROM no_such_table", []),
    # FTS5 (used by the semantic tier).
    ("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize = 'porter unicode61')", []),
    ("INSERT INTO docs (rowid, body) VALUES (1, 'Running quickly'), (2, 'walked slowly')", []),
    ("SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs)", ['"run"']),
]


def _plain(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _outcome_do(storage: DurableObjectStorage, sql: str, params: list[Any]) -> Any:
    try:
        rows = storage.sql.exec(sql, *params).to_array()
    except BindingError as exc:
        return ("error", _OFFSET.sub("", str(exc)))
    return ("rows", [{k: _plain(v) for k, v in row.items()} for row in rows])


async def _outcome_d1(db: D1Database, sql: str, params: list[Any]) -> Any:
    try:
        statement = db.prepare(sql)
        if params:
            statement = statement.bind(*params)
        result = await statement.all()
    except D1Error as exc:
        return ("error", _OFFSET.sub("", str(exc)))
    return ("rows", result.results)


def _same(local: Any, workerd: Any) -> bool:
    if local[0] == workerd[0] == "error":
        # The local text may add a hint in parentheses after workerd's own text.
        return bool(local[1] == workerd[1] or local[1].startswith(workerd[1] + " ("))
    # Equal including Python types (3 is not 3.0 here: Pyodide decides which one you get).
    return json.dumps(local, default=repr) == json.dumps(workerd, default=repr) and all(
        type(a) is type(b) for a, b in zip(_leaves(local), _leaves(workerd), strict=True)
    )


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


@pytest.fixture
def local_storage() -> Iterator[LocalDurableObjectStorage]:
    storage = LocalDurableObjectStorage(":memory:")
    yield storage
    storage.close()


@pytest.fixture
async def local_d1() -> AsyncIterator[SqliteD1]:
    db = SqliteD1(":memory:")
    yield db
    db.close()


def test_do_sql_script_gives_the_same_results_locally_and_on_workerd(
    local_storage: LocalDurableObjectStorage, mf_do_storage: MiniflareDurableObjectStorage
) -> None:
    differences = []
    for sql, params in SCRIPT:
        local = _outcome_do(local_storage, sql, params)
        workerd = _outcome_do(mf_do_storage, sql, params)
        if not _same(local, workerd):
            differences.append((sql[:80], local, workerd))
    assert differences == []


# D1 binds numbers differently on Miniflare's simulator (see the module docstring), so
# only statements whose results do not depend on the storage class of a bound number.
D1_SCRIPT = [
    (sql, params)
    for sql, params in SCRIPT
    if not sql.startswith(("SELECT ? AS x, typeof", "SELECT ?; SELECT ?", ";"))
]


async def test_d1_script_gives_the_same_results_locally_and_on_workerd(
    local_d1: SqliteD1, mf_d1: MiniflareD1
) -> None:
    differences = []
    for sql, params in D1_SCRIPT:
        local = await _outcome_d1(local_d1, sql, params)
        workerd = await _outcome_d1(mf_d1, sql, params)
        if not _same(local, workerd):
            differences.append((sql[:80], local, workerd))
    assert differences == []


# --- the differences that remain, pinned ----------------------------------------------------


def test_error_texts_differ_only_by_the_offset_workerd_adds(
    local_storage: LocalDurableObjectStorage, mf_do_storage: MiniflareDurableObjectStorage
) -> None:
    with pytest.raises(BindingError) as on_workerd:
        mf_do_storage.sql.exec("SELEC 1")
    with pytest.raises(BindingError) as locally:
        local_storage.sql.exec("SELEC 1")
    assert str(on_workerd.value) == 'near "SELEC": syntax error at offset 0: SQLITE_ERROR'
    assert str(locally.value) == 'near "SELEC": syntax error: SQLITE_ERROR'


@pytest.mark.parametrize(
    ("value", "stored_on_workerd"),
    [(True, "true"), (False, "false"), ([1, 2], "1,2"), ({"a": 1}, "[object Object]")],
)
def test_do_sql_values_workerd_stringifies_are_refused_locally(
    local_storage: LocalDurableObjectStorage,
    mf_do_storage: MiniflareDurableObjectStorage,
    value: Any,
    stored_on_workerd: str,
) -> None:
    row = mf_do_storage.sql.exec("SELECT ? AS v, typeof(?) AS t", value, value).one()
    assert row == {"v": stored_on_workerd, "t": "text"}
    with pytest.raises(BindingError):
        local_storage.sql.exec("SELECT ? AS v", value)


def test_do_sql_blobs_are_memoryviews_on_workerd_and_bytes_locally(
    local_storage: LocalDurableObjectStorage, mf_do_storage: MiniflareDurableObjectStorage
) -> None:
    on_workerd = mf_do_storage.sql.exec("SELECT x'00ff' AS b").one()["b"]
    local = local_storage.sql.exec("SELECT x'00ff' AS b").one()["b"]
    assert isinstance(on_workerd, memoryview)
    assert isinstance(local, bytes)
    assert on_workerd == local == b"\x00\xff"


async def test_d1_bound_numbers_are_real_on_miniflare_and_integer_locally(
    local_d1: SqliteD1, mf_d1: MiniflareD1
) -> None:
    query = "SELECT ? AS v, typeof(?) AS t"
    assert await mf_d1.prepare(query).bind(3, 3).first() == {"v": 3, "t": "real"}
    assert await local_d1.prepare(query).bind(3, 3).first() == {"v": 3, "t": "integer"}
    for db in (mf_d1, local_d1):
        await db.prepare("CREATE TABLE n (i INTEGER)").run()
        await db.prepare("INSERT INTO n VALUES (?)").bind(3).run()
        assert await db.prepare("SELECT typeof(i) AS t FROM n").first_value("t") == "integer"


# --- KV ------------------------------------------------------------------------------------


@pytest.fixture
async def local_kv() -> AsyncIterator[SqliteKV]:
    kv = SqliteKV(":memory:", clock=SystemClock())
    yield kv
    kv.close()


async def test_kv_metadata_numbers_cross_javascript_the_same_way(
    local_kv: SqliteKV, mf_kv: KVHarness
) -> None:
    metadata = {"whole": 1.0, "half": 0.5, "max": 2**53, "nested": [{"n": -2.0}], "ok": True}
    expected = {"whole": 1, "half": 0.5, "max": 2**53, "nested": [{"n": -2}], "ok": True}
    for kv in (local_kv, mf_kv.kv):
        await kv.put("m", "v", metadata=metadata)
        got = await kv.get_with_metadata("m")
        assert got.metadata == expected
        assert type(got.metadata["whole"]) is int
        [listed] = (await kv.list(prefix="m")).keys
        assert listed.metadata == expected
        # An int beyond 2^53 becomes a BigInt, which KV's JSON.stringify refuses.
        with pytest.raises(TypeError, match="Do not know how to serialize a BigInt"):
            await kv.put("big", "v", metadata={"n": 2**53 + 1})
        assert await kv.get("big") is None


async def test_kv_ttl_fractions_are_truncated(local_kv: SqliteKV, mf_kv: KVHarness) -> None:
    for kv in (local_kv, mf_kv.kv):
        with pytest.raises(BindingLimitError) as refused:
            await kv.put("t", "v", expiration_ttl=59.9)  # type: ignore[arg-type]
        assert str(refused.value) == (
            "KV PUT failed: 400 Invalid expiration_ttl of 59. Expiration TTL must be at least 60."
        )
        await kv.put("t", "v", expiration_ttl=60.9)  # type: ignore[arg-type]
        [key] = (await kv.list(prefix="t")).keys
        assert key.expiration is not None and key.expiration - time.time() <= 61


async def test_kv_malformed_cursor_is_refused_locally_and_ignored_on_miniflare(
    local_kv: SqliteKV, mf_kv: KVHarness
) -> None:
    # Cursors are opaque; only ones a list() returned are valid. Miniflare answers an
    # empty, complete page to garbage; the local adapter refuses it so a caller's bug
    # (a cursor from somewhere else) is not mistaken for "no more keys".
    await mf_kv.kv.put("k", "v")
    await local_kv.put("k", "v")
    page = await mf_kv.kv.list(cursor="garbage!!")
    assert (page.keys, page.list_complete) == ([], True)
    with pytest.raises(BindingLimitError, match="Invalid cursor"):
        await local_kv.list(cursor="garbage!!")
