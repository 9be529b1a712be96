"""The hot path: `POST /api/v1/tools/{tool_name}` and MCP `tools/call` of proxied tools: (1) KV
auth; (2) KV config; (3) input checks without I/O (size, JSON Schema, url placeholders); (4) KV
credential (so bad input never reaches it); (5) one outbound request; (6) the answer relayed
with `x-upstream-status`. Handed KV, a clock and a client factory, never `Bindings`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway.credentials import (
    ISOLATE_CACHE,
    UPSTREAM_STATUS_HEADER,
    CredentialSealer,
    KVReadCache,
    Principal,
)
from gateway.json_schema import validate
from gateway.outbound import OutboundPolicy, Resolver
from gateway.tool_config import PLACEHOLDER_RE, ToolConfig, load_credential, load_tool
from http_messages import (
    ApiError,
    Headers,
    HttpResponse,
    JsonLimitError,
    JsonLimits,
    loads_bounded,
)

USER_AGENT = "agent-memory-gateway/0.1"

# httpx logs every request's full url at INFO; a tool whose credential goes in the query
# string (`auth.type == "query"`) would put the tenant's token into the logs.
logging.getLogger("httpx").setLevel(logging.WARNING)

# Arguments go upstream, not to our storage: NUL is allowed, one string may fill the budget.
TOOL_ARGUMENT_LIMITS = JsonLimits(max_string_chars=1024 * 1024)

# An httpx client for one call with this timeout (Workers: created inside the handler).
ClientFactory = Callable[[float], httpx.AsyncClient]


@dataclass(frozen=True)
class GatewayContext:
    """What the hot path may touch. `outbound` is built on first use (memory tools never need
    it); `resources`: what an OAuth token must name (RFC 8707)."""

    kv: KVNamespace
    clock: Clock
    client_factory: ClientFactory
    outbound: Callable[[], OutboundPolicy]
    resolver: Resolver | None
    resources: frozenset[str]
    cache: KVReadCache = ISOLATE_CACHE
    sealer: CredentialSealer | None = None  # opens sealed credentials (None: none configured)


async def call_tool(
    ctx: GatewayContext, principal: Principal, tool_name: str, body: bytes | dict[str, Any]
) -> HttpResponse:
    """Steps 2-6 for an authenticated caller. `body`: the HTTP body (size checked before
    parsing; empty is `{}`) or MCP's arguments. Raises `ApiError` (403, 404 `tool_not_found`
    for another tenant's too, 413, 400, 422, 424 `credential_missing`, `fetch_upstream`'s)."""
    principal.require("tools")
    config = await load_tool(ctx.kv, ctx.cache, ctx.clock, principal.tenant, tool_name)
    if config is None:
        raise ApiError(404, "tool_not_found", f"no tool named {tool_name!r} for this API key")
    raw = body if isinstance(body, bytes) else _json_bytes(body)
    if len(raw) > config.max_request_bytes:
        raise ApiError(
            413,
            "tool_input_too_large",
            f"tool input is {len(raw)} bytes; {config.name!r} accepts at most "
            f"{config.max_request_bytes}",
        )
    arguments = _parse_arguments(raw) if isinstance(body, bytes) else body
    problems = validate(config.input_schema, arguments)
    if problems:
        raise ApiError(
            422,
            "invalid_tool_input",
            f"the arguments do not match the input schema of {config.name!r}",
            {"problems": problems},
        )
    url = fill_path(config, arguments)
    secret = None
    if config.auth.type != "none":
        secret = await load_credential(
            ctx.kv, ctx.cache, ctx.clock, principal.tenant, config.provider, ctx.sealer
        )
        if secret is None:
            raise ApiError(
                424,
                "credential_missing",
                f"no credential for provider {config.provider!r} is set for this tenant",
            )
    return await fetch_upstream(ctx, config, url, secret, arguments)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _parse_arguments(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        value = loads_bounded(body, TOOL_ARGUMENT_LIMITS)
    except JsonLimitError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ApiError(
            422, "invalid_tool_input", "the body must be a JSON object of tool arguments"
        )
    return value


def fill_path(config: ToolConfig, arguments: dict[str, Any]) -> str:
    """The upstream url, `{placeholders}` filled from `arguments` (quoted). 422 for a filled
    segment that is empty or a dot segment, encoded too: it would leave the tool's path."""
    parts = urlsplit(config.url)
    segments = parts.path.split("/")
    for index, segment in enumerate(segments):
        names = PLACEHOLDER_RE.findall(segment)
        if not names:
            continue
        for name in names:
            segment = segment.replace("{" + name + "}", quote(str(arguments[name]), safe=""))
        if is_unsafe_segment(segment):
            raise ApiError(
                422,
                "invalid_tool_input",
                f"url arguments {', '.join(names)} must not make an empty, '.' or '..' path "
                "segment",
                {"problems": [{"path": n, "message": "dot or empty path segment"} for n in names]},
            )
        segments[index] = segment
    return urlunsplit(parts._replace(path="/".join(segments)))


