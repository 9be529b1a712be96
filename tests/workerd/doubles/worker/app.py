"""Double of `worker.app` (the real app imports pydantic through every route module).

`worker/entry.py` hands it the `HttpRequest` it built and sends back the `HttpResponse` it
returns; this double records what arrived and drives the real Cloudflare adapters, so the
harness can see both sides of the edge. Routes (any method unless stated):

  /echo           what arrived: method, path, query, body length, content-length header
                  (and the interpreter's version)
  /seen?tag=T     how many /echo requests with `?tag=T` reached the app (413 checks: none)
  /empty          a 204 whose HttpResponse still carries a body (the entry must drop it)
  /adapters       KV, D1 and R2 round trips through the real adapters (POST)
  /rpc            `call(method, payload)` on an AgentRuntime through the DO adapter (POST)
  /background     work given to `bindings.background` after the response (POST)
"""

from __future__ import annotations

import json
import sys
from typing import Any

import harness_signal
from value_shapes import shape

from bindings.cloudflare import ffi
from http_messages import HttpRequest, HttpResponse, json_response

# The /echo requests seen by this isolate, by `tag` query value (one isolate serves them all).
_seen: dict[str, int] = {}


async def handle(request: HttpRequest, bindings: Any) -> HttpResponse:
    route = _ROUTES.get(request.path)
    if route is None:
        return json_response({"error": {"code": "not_found", "message": request.path}}, 404)
    return await route(request, bindings)


async def _echo(request: HttpRequest, bindings: Any) -> HttpResponse:
    tag = request.query.get("tag", "")
    _seen[tag] = _seen.get(tag, 0) + 1
    return json_response(
        {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "body_bytes": len(request.body),
            "content_length": request.headers.get("content-length"),
            "python": sys.version.split()[0],
        }
    )


async def _seen_count(request: HttpRequest, bindings: Any) -> HttpResponse:
    return json_response({"count": _seen.get(request.query.get("tag", ""), 0)})


async def _empty(request: HttpRequest, bindings: Any) -> HttpResponse:
    return HttpResponse(status=204, body=b"a 204 must not carry this")


async def _adapters(request: HttpRequest, bindings: Any) -> HttpResponse:
    """One pass over each adapter; the harness also reads the results from outside."""
    tag = json.loads(request.body)["tag"]
    env = bindings.env
    out: dict[str, Any] = {
        # Wrapped mode: the SDK's `_EnvWrapper` wraps bindings by JS constructor name.
        "wrapped": {name: not ffi.is_raw(getattr(env, name)) for name in ("KV", "DB", "COLD")},
    }

    kv = bindings.kv
    await kv.put(f"{tag}:a", "é 1", metadata={"n": 1, "none": None, "list": [1, "x"]})
    await kv.put(f"{tag}:b", "2", expiration_ttl=3600)
    got = await kv.get_with_metadata(f"{tag}:a")
    page = await kv.list(prefix=f"{tag}:")
    await kv.delete(f"{tag}:b")
    out["kv"] = {
        "value": got.value,
        "metadata": got.metadata,
        "missing": await kv.get(f"{tag}:nothing"),
        "listed": [key.name for key in page.keys],
        "b_expires": page.keys[1].expiration is not None,
        "after_delete": await kv.get(f"{tag}:b"),
    }

    db = bindings.db
    table = f"t_{tag}"
    await db.prepare(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT, blob BLOB)").run()
    inserted = (
        await db.prepare(f"INSERT INTO {table} (note, blob) VALUES (?, ?)")
        .bind("é", b"\x00\x01\xff")
        .run()
    )
    await db.prepare(f"INSERT INTO {table} (note, blob) VALUES (?, ?)").bind(None, None).run()
    rows = await db.prepare(f"SELECT id, note, blob FROM {table} ORDER BY id").all()
    rolled_back = None
    try:
        await db.batch(
            [
                db.prepare(f"INSERT INTO {table} (id, note) VALUES (?, ?)").bind(10, "kept?"),
                db.prepare(f"INSERT INTO {table} (id, note) VALUES (?, ?)").bind(1, "dup"),
            ]
        )
    except Exception as exc:
        rolled_back = type(exc).__name__
    out["d1"] = {
        "changes": inserted.meta.changes,
        "rows": [
            {"id": row["id"], "note": row["note"], "blob": _hex(row["blob"])}
            for row in rows.results
        ],
        "batch_error": rolled_back,
        "after_batch": await db.prepare(f"SELECT count(*) AS n FROM {table}").first_value("n"),
    }

    cold = bindings.cold
    stored = await cold.put(f"{tag}/one.bin", b"\x00cold\xff", custom_metadata={"k": "v"})
    body = await cold.get(f"{tag}/one.bin")
    listing = await cold.list(prefix=f"{tag}/")
    await cold.put(f"{tag}/two.bin", b"2")
    await cold.delete(f"{tag}/two.bin")
    out["r2"] = {
        "size": stored.size,
        "data": _hex(body.data) if body else None,
        "custom_metadata": body.custom_metadata if body else None,
        "listed": [item.key for item in listing.objects],
        "missing": await cold.get(f"{tag}/none.bin"),
        "after_delete": await cold.get(f"{tag}/two.bin"),
    }
    return json_response(out)


async def _rpc(request: HttpRequest, bindings: Any) -> HttpResponse:
    ask = json.loads(request.body)
    stub = bindings.agents.get_by_name(ask["name"])
    try:
        result = await stub.call(ask["method"], ask.get("payload"))
    except Exception as exc:  # the harness asserts on refusals too
        return json_response({"error": f"{type(exc).__name__}: {exc}"}, 500)
    return json_response({"result": result, "result_shape": shape(result)})


async def _background(request: HttpRequest, bindings: Any) -> HttpResponse:
    """Answer 202 at once; the work writes to D1 after the response, then signals."""
    tag = json.loads(request.body)["tag"]

    async def work() -> None:
        await bindings.db.prepare(
            "CREATE TABLE IF NOT EXISTS tier_background (tag TEXT PRIMARY KEY, source TEXT)"
        ).run()
        await (
            bindings.db.prepare("INSERT INTO tier_background (tag, source) VALUES (?, ?)")
            .bind(tag, "worker")
            .run()
        )
        await harness_signal.signal(bindings.signal_url, f"background-{tag}", {"tag": tag})

    bindings.background.wait_until(work())
    return json_response({"scheduled": tag}, 202)


def _hex(value: Any) -> str | None:
    return None if value is None else bytes(value).hex()


_ROUTES = {
    "/echo": _echo,
    "/seen": _seen_count,
    "/empty": _empty,
    "/adapters": _adapters,
    "/rpc": _rpc,
    "/background": _background,
}
