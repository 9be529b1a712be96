"""One scenario over the KV, D1 and Durable Object SQL adapters, run twice: in real Pyodide
against workerd (test_fake_pin.py) and in CPython against tests/fakes/js_runtime.py
(tests/pyodide/test_fake_matches_pyodide.py). The fake stays for the port contract suites
(tests/cloudflare/test_port_contracts.py), which run under pytest in CPython; this
transcript is what keeps it honest: both runs must produce the same one, entry by entry.

Only the adapters and the ports are imported (no `js`), so the module loads in both.
Each entry is `[step, outcome]`; an error is `{"error": <port exception class>,
"says": <a phrase from the message>}` (the phrase, not the whole text: workerd adds
`at offset N` and request ids that the fake does not model, docs/miniflare.md).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

Entry = list[Any]

# Phrases that identify an error the same way on both runtimes.
_PHRASES = (
    "expiration_ttl",
    "UNIQUE constraint failed",
    "D1_TYPE_ERROR",
    "no such table",
    "Expected exactly one result",
    "not authorized",
    "BEGIN",
    "Booleans",
    "BigInt",
    "rolled back",
)


def _error(exc: BaseException) -> dict[str, Any]:
    text = str(exc)
    says = [phrase for phrase in _PHRASES if phrase.lower() in text.lower()]
    return {"error": type(exc).__name__, "says": says}


async def _step(log: list[Entry], name: str, action: Callable[[], Awaitable[Any]]) -> None:
    try:
        log.append([name, await action()])
    except Exception as exc:
        log.append([name, _error(exc)])


def _sync_step(log: list[Entry], name: str, action: Callable[[], Any]) -> None:
    try:
        log.append([name, action()])
    except Exception as exc:
        log.append([name, _error(exc)])


def _plain(value: Any) -> Any:
    """JSON-comparable: bytes-likes as lists of ints, tuples as lists."""
    if isinstance(value, bytes | bytearray | memoryview):
        return list(bytes(value))
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


async def run(kv: Any, db: Any, storage: Any, prefix: str) -> list[Entry]:
    """Run the scenario; `prefix` keeps KV keys and D1 tables apart between runs."""
    log: list[Entry] = []
    key = f"{prefix}-k"
    table = re.sub(r"\W", "_", f"{prefix}_t")

    # --- KV
    await _step(log, "kv.get missing", lambda: kv.get(f"{key}-missing"))

    async def put_and_read() -> Any:
        await kv.put(key, "v", metadata={"n": 1.0, "s": "x", "none": None})
        got = await kv.get_with_metadata(key)
        return [got.value, got.metadata]

    await _step(log, "kv.put metadata", put_and_read)
    await _step(log, "kv.put ttl 30", lambda: kv.put(f"{key}-ttl", "v", expiration_ttl=30))

    async def listing() -> Any:
        page = await kv.list(prefix=key)
        return [[k.name.removeprefix(key), k.metadata] for k in page.keys] + [page.list_complete]

    await _step(log, "kv.list", listing)

    # --- D1
    await _step(
        log,
        "d1.create",
        lambda: _changes(
            db.prepare(
                f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a TEXT UNIQUE, b BLOB, c)"
            ).run()
        ),
    )

    async def insert() -> Any:
        result = (
            await db.prepare(f"INSERT INTO {table} (a, b, c) VALUES (?, ?, ?)")
            .bind("x", b"\x00\x01", True)
            .run()
        )
        return [result.meta.changes, result.results]

    await _step(log, "d1.insert", insert)

    async def select() -> Any:
        rows = (
            await db.prepare(f"SELECT a, b, c, NULL AS n, 3.0 AS f, 2.5 AS g FROM {table}").all()
        ).results
        return _plain(rows)

    await _step(log, "d1.select", select)
    await _step(
        log,
        "d1.first_value",
        lambda: db.prepare(f"SELECT count(*) AS n FROM {table}").first_value("n"),
    )
    await _step(log, "d1.first none", lambda: db.prepare(f"SELECT a FROM {table} WHERE 0").first())

    async def duplicate_batch() -> Any:
        statement = db.prepare(f"INSERT INTO {table} (a) VALUES (?)")
        return await db.batch([statement.bind("y"), statement.bind("y")])

    await _step(log, "d1.batch duplicate", duplicate_batch)
    await _step(
        log,
        "d1.count after batch",
        lambda: db.prepare(f"SELECT count(*) AS n FROM {table}").first_value("n"),
    )

    async def bigint() -> Any:
        return db.prepare("SELECT ?").bind(2**60)

    await _step(log, "d1.bind bigint", bigint)
    await _step(log, "d1.missing table", lambda: db.prepare("SELECT * FROM nowhere_at_all").all())

    # --- Durable Object SQL
    sql = storage.sql
    _sync_step(
        log, "do.create", lambda: sql.exec("CREATE TABLE t (k TEXT PRIMARY KEY, n, b)").to_array()
    )
    _sync_step(
        log,
        "do.insert",
        lambda: sql.exec("INSERT INTO t VALUES ('a', 9007199254740993, ?)", b"\x02").to_array(),
    )
    _sync_step(
        log, "do.select", lambda: _plain(sql.exec("SELECT k, n, b, NULL AS z FROM t").to_array())
    )
    _sync_step(log, "do.one of none", lambda: sql.exec("SELECT k FROM t WHERE 0").one())
    _sync_step(log, "do.begin", lambda: sql.exec("BEGIN TRANSACTION").to_array())
    _sync_step(log, "do.bool", lambda: sql.exec("SELECT ?", True).to_array())
    _sync_step(log, "do.bigint", lambda: sql.exec("SELECT ?", 2**60).to_array())

    def failing_transaction() -> None:
        sql.exec("INSERT INTO t (k) VALUES ('b')")
        raise ValueError("changed its mind")

    _sync_step(
        log, "do.transaction rollback", lambda: storage.transaction_sync(failing_transaction)
    )
    _sync_step(
        log,
        "do.transaction commit",
        lambda: storage.transaction_sync(
            lambda: sql.exec("INSERT INTO t (k) VALUES ('c')").to_array()
        ),
    )
    _sync_step(
        log, "do.keys", lambda: [r["k"] for r in sql.exec("SELECT k FROM t ORDER BY k").to_array()]
    )
    return log


async def _changes(awaitable: Awaitable[Any]) -> int:
    result = await awaitable
    return int(result.meta.changes)
