"""Fixtures for the gateway: a local KV, a scripted upstream behind httpx.MockTransport, and
a helper that drives `worker.app.handle` exactly as the Worker entry does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from bindings.ports.crypto import Cipher
from bindings.settings import Settings
from gateway import admin_ops
from gateway.credentials import ISOLATE_CACHE
from gateway.mcp import MemoryToolDispatcher
from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.adapters.kv import SqliteKV
from local_runtime.background import LocalBackgroundTasks
from worker.app import routes
from worker.routing import Router

UPSTREAM = "https://upstream.test"
TENANT = "acme"
OTHER_TENANT = "globex"


@pytest.fixture(autouse=True)
def fresh_isolate() -> Iterator[None]:
    """Each test is a fresh isolate: an empty KV cache."""
    ISOLATE_CACHE.clear()
    yield
    ISOLATE_CACHE.clear()


Handler = Callable[[httpx.Request], httpx.Response]


@dataclass
class Upstream:
    """A scripted upstream: records every request; `handler` decides the answer."""

    requests: list[httpx.Request] = field(default_factory=list)
    handler: Handler | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.handler is not None:
            return self.handler(request)
        body = request.content.decode() or "{}"
        return httpx.Response(
            200,
            json={
                "echo": json.loads(body),
                "path": request.url.path,
                "query": str(request.url.query, "ascii"),
            },
            headers={"x-request-id": "up-1", "x-secret-internal": "no"},
        )

    @property
    def last(self) -> httpx.Request:
        assert self.requests, "the upstream was never called"
        return self.requests[-1]


@dataclass
class Gateway:
    """A deployment under test: KV, clock, upstream, and the bindings each request gets."""

    kv: SqliteKV
    clock: FixedClock
    upstream: Upstream
    semantic_tier: bool = False
    settings: Settings = field(default_factory=lambda: Settings(environment="test"))
    # The app under test: no memory tools unless a test hands it some (`use_memory`).
    app: Router = field(default_factory=lambda: Router(routes(memory_tools=None)))
    cipher: Cipher | None = None  # with `settings.memory_pii_keks`: credentials are sealed

    def use_memory(self, memory: MemoryToolDispatcher) -> None:
        """Build the app with `memory` as MCP's memory tools, as the Worker wires its own."""
        self.app = Router(routes(memory_tools=lambda bindings: memory))

    def bindings(self) -> Bindings:
        tier: dict[str, Any] = {}
        if self.semantic_tier:
            # Only presence matters to the gateway; the memory dispatcher is a fake.
            tier = {"db": object(), "vectors": object(), "embedder": object()}
        return Bindings(
            settings=self.settings,
            clock=self.clock,
            background=LocalBackgroundTasks(),
            kv=self.kv,
            cipher=self.cipher,
            http_transport=httpx.MockTransport(self.upstream),
            **tier,
        )

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict[str, Any] | list[Any] | None = None,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> HttpResponse:
        if isinstance(body, dict | list):
            raw = json.dumps(body).encode()
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body or b""
        all_headers = dict(headers or {})
        if key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        request = HttpRequest(method, f"https://gw.test{path}", Headers(all_headers), raw)
        return await self.app.handle(request, self.bindings())

    async def call_tool(
        self, tool: str, arguments: dict[str, Any] | bytes | str | None = None, *, key: str | None
    ) -> HttpResponse:
        return await self.request("POST", f"/api/v1/tools/{tool}", arguments, key=key)

    async def rpc(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        key: str | None,
        request_id: int | str | None = 1,
        headers: dict[str, str] | None = None,
    ) -> HttpResponse:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if request_id is not None:
            message["id"] = request_id
        if params is not None:
            message["params"] = params
        return await self.request("POST", "/mcp", message, key=key, headers=headers)


ECHO_TOOL: dict[str, Any] = {
    "name": "echo",
    "description": "Echo the arguments",
    "provider": "echoer",
    "url": f"{UPSTREAM}/echo",
    "method": "POST",
    "auth": {"type": "header", "name": "Authorization", "prefix": "Token "},
    "input_schema": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 100},
            "times": {"type": "integer", "minimum": 1, "maximum": 3},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "response_headers": ["X-Request-Id"],
    "timeout_seconds": 2,
}

ISSUES_TOOL: dict[str, Any] = {
    "name": "list_issues",
    "description": "List a repository's issues",
    "provider": "forge",
    "url": f"{UPSTREAM}/repos/{{owner}}/{{repo}}/issues",
    "method": "GET",
    "auth": {"type": "query", "name": "access_token"},
    "input_schema": {
        "type": "object",
        "properties": {
            "owner": {"type": "string"},
            "repo": {"type": "string"},
            "state": {"enum": ["open", "closed"]},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["owner", "repo"],
    },
}


@dataclass
class Seeded:
    gateway: Gateway
    key: str
    key_id: str
    other_key: str
    memory_only_key: str


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    clock = FixedClock()
    kv = SqliteKV(":memory:", clock=clock)
    yield Gateway(kv=kv, clock=clock, upstream=Upstream())
    kv.close()


@pytest.fixture
async def seeded(gateway: Gateway) -> Seeded:
    """Tenant `acme` with tools echo + list_issues and their credentials; tenant `globex`
    with no tools. Keys: acme (all scopes), globex, and an acme key with only `memory`."""
    kv, clock = gateway.kv, gateway.clock
    await admin_ops.create_tenant(kv, clock, TENANT, memory_enabled=True)
    await admin_ops.create_tenant(kv, clock, OTHER_TENANT)
    issued = await admin_ops.issue_api_key(kv, clock, TENANT, label="laptop")
    other = await admin_ops.issue_api_key(kv, clock, OTHER_TENANT)
    memory_only = await admin_ops.issue_api_key(kv, clock, TENANT, scopes=["memory"])
    await admin_ops.register_tool(kv, TENANT, ECHO_TOOL)
    await admin_ops.register_tool(kv, TENANT, ISSUES_TOOL)
    await admin_ops.set_credential(kv, clock, TENANT, "echoer", "s3cret-echo")
    await admin_ops.set_credential(kv, clock, TENANT, "forge", "s3cret-forge")
    return Seeded(gateway, issued.api_key, issued.key_id, other.api_key, memory_only.api_key)


def gateway_error(response: HttpResponse) -> tuple[int, str]:
    """(status, code) of a gateway error, checking it is marked as the gateway's own."""
    body = response.json()
    code = body["error"]["code"]
    assert response.headers.get("x-gateway-error") == code
    assert response.headers.get("x-upstream-status") is None
    assert body["error"]["message"]
    return response.status, code
