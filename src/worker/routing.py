"""Routing: what a route is (`Route`: method, path, handler, auth, models, stated once, so
`Router` and `worker.openapi` cannot disagree), what its handler is given (`Call`) and `Router`,
which serves a route table. `Router.dispatch`, before any handler runs: the raw path (404, 405
with `Allow`, 422 `invalid_path`), the route's `auth` gate, the body strictly (DESIGN invariant
7; issue 26) and the query. `Router.handle` is the one place an exception becomes an HTTP
answer: an `ApiError` (the core's errors are ones, with their code and status) as itself, a
binding's limit 422, a foreign cursor 422, a fenced tenant 503, anything else 500.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar, cast
from urllib.parse import unquote

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from agent_memory.ids import ULID_PATTERN
from agent_memory.namespace import TENANT_PATTERN
from bindings.environment import Bindings
from bindings.ports.d1 import met_fence
from bindings.ports.errors import BindingLimitError
from http_messages import (
    STORAGE_LIMITS,
    ApiError,
    CodedError,
    HttpRequest,
    HttpResponse,
    JsonLimitError,
    empty_response,
    internal_error,
    json_response,
    loads_bounded,
    method_not_allowed,
    payload_too_large,
    secure_response,
    validation_error,
)

B = TypeVar("B")
Q = TypeVar("Q")
M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)


# What browser MCP clients read of an answer (Streamable HTTP; the 401's challenge).
CORS_EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"

# No parameter of ours is longer: subjects are capped at 256 characters, ids far below.
MAX_PARAM_CHARS = 256
MAX_METADATA_BYTES = 4096


def has_control(value: str | None) -> bool:
    """Category Cc: C0 controls (NUL, tab, CR, LF...), DEL and the C1 controls."""
    return value is not None and any(unicodedata.category(c) == "Cc" for c in value)


def _subject(value: str) -> str:
    # Subjects are matched, erased and shown as identifiers: no control characters.
    if has_control(value):
        raise ValueError("subject must not contain control characters")
    return value


def _metadata(value: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
    return value


class StrictModel(BaseModel):
    """A body or query model: an unknown field is a 422, never ignored."""

    model_config = ConfigDict(extra="forbid")


# Field types the edge's body and query models share.
Subject = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_subject)]
Metadata = Annotated[dict[str, Any], AfterValidator(_metadata)]


@dataclass(frozen=True)
class Param:
    """A path parameter: what it is, and the full-match rule it must pass (`None`: only the
    generic checks; the handler answers 404 for a well-formed unknown id)."""

    description: str
    pattern: str | None = None


PATH_PARAMS: dict[str, Param] = {
    "tenant": Param(
        "Tenant id: 1-63 of a-z, 0-9, '_' or '-', starting with a letter or digit",
        TENANT_PATTERN,
    ),
    "agent_type": Param("A registered agent type"),
    "agent_id": Param("The agent (instance) id the memory token is for"),
    "run_id": Param("A run's ULID"),
    "fact_id": Param("A fact's ULID", ULID_PATTERN.pattern),
    "event_id": Param("A memory event's ULID", ULID_PATTERN.pattern),
    "episode_id": Param("An episode's id"),
    "subject": Param("A subject, percent-encoded (decoded once)"),
    "key": Param("A working or episodic memory key"),
    "jti": Param("A memory token's id (a ULID)", ULID_PATTERN.pattern),
    "name": Param("A workflow pack's name"),
    "grant_id": Param("A connected OAuth client's grant id"),
    "tool_name": Param("A tool registered for the API key's tenant"),
    "job_id": Param("An export's id (a ULID)"),
    "part": Param("An export part's number (0: the header)"),
    "endpoint_id": Param("A webhook endpoint's id (a ULID)"),
}

_RULES = {name: re.compile(p.pattern) for name, p in PATH_PARAMS.items() if p.pattern}
_PARAM = re.compile(r"\{([a-z_]+)\}")


def invalid_path(name: str, problem: str) -> ApiError:
    return ApiError(422, "invalid_path", f"path parameter {name!r} {problem}", {"param": name})


def decode_param(name: str, raw: str) -> str:
    """Percent-decode one raw path segment once and check it; raises 422 `invalid_path`."""
    try:
        value = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise invalid_path(name, "is not valid percent-encoded UTF-8") from None
    if not value:
        raise invalid_path(name, "is empty")
    if len(value) > MAX_PARAM_CHARS:
        raise invalid_path(name, f"is longer than {MAX_PARAM_CHARS} characters")
    if has_control(value):
        raise invalid_path(name, "contains a control character")
    rule = _RULES.get(name)
    if rule is not None and rule.fullmatch(value) is None:
        raise invalid_path(name, f"does not match {rule.pattern}")
    return value


def parse_body(request: HttpRequest, model: type[M]) -> M:
    """The body as `model`, strictly. JSON is decoded under the storage limits (depth,
    number and string size, no NUL: these bodies reach storage): 400 `invalid_json` (also
    for an empty body), 413 `json_too_deep` / `number_too_large` / `string_too_long`, 422
    `invalid_character`; then 422 `validation_error` listing each failing field."""
    if not request.body:
        raise ApiError(400, "invalid_json", "request body is empty; expected JSON")
    try:
        data = loads_bounded(request.body, STORAGE_LIMITS)
    except JsonLimitError as exc:  # its status: 400 invalid_json, 422 a character, else 413
        raise ApiError(exc.status, exc.code, exc.message) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None
    return parse_model(data, model, strict=True)


def parse_model(data: Any, model: type[M], *, strict: bool = False) -> M:
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise validation_error("request body failed validation", {"problems": problems}) from None


@dataclass(frozen=True)
class Call(Generic[B, Q]):
    """What a handler is given: the request, its decoded path parameters, the bindings, what
    the route's gate let in (`auth`: an `ACCESS` route's `worker.identity.AccessIdentity`, a
    `MEMORY_TOKEN` route's `MemoryTokenClaims`), and the parsed body and query (`None` if
    undeclared)."""

    request: HttpRequest
    params: dict[str, str]
    bindings: Bindings
    auth: Any
    body: B
    query: Q


Handler = Callable[[Call[Any, Any]], Awaitable[BaseModel | HttpResponse]]


class LazyHandler:
    """A handler (or gate) named `"package.module:attribute"`, imported on its first call and
    cached for the isolate's life, so its module stays out of the start-up snapshot
    (docs/pyodide.md "Start-up")."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.module, _, self._attribute = target.partition(":")
        self._resolved: Any = None

    def resolve(self) -> Any:
        if self._resolved is None:
            self._resolved = getattr(importlib.import_module(self.module), self._attribute)
        return self._resolved


