"""The KV, D1 and R2 adapters over REAL workerd bindings (Miniflare), in real Pyodide.

Pins: Pyodide's own conversions (JS null -> jsnull on Python 3.13 and 3.14, `undefined`, ArrayBuffer
-> memoryview, numbers -> int/float, Python dict -> JS Object only via `to_js_options`) as
the adapters meet them, in raw mode and through the real workers SDK wrappers.
"""

from __future__ import annotations

import harness_js
from pyodide.ffi import jsnull
from support import MODES, binding, unique

from bindings.cloudflare.d1 import CloudflareD1Database
from bindings.cloudflare.kv import CloudflareKVNamespace
from bindings.cloudflare.r2 import CloudflareObjectStore
from bindings.ports.d1 import D1Error
from bindings.ports.errors import BindingLimitError


async def test_raw_kv_answers_a_missing_key_with_jsnull_and_the_adapter_with_none() -> None:
    # Pyodide 0.28 and 314: JS null is `jsnull`, which is not None (the reason ffi.to_py exists).
    assert (await harness_js.env.KV.get(unique("missing"))) is jsnull
    for mode in MODES:
        kv = CloudflareKVNamespace(binding("KV", mode))
        assert await kv.get(unique("missing")) is None, mode
        missing = await kv.get_with_metadata(unique("missing"))
        assert (missing.value, missing.metadata) == (None, None), mode


async def test_kv_put_options_reach_workerd_in_both_modes() -> None:
    for mode in MODES:
        kv = CloudflareKVNamespace(binding("KV", mode))
        prefix = unique(f"kv-{mode}")
        await kv.put(f"{prefix}/a", "one", expiration_ttl=3600, metadata={"n": 1, "s": "x"})
        await kv.put(f"{prefix}/b", "two")
        got = await kv.get_with_metadata(f"{prefix}/a")
        assert (got.value, got.metadata) == ("one", {"n": 1, "s": "x"}), mode
        page = await kv.list(prefix=f"{prefix}/")
        assert [key.name for key in page.keys] == [f"{prefix}/a", f"{prefix}/b"], mode
        assert page.list_complete and page.cursor is None
        # The TTL reached workerd (a dropped options object would leave no expiration).
        assert isinstance(page.keys[0].expiration, int), (mode, page.keys[0])
        assert page.keys[0].metadata == {"n": 1, "s": "x"}
        await kv.delete(f"{prefix}/a")
        assert await kv.get(f"{prefix}/a") is None


async def test_kv_rule_violations_are_binding_limit_errors_with_workerds_text() -> None:
    for mode in MODES:
        kv = CloudflareKVNamespace(binding("KV", mode))
        try:
            await kv.put(unique("ttl"), "v", expiration_ttl=30)
        except BindingLimitError as exc:
            assert "expiration_ttl" in str(exc), str(exc)
        else:
            raise AssertionError(f"{mode}: a 30 s TTL was accepted")


async def test_d1_binds_none_bytes_and_bool_and_reads_rows_and_meta() -> None:
    for mode in MODES:
        db = CloudflareD1Database(binding("DB", mode))
        table = unique("t").replace("-", "_")
        await db.prepare(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a TEXT, b BLOB, c INTEGER)"
        ).run()
        run = (
            await db.prepare(f"INSERT INTO {table} (a, b, c) VALUES (?, ?, ?)")
            .bind(None, b"\x00\x01", True)
            .run()
        )
        assert run.meta.changes == 1, (mode, run.meta)
        assert run.meta.size_after > 0, (mode, run.meta)  # the tenant directory's free space
        rows = (await db.prepare(f"SELECT a, b, c, 3.0 AS f FROM {table}").all()).results
        # NULL -> None (not jsnull), BLOB -> list of byte values, TRUE -> 1, 3.0 -> int 3.
        assert rows == [{"a": None, "b": [0, 1], "c": 1, "f": 3}], (mode, rows)
        assert await db.prepare(f"SELECT count(*) AS n FROM {table}").first_value("n") == 1


async def test_d1_errors_and_batches_are_all_or_nothing() -> None:
    for mode in MODES:
        db = CloudflareD1Database(binding("DB", mode))
        table = unique("u").replace("-", "_")
        await db.prepare(f"CREATE TABLE {table} (k TEXT PRIMARY KEY)").run()
        insert = db.prepare(f"INSERT INTO {table} (k) VALUES (?)")
        try:
            await db.batch([insert.bind("a"), insert.bind("a")])
        except D1Error as exc:
            assert "UNIQUE" in str(exc) and "rolled back" in str(exc), str(exc)
        else:
            raise AssertionError("a failing batch succeeded")
        count = await db.prepare(f"SELECT count(*) AS n FROM {table}").first_value("n")
        assert count == 0, (mode, count)
        try:
            db.prepare("SELECT ?").bind(2**60)  # a BigInt: D1 refuses it at bind time
        except D1Error as exc:
            assert "D1_TYPE_ERROR" in str(exc), str(exc)
        else:
            raise AssertionError("a BigInt bound")


async def test_r2_round_trip_with_custom_metadata_and_listing() -> None:
    for mode in MODES:
        store = CloudflareObjectStore(binding("COLD", mode))
        prefix = unique(f"r2-{mode}")
        info = await store.put(
            f"{prefix}/a.ndjson.gz", b"\x1f\x8b data", custom_metadata={"k": "v"}
        )
        assert info.size == 7 and info.custom_metadata == {"k": "v"}, info
        body = await store.get(f"{prefix}/a.ndjson.gz")
        assert body is not None and body.data == b"\x1f\x8b data" and type(body.data) is bytes
        assert body.custom_metadata == {"k": "v"} and body.etag == info.etag
        await store.put(f"{prefix}/b", b"")
        page = await store.list(prefix=f"{prefix}/", limit=1)
        assert [o.key for o in page.objects] == [f"{prefix}/a.ndjson.gz"] and page.truncated
        rest = await store.list(prefix=f"{prefix}/", cursor=page.cursor)
        assert [o.key for o in rest.objects] == [f"{prefix}/b"] and not rest.truncated
        await store.delete([f"{prefix}/a.ndjson.gz", f"{prefix}/b"])
        assert await store.get(f"{prefix}/b") is None


async def test_raw_python_none_is_undefined_which_d1_refuses_and_jsnull_binds_null() -> None:
    # Pyodide converts None to `undefined` in a JS call; D1 refuses it. This is why raw-mode
    # adapters send `jsnull` (ffi.to_js_arg), and the fake models the same refusal.
    from pyodide.ffi import JsException

    statement = harness_js.env.DB.prepare("SELECT ? AS v")
    try:
        statement.bind(None)
    except JsException as exc:
        assert "D1_TYPE_ERROR" in str(exc), str(exc)
    else:
        raise AssertionError("undefined was bound")
    row = await statement.bind(jsnull).first()
    assert row.to_py() == {"v": jsnull}
    # Python bytes do NOT convert implicitly in a JS call (they cross as a PyProxy, which the
    # binding cannot use): raw-mode adapters must `to_js` them into a Uint8Array.
    from pyodide.ffi import to_js

    try:
        await harness_js.env.DB.prepare("SELECT ? AS b").bind(b"\x01\x02").first()
    except JsException:
        pass
    else:
        raise AssertionError("bytes crossed without to_js")
    blob = await harness_js.env.DB.prepare("SELECT ? AS b").bind(to_js(b"\x01\x02")).first()
    assert blob.to_py() == {"b": [1, 2]}