def is_unsafe_segment(value: str) -> bool:
    """ "", ".", ".." in any percent-encoding depth (a proxy may decode once more than we)."""
    for _ in range(4):
        if value.strip() in ("", ".", ".."):
            return True
        value = unquote(value)
    return False


def build_request(
    config: ToolConfig, secret: str | None, arguments: dict[str, Any]
) -> tuple[list[tuple[str, str]], dict[str, str], bytes | None]:
    """Query params, headers and body for one call (no I/O)."""
    placeholders = config.path_placeholders
    payload = {k: v for k, v in arguments.items() if k not in placeholders}
    params: list[tuple[str, str]] = []
    headers = {"user-agent": USER_AGENT, "accept": "application/json, */*;q=0.5"}
    headers.update(config.headers)
    body: bytes | None = None
    if config.sends_input_as == "query":
        for name, value in payload.items():
            if value is None:
                continue
            # JSON spelling for all but strings: true/false/null, numbers, nested values.
            for item in value if isinstance(value, list) else [value]:
                params.append((name, item if isinstance(item, str) else _json_bytes(item).decode()))
    else:
        body = _json_bytes(payload)
        headers["content-type"] = "application/json"
    if secret is not None:
        if config.auth.type == "header":
            headers[config.auth.name] = config.auth.prefix + secret
        elif config.auth.type == "query":
            params.append((config.auth.name, secret))
    return params, headers, body


async def fetch_upstream(
    ctx: GatewayContext,
    config: ToolConfig,
    url: str,
    secret: str | None,
    arguments: dict[str, Any],
) -> HttpResponse:
    """Steps 5-6: the outbound guard (403), one request, its answer relayed; 502/504 for
    transport failures."""
    params, headers, body = build_request(config, secret, arguments)
    await ctx.outbound().check(url, ctx.resolver)
    timeout = config.timeout_seconds
    try:
        async with ctx.client_factory(timeout) as client:
            request = client.build_request(
                config.method,
                url,
                params=tuple(params),
                headers=headers,
                content=body,
                timeout=httpx.Timeout(timeout),
            )
            # Redirects are not followed: the credential must never reach another host.
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > config.max_response_bytes:
                        raise ApiError(
                            502,
                            "upstream_response_too_large",
                            f"the upstream response exceeds {config.max_response_bytes} bytes",
                        )
            finally:
                await response.aclose()
    except httpx.TimeoutException:
        raise ApiError(
            504, "upstream_timeout", f"the upstream did not answer within {timeout:g} s"
        ) from None
    except ApiError:
        raise
    except Exception as exc:
        # httpx messages can echo the url, whose query may hold the credential: the type only.
        # On Workers a failed fetch may surface as a Pyodide JsException, not an httpx error.
        reason = type(exc).__name__
        if isinstance(exc, httpx.ConnectError):
            message = f"could not connect to the upstream: {reason}"
        elif type(exc).__module__.split(".")[0] in ("pyodide", "_pyodide", "js"):
            message = f"the upstream fetch failed: {reason}"
        elif isinstance(exc, httpx.HTTPError):
            message = f"the upstream exchange failed: {reason}"
            raise ApiError(502, "upstream_error", message) from None
        else:
            raise
        raise ApiError(502, "upstream_unreachable", message) from None
    relayed = Headers(
        [(n, response.headers[n]) for n in config.response_headers if n in response.headers]
    )
    if content_type := response.headers.get("content-type"):
        relayed.set("content-type", content_type)
    relayed.set(UPSTREAM_STATUS_HEADER, str(response.status_code))
    return HttpResponse(status=response.status_code, body=b"".join(chunks), headers=relayed)
