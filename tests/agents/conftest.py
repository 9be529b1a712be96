"""Fixtures for the agent-run path: a local runtime, a valid Access token, a request helper."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from http_messages import Headers, HttpRequest, HttpResponse
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from worker.app import handle
from worker.identity import ACCESS_HEADER

Send = Callable[..., Awaitable[HttpResponse]]


@pytest.fixture
async def agent_runtime(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    """A migrated local runtime with the default scripted model."""
    rt = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    await rt.migrate()
    yield rt
    await rt.close()


@pytest.fixture
def token(agent_runtime: LocalRuntime) -> str:
    return mint_token(agent_runtime.state.access, "ops@example.com", now=agent_runtime.clock.now())


def build_request(
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = None,
    raw: bytes | None = None,
) -> HttpRequest:
    headers = Headers({"content-type": "application/json"})
    if token is not None:
        headers.set(ACCESS_HEADER, token)
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    return HttpRequest(method, f"http://127.0.0.1:8790{path}", headers, data)


@pytest.fixture
def send(agent_runtime: LocalRuntime, token: str) -> Send:
    """`await send("POST", path, body)` through the Worker's handler with a valid token."""

    async def _send(
        method: str,
        path: str,
        body: Any = None,
        *,
        token_override: str | None = None,
        anonymous: bool = False,
        raw: bytes | None = None,
    ) -> HttpResponse:
        used = None if anonymous else (token_override or token)
        request = build_request(method, path, body, token=used, raw=raw)
        return await handle(request, agent_runtime.bindings())

    return _send
