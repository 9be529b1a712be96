"""Finding 5 of issue 14: an OpenAPI 3.1 document of every route, served at
`/openapi.json`, and a schemathesis run against the local dev server over loopback:
no 5xx, and every response conforms to the document (status, content type, schema).

Each operation is called with the credentials of its security scheme (an Access token of a
platform admin, the tenant's API key, or a memory token of the seeded agent; issue 26: every
route was sent the API key, so no memory-API handler was reached, and the Access token was
"not valid yet", so no Access-gated one was either). The routes added after the second audit
are fuzzed again with every other caller's credentials (issue 47). Bounded for CI:
`SCHEMATHESIS_MAX_EXAMPLES` examples per operation (default 6). A longer run
(docs/architecture.md):

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

from authorization.operator_grants import grant
from gateway import admin_ops
from http_messages import HttpResponse
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from tests.hardening.test_audit_new_routes import oauth_token
from worker.app import ROUTES
from worker.identity import ACCESS_HEADER, MintRequest, mint_memory_token
from worker.openapi import build_document
from worker.routing import LazyHandler, Route

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# live server starts once, not once per worker.
pytestmark = pytest.mark.xdist_group("openapi-live")

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "6"))
SCHEMA = schemathesis.openapi.from_dict(build_document(ROUTES, local=True))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


TENANT, AGENT = "acme", "agent-a"
# The routes added after the second audit (issue 47): fuzzed again with every caller's
# credentials, each scheme's and a tenant's operators', not only their own scheme's.
NEW_ROUTES = SCHEMA.include(
    path_regex=r"^/admin/(shards|moves)|/(restore|replay|namespace-backfill|oauth-clients)"
)


@dataclass(frozen=True)
class Live:
    base: str
    # The headers of each security scheme (the document's `security` of an operation).
    schemes: dict[str, dict[str, str]]
    # Every other caller: a tenant's operator and another tenant's, an OAuth token, none.
    callers: dict[str, dict[str, str]]

    def headers(self, case: schemathesis.Case) -> dict[str, str]:
        security = case.operation.definition.raw.get("security") or [{}]
        return {k: v for scheme in security[0] for k, v in self.schemes[scheme].items()}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The dev server on a free loopback port (memory-token keys configured, as the local
    runtime does): tenant `acme` with an API key and memory on, a dev Access token of a
    platform admin and a memory token of `agent-a` with every tier and scope, so the fuzz
    reaches past each route's authentication."""
    state: Path = tmp_path_factory.mktemp("openapi") / "state"
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())

    async def seed() -> tuple[str, str, str]:
        await runtime.migrate()
        assert runtime.kv is not None and runtime.db is not None
        await admin_ops.create_tenant(runtime.kv, runtime.clock, TENANT, memory_enabled=True)
        key = (await admin_ops.issue_api_key(runtime.kv, runtime.clock, TENANT)).api_key
        minted = await mint_memory_token(
            runtime.bindings(), TENANT, MintRequest(agent_id=AGENT, ttl_seconds=86_400)
        )
        for tenant, email in ((TENANT, "ann@acme.example"), ("globex", "gus@globex.example")):
            await grant(runtime.bindings(), tenant, "email", email, "openapi")
        oauth = await oauth_token(runtime, TENANT, ("tools", "memory:read"), "http://127.0.0.1")
        return key, minted.token, oauth

    key, memory_token, oauth = asyncio.run(seed())
    # Valid from now (8 h): a token minted an hour ahead was "not valid yet", so no
    # Access-gated route was fuzzed past its gate.
    access = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now())
    schemes = {
        "cloudflareAccess": {ACCESS_HEADER: access},
        "apiKey": {"Authorization": f"Bearer {key}"},
        "memoryToken": {"Authorization": f"Bearer {memory_token}"},
    }
    now = runtime.clock.now()
    callers = {
        "tenant operator": {
            ACCESS_HEADER: mint_token(runtime.state.access, "ann@acme.example", now=now)
        },
        "another tenant's operator": {
            ACCESS_HEADER: mint_token(runtime.state.access, "gus@globex.example", now=now)
        },
        "api key": schemes["apiKey"],
        "memory token": schemes["memoryToken"],
        "OAuth token": {"Authorization": f"Bearer {oauth}"},
        "none": {},
    }
    with running_server(runtime) as base:
        yield Live(base, schemes, callers)


def test_every_route_is_documented() -> None:
    routed = {(route.method.lower(), route.path) for route in ROUTES}
    paths = build_document(ROUTES)["paths"]
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


def test_each_schemes_credentials_get_past_its_gate(live: Live) -> None:
    """The fuzz below reaches handlers: each scheme's headers open its routes."""
    calls = {
        "cloudflareAccess": ("GET", f"/admin/tenants/{TENANT}/lifecycle", 200),
        "memoryToken": ("GET", f"/api/v1/memory/{AGENT}?tier=working", 200),
        "apiKey": ("POST", "/api/v1/tools/no_such_tool", 404),  # past the key check
    }
    for scheme, (method, path, status) in calls.items():
        answer = httpx.request(method, live.base + path, headers=live.schemes[scheme], json={})
        assert answer.status_code == status, (scheme, answer.text)


@SCHEMA.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_the_api_conforms_to_its_document(case: schemathesis.Case, live: Live) -> None:
    """Every generated input, with the credentials its route needs and the seeded tenant and
    agent in the path (so inputs reach the handlers, not just the gates): no 5xx, and the
    answer is what the document says."""
    params = case.path_parameters or {}
    for name, value in (("tenant", TENANT), ("agent_id", AGENT)):
        if name in params:
            params[name] = value
    case.call_and_validate(base_url=live.base, headers=live.headers(case), checks=CHECKS)


def test_the_new_routes_are_all_fuzzed_with_every_caller() -> None:
    assert len(list(NEW_ROUTES.get_all_operations())) == 11


# Callers the gates refuse (401/403 before any handler): two examples each are enough.
REFUSED = ["another tenant's operator", "api key", "memory token", "OAuth token", "none"]


def fuzz_as(caller: str, case: schemathesis.Case, live: Live) -> None:
    """Issue 47: a new route with `caller`'s credentials: no 5xx, every answer as the
    document says (a refusal is a documented 401/403 error)."""
    params = case.path_parameters or {}
    if "tenant" in params:
        params["tenant"] = TENANT
    case.call_and_validate(base_url=live.base, headers=live.callers[caller], checks=CHECKS)


FUZZ = {
    "deadline": None,
    "derandomize": True,
    "phases": [Phase.explicit, Phase.generate],
    "suppress_health_check": list(HealthCheck),
}


@NEW_ROUTES.parametrize()
@settings(max_examples=MAX_EXAMPLES, **FUZZ)
def test_the_new_routes_hold_for_a_tenants_operator(case: schemathesis.Case, live: Live) -> None:
    fuzz_as("tenant operator", case, live)


@pytest.mark.parametrize("caller", REFUSED)
@NEW_ROUTES.parametrize()
@settings(max_examples=min(MAX_EXAMPLES, 2), **FUZZ)
def test_the_new_routes_refuse_every_other_caller(
    case: schemathesis.Case, live: Live, caller: str
) -> None:
    fuzz_as(caller, case, live)
