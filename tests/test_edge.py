"""The edge's contract: unknown route 404, wrong method 405, oversized body 413, malformed
JSON 400, failed validation 422, unexpected failures 500 — always a JSON error body."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel, Field

from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from http_messages import ApiError, Headers, HttpRequest, HttpResponse, json_response
from local_runtime.background import LocalBackgroundTasks
from worker import app
from worker.routing import Call, Route, Router, parse_body


def _bindings(**settings: object) -> Bindings:
    return Bindings(
        settings=Settings(environment="test", **settings),  # type: ignore[arg-type]
        clock=FixedClock(),
        background=LocalBackgroundTasks(),
    )


def _error(response: HttpResponse) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert response.headers.get("content-type") == "application/json"
    return response.status, body["error"]["code"]


async def test_unknown_route_is_404() -> None:
    response = await app.handle(HttpRequest("GET", "http://x/nope"), _bindings())
    assert _error(response) == (404, "not_found")


@pytest.mark.parametrize("method", ["PROPFIND", "patch", "M-SEARCH", "BREW"])
async def test_any_method_string_gets_a_json_405_or_404(method: str) -> None:
    # The Worker entry passes the client's method string through unchanged (tests/pyodide,
    # test_entry.py): whatever it is, the app answers with a JSON error, never a crash.
    known = await app.handle(HttpRequest(method, "http://x/healthz"), _bindings())
    assert _error(known) == (405, "method_not_allowed")
    unknown = await app.handle(HttpRequest(method, "http://x/nope"), _bindings())
    assert _error(unknown) == (404, "not_found")


async def test_wrong_method_is_405_and_names_the_allowed_ones() -> None:
    response = await app.handle(HttpRequest("DELETE", "http://x/healthz"), _bindings())
    assert _error(response) == (405, "method_not_allowed")
    assert response.json()["error"]["details"]["allowed"] == ["GET"]


async def test_body_over_the_limit_is_413_before_any_route_runs() -> None:
    request = HttpRequest("POST", "http://x/healthz", body=b"x" * 2048)
    response = await app.handle(request, _bindings(max_body_bytes=1024))
    assert _error(response) == (413, "payload_too_large")


async def test_healthz_reports_bindings_and_embedding_config() -> None:
    from tests.fakes.embedder import HashingEmbedder

    bindings = Bindings(
        settings=Settings(environment="test"),
        clock=FixedClock(),
        background=LocalBackgroundTasks(),
        embedder=HashingEmbedder(),
    )
    body = (await app.handle(HttpRequest("GET", "http://x/healthz"), bindings)).json()
    assert body["status"] == "ok"
    assert body["bindings"]["ai_embedder"] is True
    assert body["bindings"]["d1"] is False
    assert body["embedding"] == dataclasses.asdict(HashingEmbedder().config)


class _Body(BaseModel):
    name: str = Field(min_length=1)
    count: int = Field(ge=0)


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b"", 400, "invalid_json"),
        (b"{nope", 400, "invalid_json"),
        (b"\xff\xfe", 400, "invalid_json"),
        (b'{"name": "", "count": -1}', 422, "validation_error"),
        (b"[1, 2]", 422, "validation_error"),
    ],
)
def test_bad_bodies_get_stable_codes(raw: bytes, status: int, code: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_body(HttpRequest("POST", "http://x/", body=raw), _Body)
    assert (caught.value.status, caught.value.code) == (status, code)


def test_validation_errors_name_each_field() -> None:
    with pytest.raises(ApiError) as caught:
        parse_body(HttpRequest("POST", "http://x/", body=b'{"name": "", "count": -1}'), _Body)
    fields = {p["field"] for p in (caught.value.details or {})["problems"]}
    assert fields == {"name", "count"}


async def test_an_unexpected_exception_becomes_a_json_500() -> None:
    async def boom(call: Call[None, None]) -> HttpResponse:
        raise RuntimeError("secret internals")

    with_boom = app.Router((*app.ROUTES, Route("GET", "/boom", boom, "Fails", "test")))
    response = await with_boom.handle(HttpRequest("GET", "http://x/boom"), _bindings())
    assert _error(response) == (500, "internal_error")
    assert b"secret internals" not in response.body


def test_route_parameters_match_one_segment() -> None:
    async def h(call: Call[None, None]) -> HttpResponse:
        return json_response(call.params)

    router = Router([Route("GET", "/v1/agents/{tenant}/{agent_type}/run", h, "Echo", "test")])
    _, params = router.resolve("GET", "/v1/agents/acme/sdr/run")
    assert params == {"tenant": "acme", "agent_type": "sdr"}
    with pytest.raises(ApiError):
        router.resolve("GET", "/v1/agents/acme/sdr/x/run")
    with pytest.raises(ApiError):
        router.resolve("GET", "/v1/agents//sdr/run")


def test_headers_are_case_insensitive() -> None:
    headers = Headers([("Content-Type", "a"), ("X-Thing", "b")])
    assert headers.get("content-type") == "a"
    assert "x-thing" in headers


def test_one_error_type_answers_at_the_edge_and_in_the_gateway() -> None:
    """Issue 23: `ApiError` and the gateway's `GatewayError` were two classes with the same
    JSON shape; now one class renders every error answer (`http_messages.CodedError`: the
    `ApiError` every layer that answers HTTP raises, and the core's own errors, issue 46)."""
    import ast
    from pathlib import Path

    import gateway.credentials
    import http_messages

    src = Path(__file__).resolve().parents[1] / "src"
    renderers = sorted(
        f"{path.relative_to(src).as_posix()}::{node.name}"
        for path in src.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(
            isinstance(item, ast.FunctionDef) and item.name == "to_response" for item in node.body
        )
    )
    assert renderers == ["http_messages.py::CodedError"]
    assert ApiError is http_messages.ApiError
    refused = gateway.credentials.unauthorized("invalid_api_key", "no such key")
    assert isinstance(refused, ApiError)
    response = gateway.credentials.gateway_error_response(refused)
    assert _error(response) == (401, "invalid_api_key")
    assert response.headers.get("x-gateway-error") == "invalid_api_key"
    # The edge's own errors do not claim to come from the gateway.
    assert ApiError(404, "not_found", "no").to_response().headers.get("x-gateway-error") is None
