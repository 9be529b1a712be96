"""Finding 5 of issue 14: an OpenAPI 3.1 document of every route, served at
`/openapi.json`, and a schemathesis run against the local dev server over loopback:
no 5xx, and every response conforms to the document (status, content type, schema).

Bounded for CI: `SCHEMATHESIS_MAX_EXAMPLES` examples per operation (default 6). A longer
run (docs/architecture.md):

    SCHEMATHESIS_MAX_EXAMPLES=500 uv run pytest tests/hardening/test_openapi.py -q
"""

from __future__ import annotations

import asyncio
import inspect
import os
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gateway import admin_ops
from http_messages import HttpResponse
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from worker.app import ROUTES, LazyHandler, Route
from worker.identity import ACCESS_HEADER
from worker.openapi import build_document

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "6"))
SCHEMA = schemathesis.openapi.from_dict(build_document(local=True))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@dataclass(frozen=True)
class Live:
    base: str
    headers: dict[str, str]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The dev server on a free loopback port: tenant `acme` with an API key and memory on,
    and a valid dev Access token, so the fuzz reaches past authentication."""
    state: Path = tmp_path_factory.mktemp("openapi") / "state"
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())

    async def seed() -> str:
        await runtime.migrate()
        assert runtime.kv is not None
        await admin_ops.create_tenant(runtime.kv, runtime.clock, "acme", memory_enabled=True)
        return (await admin_ops.issue_api_key(runtime.kv, runtime.clock, "acme")).api_key

    key = asyncio.run(seed())
    token = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now() + 3600)
    with running_server(runtime) as base:
        yield Live(base, {ACCESS_HEADER: token, "Authorization": f"Bearer {key}"})


def test_every_route_is_documented() -> None:
    routed = {(route.method.lower(), route.path) for route in ROUTES}
    paths = build_document()["paths"]
    documented = {(method, path) for path, item in paths.items() for method in item}
    assert routed == documented


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_each_routes_models_are_what_its_handler_takes_and_returns(route: Route) -> None:
    """The document shows the handler's own types: `Call[body, query] -> response` (mypy
    then checks the handler really returns it, and the router checks again at runtime)."""
    handler = route.handler.resolve() if isinstance(route.handler, LazyHandler) else route.handler
    # A handler object (the MCP route, built with its memory tools) is typed on __call__.
    typed = handler if inspect.isfunction(handler) else type(handler).__call__
    hints = typing.get_type_hints(typed)
    (call,) = (hint for name, hint in hints.items() if name != "return")
    declared = (route.model(route.body), route.model(route.query))
    if route.response is None:
        assert hints["return"] is HttpResponse
        assert declared == (None, None)
        return
    assert hints["return"] is route.model(route.response)
    assert typing.get_args(call) == tuple(type(None) if m is None else m for m in declared)


def test_the_document_is_served_as_openapi_3_1(live: Live) -> None:
    document = httpx.get(f"{live.base}/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == {route.path for route in ROUTES} | {
        "/cdn-cgi/handler/scheduled",
        "/cdn-cgi/local/scheduled",
    }
    run = document["paths"]["/v1/agents/{tenant}/{agent_type}/run"]["post"]
    body = run["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert document["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]["subject"]


@SCHEMA.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_the_api_conforms_to_its_document(case: schemathesis.Case, live: Live) -> None:
    case.call_and_validate(base_url=live.base, headers=dict(live.headers), checks=CHECKS)
