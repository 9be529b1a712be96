"""Gateway overhead: a proxied tool call minus the same call made straight to the upstream.

    uv run python benchmarks/gateway_overhead.py [--calls 2000] [--warmup 200]

One loopback upstream (a tiny ASGI echo app under uvicorn, in a subprocess so it does not
share our GIL) serves every call. Each iteration makes the direct call and the proxied
calls back to back, so drift affects all of them alike. Paths measured:

* direct            — httpx POST to the upstream (pooled connection), the baseline;
* http route        — `worker.app.handle` in-process, `POST /api/v1/tools/echo`, warm isolate
                      cache (the steady state: no KV reads);
* http route, cold  — the same with the isolate cache cleared before each call (3 SQLite KV
                      reads per call);
* mcp tools/call    — `worker.app.handle` in-process, `POST /mcp` JSON-RPC tools/call;
* mock upstream     — both routes again with the upstream an in-memory httpx.MockTransport
                      (direct = an httpx call to the same mock): the gateway's own CPU cost,
                      free of socket and scheduler noise;
* local server      — the same two routes through the local dev server over loopback HTTP
                      (adds one HTTP hop; skipped if the local runtime cannot start).

Overhead p50/p99 = percentile(proxied) - percentile(direct), in microseconds; the ratio is
percentile(proxied) / percentile(direct). This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx

from local_runtime.server import free_port

Message = MutableMapping[str, Any]


# --- the loopback upstream ------------------------------------------------------------------


async def echo_app(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = json.dumps({"echo": json.loads(b"".join(chunks) or b"null")}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(
        echo_app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", access_log=False
    )


@contextlib.contextmanager
def upstream_process() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-upstream", str(port)],
        stdout=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc, "upstream")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class SharedTransport(httpx.AsyncBaseTransport):
    """A pooled transport that outlives the per-call clients closing it."""

    def __init__(self, inner: httpx.AsyncHTTPTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")[-500:] if proc.stderr else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}: {err}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within 60 s")
        time.sleep(0.02)


# --- measurement ----------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(name: str, direct: list[float], proxied: list[float]) -> None:
    d50, d99 = percentile(direct, 50), percentile(direct, 99)
    p50, p99 = percentile(proxied, 50), percentile(proxied, 99)
    print(
        f"{name:<34} direct p50 {d50:8.0f} p99 {d99:8.0f} | proxied p50 {p50:8.0f} "
        f"p99 {p99:8.0f} | overhead p50 {p50 - d50:7.0f} p99 {p99 - d99:7.0f} us | "
        f"ratio p50 {p50 / d50:4.2f} p99 {p99 / d99:4.2f}"
    )


async def bench(calls: int, warmup: int, upstream: str) -> None:
    from bindings.environment import Bindings
    from bindings.ports.clock import SystemClock
    from bindings.settings import Settings
    from gateway import admin_ops
    from gateway.credentials import ISOLATE_CACHE
    from http_messages import Headers, HttpRequest
    from local_runtime.adapters.kv import SqliteKV
    from local_runtime.background import LocalBackgroundTasks
    from worker import app

    clock = SystemClock()
    kv = SqliteKV(":memory:", clock=clock)
    await admin_ops.create_tenant(kv, clock, "bench")
    api_key = (await admin_ops.issue_api_key(kv, clock, "bench")).api_key
    await admin_ops.set_credential(kv, clock, "bench", "loop", "loop-token")
    await admin_ops.register_tool(kv, "bench", _tool(upstream))

    # One pooled transport for every client, as the local runtime shares one. The gateway
    # closes its per-call client (as it must on Workers); the shared pool must survive that.
    transport = SharedTransport(httpx.AsyncHTTPTransport())
    # The upstream is this machine's loopback: allowed the way an operator allows a private
    # upstream (the outbound guard refuses loopback unless OUTBOUND_ALLOWED_HOSTS lists it).
    settings = Settings.from_vars({"ENVIRONMENT": "test", "OUTBOUND_ALLOWED_HOSTS": "127.0.0.1"})
    background = LocalBackgroundTasks()

    def bindings() -> Bindings:
        return Bindings(
            settings=settings, clock=clock, background=background, kv=kv, http_transport=transport
        )

    arguments = {"text": "hello", "n": 3}
    tool_body = json.dumps(arguments).encode()
    mcp_body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": arguments},
        }
    ).encode()
    auth = {"authorization": f"Bearer {api_key}", "content-type": "application/json"}
    direct_client = httpx.AsyncClient(transport=transport)

    async def direct() -> None:
        response = await direct_client.post(
            f"{upstream}/echo", content=tool_body, headers={"authorization": "Bearer loop-token"}
        )
        assert response.status_code == 200

    async def http_route() -> None:
        request = HttpRequest("POST", "http://gw/api/v1/tools/echo", Headers(auth), tool_body)
        response = await app.handle(request, bindings())
        assert response.status == 200, response.body

    async def http_route_cold() -> None:
        ISOLATE_CACHE.clear()
        await http_route()

    async def mcp_call() -> None:
        request = HttpRequest("POST", "http://gw/mcp", Headers(auth), mcp_body)
        response = await app.handle(request, bindings())
        assert response.status == 200 and b'"isError":false' in response.body, response.body

    paths: dict[str, Callable[[], Awaitable[None]]] = {
        "http route (in-process, warm)": http_route,
        "http route (in-process, cold KV)": http_route_cold,
        "mcp tools/call (in-process)": mcp_call,
    }
    samples = await measure(direct, paths, calls, warmup)
    print(f"{calls} calls per path after {warmup} warm-up calls; times in microseconds")
    for name, proxied in samples.items():
        if name != "direct":
            report(name, samples["direct"], proxied)

    await mock_bench(calls, warmup, kv, clock, api_key, tool_body, mcp_body)
    await server_bench(calls, warmup, upstream, direct, _tool(upstream))
    await direct_client.aclose()
    await transport.inner.aclose()
    kv.close()


async def mock_bench(
    calls: int,
    warmup: int,
    kv: Any,
    clock: Any,
    api_key: str,
    tool_body: bytes,
    mcp_body: bytes,
) -> None:
    """The gateway's own CPU cost: the upstream is an in-memory httpx.MockTransport, so no
    socket, no other process and no scheduler noise is in either measurement."""
    from bindings.environment import Bindings
    from bindings.settings import Settings
    from http_messages import Headers, HttpRequest
    from local_runtime.background import LocalBackgroundTasks
    from worker import app

    payload = b'{"echo": {"text": "hello", "n": 3}}'

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=payload, headers={"content-type": "application/json"})

    mock = httpx.MockTransport(answer)
    # The registered tool names the loopback upstream; allowed as in `bench` above.
    settings = Settings.from_vars({"ENVIRONMENT": "test", "OUTBOUND_ALLOWED_HOSTS": "127.0.0.1"})
    background = LocalBackgroundTasks()
    auth = {"authorization": f"Bearer {api_key}", "content-type": "application/json"}
    client = httpx.AsyncClient(transport=mock)
    # The tool's URL host is irrelevant to a mock transport.
    tool_url = "http://upstream.invalid/echo"

    async def direct() -> None:
        response = await client.post(
            tool_url, content=tool_body, headers={"authorization": "Bearer loop-token"}
        )
        assert response.status_code == 200

    def bindings() -> Bindings:
        return Bindings(
            settings=settings, clock=clock, background=background, kv=kv, http_transport=mock
        )

    async def http_route() -> None:
        request = HttpRequest("POST", "http://gw/api/v1/tools/echo", Headers(auth), tool_body)
        assert (await app.handle(request, bindings())).status == 200

    async def mcp_call() -> None:
        request = HttpRequest("POST", "http://gw/mcp", Headers(auth), mcp_body)
        assert (await app.handle(request, bindings())).status == 200

    samples = await measure(
        direct,
        {"http route (mock upstream)": http_route, "mcp tools/call (mock upstream)": mcp_call},
        calls,
        warmup,
    )
    await client.aclose()
    for name, proxied in samples.items():
        if name != "direct":
            report(name, samples["direct"], proxied)


async def measure(
    direct: Callable[[], Awaitable[None]],
    paths: dict[str, Callable[[], Awaitable[None]]],
    calls: int,
    warmup: int,
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"direct": [], **{name: [] for name in paths}}
    everything = {"direct": direct, **paths}
    for i in range(warmup + calls):
        for name, call in everything.items():
            start = time.perf_counter_ns()
            await call()
            elapsed = (time.perf_counter_ns() - start) / 1000
            if i >= warmup:
                samples[name].append(elapsed)
    return samples


async def server_bench(
    calls: int,
    warmup: int,
    upstream: str,
    direct: Callable[[], Awaitable[None]],
    tool_config: dict[str, Any],
) -> None:
    """The same calls through the local dev server, run in its own process (an extra
    loopback HTTP hop, as a client of `agent-memory dev` would see)."""
    try:
        from bindings.ports.clock import SystemClock
        from gateway import admin_ops
        from local_runtime.adapters.kv import SqliteKV
        from local_runtime.state import StateDir
    except ImportError as exc:
        print(f"local server: skipped ({exc})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        state = StateDir.create(Path(tmp) / "state")
        clock = SystemClock()
        kv = SqliteKV(state.kv, clock=clock)
        await admin_ops.create_tenant(kv, clock, "bench")
        api_key = (await admin_ops.issue_api_key(kv, clock, "bench")).api_key
        await admin_ops.set_credential(kv, clock, "bench", "loop", "loop-token")
        await admin_ops.register_tool(kv, "bench", tool_config)
        kv.close()
        try:
            with local_server_process(state.root) as base:
                samples = await _measure_server(base, api_key, direct, calls, warmup)
        except RuntimeError as exc:
            print(f"local server: skipped ({exc})")
            return
    for name, proxied in samples.items():
        if name != "direct":
            report(name, samples["direct"], proxied)


async def _measure_server(
    base: str, api_key: str, direct: Callable[[], Awaitable[None]], calls: int, warmup: int
) -> dict[str, list[float]]:
    auth = {"authorization": f"Bearer {api_key}"}
    arguments = {"text": "hello", "n": 3}
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments},
    }
    async with httpx.AsyncClient(base_url=base, headers=auth) as client:

        async def via_server_http() -> None:
            response = await client.post("/api/v1/tools/echo", json=arguments)
            assert response.status_code == 200, response.text

        async def via_server_mcp() -> None:
            response = await client.post("/mcp", json=rpc)
            assert response.status_code == 200, response.text

        return await measure(
            direct,
            {
                "http route (local server)": via_server_http,
                "mcp tools/call (local server)": via_server_mcp,
            },
            calls,
            warmup,
        )


@contextlib.contextmanager
def local_server_process(state_root: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-local", str(state_root), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_port(port, proc, "local server")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def serve_local(state_root: str, port: int) -> None:
    """Child process: the local runtime's ASGI app, without access logs or a model."""
    import uvicorn

    from local_runtime.runtime import LocalRuntime
    from local_runtime.server import LocalWorkerApp

    runtime = LocalRuntime.open(state_root, embedder=_NoEmbedder())  # type: ignore[arg-type]
    uvicorn.run(
        LocalWorkerApp(runtime), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )


class _NoEmbedder:
    """The gateway never embeds; this keeps the local runtime from loading a model."""

    config: Any = None

    async def embed(self, texts: Any) -> Any:
        raise RuntimeError("the gateway benchmark does not embed")


def _tool(upstream: str) -> dict[str, Any]:
    return {
        "name": "echo",
        "provider": "loop",
        "url": f"{upstream}/echo",
        "method": "POST",
        "auth": {"type": "header", "name": "Authorization", "prefix": "Bearer "},
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 100}, "n": {"type": "integer"}},
            "required": ["text"],
            "additionalProperties": False,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-local", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_local:
        serve_local(args.serve_local[0], int(args.serve_local[1]))
        return
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return
    print(f"python {sys.version.split()[0]} on {sys.platform}, pid {os.getpid()}")
    with upstream_process() as upstream:
        asyncio.run(bench(args.calls, args.warmup, upstream))


if __name__ == "__main__":
    main()
