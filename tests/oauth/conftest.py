"""Fixtures for the OAuth authorization server: a local runtime on a pinned clock, a client's
metadata document served by an in-memory transport, and a driver that walks the flow the
way a browser and an MCP client would, through `worker.app.handle`.

Nothing here opens a socket: client documents come from `httpx.MockTransport` (recorded,
so a test can prove nothing was sent), and host names resolve through a fake resolver.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from gateway import admin_ops
from gateway.credentials import ISOLATE_CACHE
from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.access_dev import DevAccessTransport, mint_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.fakes.memory_tools import FakeMemoryTools
from worker.app import routes
from worker.identity import ACCESS_HEADER
from worker.routing import Router

BASE = "http://127.0.0.1:8790"
RESOURCE = f"{BASE}/mcp"
TENANT = "acme"
CIMD_URL = "https://client.example.test/oauth/client.json"
CIMD_REDIRECT = "https://client.example.test/callback"
DCR_REDIRECT = "http://127.0.0.1:33418/callback"


FakeMemory = FakeMemoryTools


@dataclass
class Documents:
    """Client metadata documents by URL; every request is recorded."""

    by_url: dict[str, Any] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(str(request.url))
        document = self.by_url.get(str(request.url))
        if document is None:
            return httpx.Response(404)
        if isinstance(document, httpx.Response):  # a test's own answer (a slow one)
            return document
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass
class Authorized:
    """The outcome of one approved authorization."""

    client_id: str
    redirect_uri: str
    verifier: str
    code: str
    params: dict[str, str]


class OAuthDriver:
    """Drives the Worker as a browser (with an Access token) and an OAuth client would."""

    def __init__(self, runtime: LocalRuntime, documents: Documents) -> None:
        self.runtime = runtime
        self.documents = documents
        self.clock: FixedClock = runtime.clock  # type: ignore[assignment]
        self.addresses: dict[str, list[str]] = {"client.example.test": ["8.8.8.8"]}
        self.vars: dict[str, str] = {}
        self.base = BASE
        # No memory tools unless a test hands it some (`use_memory`).
        self.app = Router(routes(memory_tools=None))
        # The dev Access JWKS, and every other request to the recorded documents.
        self.transport = DevAccessTransport(
            runtime.state.access, fallback=httpx.MockTransport(documents)
        )

    def bindings(self) -> Bindings:
        async def resolve(host: str) -> Sequence[str]:
            if host in self.addresses:
                return self.addresses[host]
            raise OSError(f"{host} does not resolve (test resolver)")

        bindings = self.runtime.bindings()
        settings = bindings.settings
        if self.vars:
            from bindings.settings import Settings
            from local_runtime.runtime import LOCAL_VARS

            settings = Settings.from_vars({**LOCAL_VARS, **self.vars})
        return replace(
            bindings,
            settings=settings,
            http_transport=self.transport,
            resolve_host=resolve,
        )

    def access(self, email: str = "ops@example.com") -> str:
        return mint_token(self.runtime.state.access, email, now=self.clock.now())

    async def send(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        base: str | None = None,
    ) -> HttpResponse:
        request = HttpRequest(method, (base or self.base) + path, Headers(headers or {}), body)
        return await self.app.handle(request, self.bindings())

    def use_memory(self, memory: FakeMemoryTools) -> None:
        """Build the app with `memory` as MCP's memory tools, as the Worker wires its own."""
        self.app = Router(routes(memory_tools=lambda bindings: memory))

    async def form(
        self, path: str, data: dict[str, str], headers: dict[str, str] | None = None
    ) -> HttpResponse:
        all_headers = {"content-type": "application/x-www-form-urlencoded", **(headers or {})}
        return await self.send("POST", path, urlencode(data).encode(), all_headers)

    async def register(self, **metadata: Any) -> dict[str, Any]:
        body = {
            "client_name": "Test Client",
            "redirect_uris": [DCR_REDIRECT],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            **metadata,
        }
        response = await self.send("POST", "/register", json.dumps(body).encode())
        assert response.status == 201, response.body
        registered: dict[str, Any] = response.json()
        return registered

    async def authorize_page(
        self,
        client_id: str,
        redirect_uri: str,
        challenge: str,
        *,
        access: str | None = None,
        **extra: str,
    ) -> HttpResponse:
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "state": "st-1",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": RESOURCE,
            **extra,
        }
        headers = {ACCESS_HEADER: access if access is not None else self.access()}
        if access == "":
            headers = {}
        return await self.send("GET", "/authorize?" + urlencode(query), headers=headers)

    async def decide(
        self,
        page: HttpResponse,
        *,
        tenant: str = TENANT,
        decision: str = "approve",
        scopes: Sequence[str] | None = None,
        access: str | None = None,
    ) -> HttpResponse:
        assert page.status == 200, page.body
        html = page.body.decode()
        ticket = unescape(re.search(r"name=ticket value='([^']+)'", html).group(1))  # type: ignore[union-attr]
        offered = re.findall(r"name='scope\.([^']+)'", html)
        data = {"ticket": ticket, "tenant": tenant, "decision": decision}
        for scope in offered if scopes is None else scopes:
            data[f"scope.{scope}"] = "on"
        return await self.form("/authorize", data, {ACCESS_HEADER: access or self.access()})

    async def authorize(
        self, client_id: str, redirect_uri: str, *, scopes: Sequence[str] | None = None
    ) -> Authorized:
        verifier, challenge = pkce_pair()
        page = await self.authorize_page(client_id, redirect_uri, challenge)
        response = await self.decide(page, scopes=scopes)
        assert response.status == 302, response.body
        params = redirect_params(response)
        return Authorized(client_id, redirect_uri, verifier, params["code"], params)

    async def exchange(self, auth: Authorized, **overrides: str) -> HttpResponse:
        data = {
            "grant_type": "authorization_code",
            "code": auth.code,
            "redirect_uri": auth.redirect_uri,
            "client_id": auth.client_id,
            "code_verifier": auth.verifier,
            "resource": RESOURCE,
            **overrides,
        }
        return await self.form("/token", data)

    async def refresh(self, client_id: str, refresh_token: str, **extra: str) -> HttpResponse:
        data = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        return await self.form("/token", {**data, "client_id": client_id, **extra})

    async def mcp(
        self, token: str, method: str, params: dict[str, Any] | None = None, base: str | None = None
    ) -> HttpResponse:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            message["params"] = params
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        return await self.send("POST", "/mcp", json.dumps(message).encode(), headers, base)


def redirect_params(response: HttpResponse) -> dict[str, str]:
    location = response.headers.get("location") or ""
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


@pytest.fixture(autouse=True)
def fresh_isolate() -> Iterator[None]:
    """An empty read cache (a fresh isolate)."""
    ISOLATE_CACHE.clear()
    yield
    ISOLATE_CACHE.clear()


@pytest.fixture
async def oauth_runtime(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    # Pinned at the real time so PyJWT's own expiry checks agree with the Worker's.
    clock = FixedClock(float(int(time.time())))
    rt = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder(), clock=clock)
    await rt.migrate()
    await admin_ops.create_tenant(rt.kv, rt.clock, TENANT, memory_enabled=True)
    await admin_ops.create_tenant(rt.kv, rt.clock, "globex", memory_enabled=True)
    yield rt
    await rt.close()


@pytest.fixture
def documents() -> Documents:
    return Documents(
        {
            CIMD_URL: {
                "client_id": CIMD_URL,
                "client_name": "Example Assistant",
                "redirect_uris": [CIMD_REDIRECT],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }
        }
    )


@pytest.fixture
def oauth(oauth_runtime: LocalRuntime, documents: Documents) -> OAuthDriver:
    return OAuthDriver(oauth_runtime, documents)
