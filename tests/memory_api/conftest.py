"""Fixtures for the uniform memory API: a runtime on a pinned clock, token minting, a client."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from bindings.ports.clock import FixedClock
from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from worker.app import handle
from worker.identity import ACCESS_HEADER

KEYS = {"k2": "second-secret-" + "b" * 32, "k1": "first-secret-" + "a" * 32}
BASE = "http://127.0.0.1:8790"


class Client:
    """Requests through the Worker's handler: agent tokens as Bearer, operators via Access."""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self.operator = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now())

    async def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        access: str | None = None,
        query: dict[str, Any] | None = None,
        raw: bytes | None = None,
    ) -> HttpResponse:
        headers = Headers({"content-type": "application/json"})
        if token is not None:
            headers.set("authorization", f"Bearer {token}")
        if access is not None:
            headers.set(ACCESS_HEADER, access)
        target = path + (f"?{urlencode(query)}" if query else "")
        data = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
        response = await handle(
            HttpRequest(method, BASE + target, headers, data), self.runtime.bindings()
        )
        # What the Worker leaves to `waitUntil` (events, recall statistics) runs after the
        # response, as the local server does.
        await self.runtime.background.drain()
        return response

    async def mint(self, tenant: str, agent_id: str, **body: Any) -> str:
        response = await self.send(
            "POST",
            f"/admin/tenants/{tenant}/memory-tokens",
            {"agent_id": agent_id, **body},
            access=self.operator,
        )
        assert response.status == 201, response.json()
        token: str = response.json()["token"]
        return token

    async def write(self, token: str, agent_id: str, **body: Any) -> HttpResponse:
        return await self.send("POST", f"/api/v1/memory/{agent_id}", body, token=token)

    async def read(self, token: str, agent_id: str, **query: Any) -> HttpResponse:
        return await self.send("GET", f"/api/v1/memory/{agent_id}", token=token, query=query)

    async def delete(self, token: str, agent_id: str, key: str, tier: str) -> HttpResponse:
        return await self.send(
            "DELETE", f"/api/v1/memory/{agent_id}/{key}", token=token, query={"tier": tier}
        )


@pytest.fixture
def clock() -> FixedClock:
    # Pinned at the real time so PyJWT's own expiry checks agree with the Worker's.
    return FixedClock(float(int(time.time())))


@pytest.fixture
async def memory_runtime(tmp_path: Path, clock: FixedClock) -> AsyncIterator[LocalRuntime]:
    rt = LocalRuntime.open(
        tmp_path / "state",
        embedder=HashingEmbedder(),
        clock=clock,
        vars={"MEMORY_TOKEN_KEYS": json.dumps(KEYS)},
    )
    await rt.migrate()
    yield rt
    await rt.close()


@pytest.fixture
def client(memory_runtime: LocalRuntime) -> Client:
    return Client(memory_runtime)
