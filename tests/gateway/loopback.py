"""A loopback upstream for end-to-end gateway tests: a tiny ASGI echo app under uvicorn."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from local_runtime.server import serving_in_thread

Message = MutableMapping[str, Any]


async def echo_app(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    """Answers every request with JSON: the decoded body, path, query and Authorization."""
    if scope["type"] != "http":
        return
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    raw = b"".join(chunks)
    headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
    payload = {
        "echo": json.loads(raw) if raw else None,
        "path": scope["path"],
        "query": scope.get("query_string", b"").decode(),
        "authorization": headers.get("authorization"),
    }
    status = 500 if scope["path"].endswith("/fail") else 200
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def running_upstream() -> Iterator[str]:
    """Serve `echo_app` on a free loopback port in a thread; yields its base URL."""
    with serving_in_thread(echo_app, lifespan="off") as base:
        yield base
