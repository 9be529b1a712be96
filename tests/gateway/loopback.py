"""A loopback upstream for end-to-end gateway tests: a tiny ASGI echo app under uvicorn."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import uvicorn

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running_upstream() -> Iterator[str]:
    """Serve `echo_app` on a free loopback port in a thread; yields its base URL."""
    port = _free_port()
    config = uvicorn.Config(
        echo_app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("loopback upstream failed to start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