lazy = LazyHandler


@dataclass(frozen=True)
class Auth:
    """Who may call a route: the OpenAPI security scheme it is documented with, and the
    gate the router runs before anything else (`None`: nothing to check here, or the
    handler's own business, as the tool gateway's API keys on the KV-only hot path)."""

    scheme: str
    spec: dict[str, str] = field(default_factory=dict)
    gate: LazyHandler | None = None


PUBLIC = Auth("")
API_KEY = Auth("apiKey", {"type": "http", "scheme": "bearer"})
ModelRef = type[BaseModel] | str | None


@dataclass(frozen=True)
class Route:
    """One route, stated once. Model references are classes or names in the handler's
    module; `response=None` means no fixed JSON shape (the handler answers an
    `HttpResponse`: the relayed tool call, MCP, this API's document)."""

    method: str
    path: str
    handler: Handler | LazyHandler
    summary: str
    tag: str
    auth: Auth = PUBLIC
    body: ModelRef = None
    body_required: bool = True
    query: ModelRef = None
    response: ModelRef = None
    status: int = 200
    # The handler runs while the token's deny-list lookup is in flight (one round trip fewer)
    # and writes only once it is confirmed.
    overlap_auth: bool = False
    # Browsers may call it from the origins in MCP_ALLOWED_ORIGINS (`Router.handle`).
    cors: bool = False

    def model(self, ref: ModelRef) -> type[BaseModel] | None:
        """The model `ref` names (imports the handler's module for a name)."""
        if not isinstance(ref, str):
            return ref
        handler = self.handler
        module = handler.module if isinstance(handler, LazyHandler) else handler.__module__
        return cast("type[BaseModel]", getattr(importlib.import_module(module), ref))

    def regex(self) -> re.Pattern[str]:
        # A parameter matches one non-empty path segment.
        body = _PARAM.sub(
            lambda m: f"(?P<{m.group(1)}>[^/]+)",
            re.escape(self.path).replace(r"\{", "{").replace(r"\}", "}"),
        )
        return re.compile(body)  # used with fullmatch: `^...$` would pass a trailing newline


class Router:
    """The Worker's request handling over a route table: the one the entry and the local
    runtime serve is `worker.app.APP`; a test may build one with other wiring."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = tuple(routes)
        self._compiled = [(route.regex(), route) for route in self.routes]
        self._cors: dict[str, list[str]] = {}
        for route in self.routes:
            if route.cors:
                self._cors.setdefault(route.path, []).append(route.method)

    def resolve(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        """The route and its decoded, checked path parameters for the raw `path` (module doc)."""
        allowed: list[str] = []
        for regex, route in self._compiled:
            match = regex.fullmatch(path)
            if match is None:
                continue
            if route.method == method.upper():
                params = {name: decode_param(name, raw) for name, raw in match.groupdict().items()}
                return route, params
            allowed.append(route.method)
        if allowed:
            raise method_not_allowed(sorted(set(allowed)))
        raise ApiError(404, "not_found", f"no route for {path}")

    async def dispatch(self, request: HttpRequest, bindings: Bindings) -> HttpResponse:
        """Serve `request`: path, auth, body and query, handler, response (module doc)."""
        route, params = self.resolve(request.method, request.path)
        gate = route.auth.gate
        auth = None if gate is None else await gate.resolve()(request, params, bindings)
        # A memory token's deny-list lookup is in flight: confirmed before the handler, or
        # after it for an `overlap_auth` route; whatever it answered, a revoked token gets 401.
        confirm = getattr(auth, "confirm", None)
        if confirm is not None and not route.overlap_auth:
            await confirm()
        try:
            body: BaseModel | None = None
            if (body_model := route.model(route.body)) is not None:
                empty = not request.body and not route.body_required
                body = body_model() if empty else parse_body(request, body_model)
            query_model = route.model(route.query)
            query = None if query_model is None else parse_model(request.query, query_model)
            handler = route.handler
            if isinstance(handler, LazyHandler):
                handler = handler.resolve()
            answer = await handler(Call(request, params, bindings, auth, body, query))
        finally:
            if confirm is not None:  # raising here (revoked) replaces the handler's answer
                await confirm()
        expected = route.model(route.response) or HttpResponse
        if not isinstance(answer, expected):
            raise TypeError(f"{route.method} {route.path} answered {type(answer).__name__}")
        if isinstance(answer, HttpResponse):
            return answer
        return json_response(answer.model_dump(mode="json"), status=route.status)

    async def handle(self, request: HttpRequest, bindings: Bindings) -> HttpResponse:
        """Answer one request. Never raises: every failure is a JSON error response. Every
        answer carries the security headers, and admin and memory answers `no-store`
        (`http_messages.secure_response`). On a `cors` route a browser's preflight is
        answered, and answers name the `Origin`, for origins in `MCP_ALLOWED_ORIGINS` only
        (never `*`: no credentials, and bearer tokens are not cookies)."""
        methods = self._cors.get(request.path)
        origin = (request.headers.get("origin") or "").strip().lower()
        allowed = methods is not None and origin in bindings.settings.mcp_origins
        if methods is not None and request.method == "OPTIONS" and origin:  # a preflight
            refusal = ApiError(403, "origin_not_allowed", "this Origin may not call this route")
            asked = request.headers.get("access-control-request-headers") or ""
            preflight = {
                "access-control-allow-methods": ", ".join(methods),
                "access-control-allow-headers": asked,
                "access-control-max-age": "600",
            }
            response = empty_response(204, preflight) if allowed else refusal.to_response()
        else:
            response = await self._answer(request, bindings)
        if methods is not None:
            response.headers.set("vary", "Origin")
        if allowed:
            response.headers.set("access-control-allow-origin", origin)
            response.headers.set("access-control-expose-headers", CORS_EXPOSED)
        return secure_response(request, response)

    async def _answer(self, request: HttpRequest, bindings: Bindings) -> HttpResponse:
        try:
            if len(request.body) > bindings.settings.max_body_bytes:
                raise payload_too_large(bindings.settings.max_body_bytes)
            return await self.dispatch(request, bindings)
        except CodedError as exc:  # the edge's refusals and the core's, with their own code
            return exc.to_response()
        except BindingLimitError as exc:
            return ApiError(422, "limit_exceeded", str(exc)).to_response()
        except Exception as exc:
            if met_fence(exc):  # the tenant is moving: 503, and re-read its home (directory)
                from agent_memory.directory import note_fenced

                return note_fenced(bindings.clock.now()).to_response()
            # The path can carry a subject (the erase route): log its hash and size, not it.
            digest = hashlib.sha256(request.path.encode()).hexdigest()[:16]
            log.exception(
                "unhandled error on %s path sha256=%s (%d bytes)",
                request.method,
                digest,
                len(request.path),
            )
            return internal_error().to_response()
