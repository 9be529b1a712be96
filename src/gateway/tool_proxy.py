"""The hot path: `POST /api/v1/tools/{tool_name}` and MCP `tools/call` for proxied tools.

For one call the gateway does exactly this, and nothing else:

1. KV auth lookup   — `Authorization: Bearer <key>` → SHA-256 → `gw:apikey:{hex}` → tenant, scopes;
2. KV config lookup — `gw:tool:{tenant}:{tool}` → upstream, method, auth placement, schema, limits;
3. input check      — size limit, then the tool's JSON schema (no KV, no I/O);
4. KV token read    — `gw:cred:{tenant}:{provider}` (skipped for `auth.type == "none"`);
5. outbound fetch   — one httpx request carrying the credential, within the tool's timeout;
6. response         — the upstream status and body relayed, marked `x-upstream-status`.

The token is read after the config because the config names the provider whose token to
read; bad input is refused before that read. Every KV read goes through the per-isolate
cache (`gateway.kv_cache`, 30 s staleness bound), so a warm isolate makes no KV reads.

This module receives a `KVNamespace`, a `Clock` and an httpx client factory — never the
`Bindings` object — and imports nothing that can reach D1, Durable Objects, Vectorize or
R2 (enforced by `tests/gateway/test_hot_path_isolation.py`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway.api_keys import Principal
from gateway.credentials import Credential, load_credential
from gateway.errors import UPSTREAM_STATUS_HEADER, gateway_error_response
from gateway.json_schema import validate
from gateway.kv_cache import ISOLATE_CACHE, KVReadCache
from gateway.oauth_tokens import authenticate_bearer
from gateway.outbound import OutboundPolicy, Resolver
from gateway.tool_config import PLACEHOLDER_RE as _PLACEHOLDER_RE
from gateway.tool_config import ToolConfig, load_tool
from http_messages import Headers, HttpRequest, HttpResponse
from http_messages.bounded_json import JsonLimitError, JsonLimits, loads_bounded
from http_messages.errors import ApiError

USER_AGENT = "agent-memory-gateway/0.1"

# httpx logs every request's full url at INFO; a tool whose credential goes in the query
# string (`auth.type == "query"`) would put the tenant's token into the logs.
logging.getLogger("httpx").setLevel(logging.WARNING)

# Builds an httpx client for one call, given the timeout in seconds. On Workers clients must
# be created inside the handler (cheap); the local runtime may share one transport.
ClientFactory = Callable[[float], httpx.AsyncClient]


@dataclass(frozen=True)
class GatewayContext:
    """What the hot path may touch: KV, time, outbound HTTP, and the isolate cache.

    `outbound` is the operator's allow-list for non-public upstream hosts and `resolver`,
    when the platform offers one, resolves names so their addresses are checked too
    (`gateway.outbound`); every upstream url passes that check before a client exists.
    """

    kv: KVNamespace
    clock: Clock
    client_factory: ClientFactory
    cache: KVReadCache = field(default=ISOLATE_CACHE)
    outbound: OutboundPolicy = field(default_factory=OutboundPolicy)
    # RFC 8707 resources an OAuth access token must name here (empty: no token is accepted).
    resources: frozenset[str] = frozenset()
    resolver: Resolver | None = None


@dataclass(frozen=True)
class UpstreamReply:
    """What the upstream answered: status, body, and the headers the config lets through."""

    status: int
    body: bytes
    headers: list[tuple[str, str]]
    content_type: str | None

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def tool_not_found(tool_name: str) -> ApiError:
    # Same answer whether the tool is missing or belongs to another tenant: no existence leak.
    return ApiError(404, "tool_not_found", f"no tool named {tool_name!r} for this API key")


# Tool arguments go to an upstream, not to our storage: NUL is the upstream's business, and
# one string may use the tool's whole request budget (at most 1 MiB, `max_request_bytes`).
TOOL_ARGUMENT_LIMITS = JsonLimits(max_string_chars=1024 * 1024)


def parse_arguments(body: bytes) -> dict[str, Any]:
    """Decode an HTTP tool-call body: a JSON object of arguments (empty body = `{}`).

    Bad JSON is 400 `invalid_json`; a depth or number-size limit is 413 and a lone
    surrogate 422 `invalid_character`, each with its code.
    """
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


async def resolve_tool(ctx: GatewayContext, principal: Principal, tool_name: str) -> ToolConfig:
    """Config lookup (step 2) for the caller's own tenant; 404 for anything else."""
    principal.require("tools")
    config = await load_tool(ctx.kv, ctx.cache, ctx.clock, principal.tenant, tool_name)
    if config is None:
        raise tool_not_found(tool_name)
    return config


def check_size(config: ToolConfig, input_bytes: int) -> None:
    if input_bytes > config.max_request_bytes:
        raise ApiError(
            413,
            "tool_input_too_large",
            f"tool input is {input_bytes} bytes; {config.name!r} accepts at most "
            f"{config.max_request_bytes}",
        )


def check_input(config: ToolConfig, arguments: dict[str, Any], input_bytes: int) -> None:
    """Step 3: refuse oversized or schema-violating input before any token read or fetch.

    A url placeholder value that is empty or a dot segment (`.`, `..`, also percent-encoded
    as `%2e`) is refused with 422 `invalid_tool_input`: it would move the request to
    another path of the upstream, with the tenant's credential attached.
    """
    check_size(config, input_bytes)
    problems = validate(config.input_schema, arguments)
    if problems:
        raise ApiError(
            422,
            "invalid_tool_input",
            f"the arguments do not match the input schema of {config.name!r}",
            {"problems": [p.as_dict() for p in problems]},
        )
    fill_path(config, arguments)


async def read_credential(
    ctx: GatewayContext, principal: Principal, config: ToolConfig
) -> Credential | None:
    """Step 4: the tenant's token for the tool's provider (None when the tool needs none)."""
    if config.auth.type == "none":
        return None
    credential = await load_credential(
        ctx.kv, ctx.cache, ctx.clock, principal.tenant, config.provider
    )
    if credential is None:
        raise ApiError(
            424,
            "credential_missing",
            f"no credential for provider {config.provider!r} is set for this tenant",
        )
    return credential


def fill_path(config: ToolConfig, arguments: dict[str, Any]) -> str:
    """The upstream url with its `{placeholders}` filled from `arguments` (URL-quoted).

    Raises 422 `invalid_tool_input` when a segment holding a placeholder comes out empty or
    as a dot segment (`.`, `..`, or those percent-encoded): httpx and upstreams normalise
    dot segments, so the request would leave the tool's path with the credential attached.
    """
    parts = urlsplit(config.url)
    segments = parts.path.split("/")
    for index, segment in enumerate(segments):
        names = _PLACEHOLDER_RE.findall(segment)
        if not names:
            continue
        for name in names:
            # safe="": a value can never add path segments ("/" is encoded).
            segment = segment.replace("{" + name + "}", quote(str(arguments[name]), safe=""))
        if is_unsafe_segment(segment):
            raise ApiError(
                422,
                "invalid_tool_input",
                f"url arguments {', '.join(names)} must not make an empty, '.' or '..' path "
                "segment",
                {
                    "problems": [
                        {"path": name, "message": "dot or empty path segment"} for name in names
                    ]
                },
            )
        segments[index] = segment
    return urlunsplit(parts._replace(path="/".join(segments)))


def is_unsafe_segment(value: str) -> bool:
    """True for "", ".", ".." and their percent-encoded spellings (decoded repeatedly, since
    an upstream or a proxy in front of it may decode once more than we do)."""
    decoded = value
    for _ in range(3):
        if decoded.strip() in ("", ".", ".."):
            return True
        decoded = unquote(decoded)
    return decoded.strip() in ("", ".", "..")


def _query_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    # JSON spelling for everything else: true/false/null, numbers, nested values.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def build_request(
    config: ToolConfig, credential: Credential | None, arguments: dict[str, Any]
) -> tuple[str, list[tuple[str, str]], dict[str, str], bytes | None]:
    """Upstream url, query params, headers and body for one call (pure, no I/O)."""
    payload = dict(arguments)
    url = fill_path(config, arguments)
    for placeholder in config.path_placeholders:
        payload.pop(placeholder)
    params: list[tuple[str, str]] = []
    headers = {"user-agent": USER_AGENT, "accept": "application/json, */*;q=0.5"}
    headers.update(config.headers)
    body: bytes | None = None
    if config.sends_input_as == "query":
        for name, value in payload.items():
            if value is None:
                continue
            items = value if isinstance(value, list) else [value]
            params.extend((name, _query_value(item)) for item in items)
    else:
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        headers["content-type"] = "application/json"
    if credential is not None:
        if config.auth.type == "header":
            headers[config.auth.name] = config.auth.prefix + credential.secret
        elif config.auth.type == "query":
            params.append((config.auth.name, credential.secret))
    return url, params, headers, body


async def fetch_upstream(
    ctx: GatewayContext,
    config: ToolConfig,
    credential: Credential | None,
    arguments: dict[str, Any],
) -> UpstreamReply:
    """Step 5: one outbound request; transport failures become 502/504 gateway errors.

    The upstream host is checked first (403 `upstream_forbidden`, no connection attempted)
    against the outbound guard.
    """
    url, params, headers, body = build_request(config, credential, arguments)
    await ctx.outbound.check(url, ctx.resolver)
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
                    size += len(chunk)
                    if size > config.max_response_bytes:
                        raise ApiError(
                            502,
                            "upstream_response_too_large",
                            f"the upstream response exceeds {config.max_response_bytes} bytes",
                        )
                    chunks.append(chunk)
            finally:
                await response.aclose()
    except httpx.TimeoutException:
        raise ApiError(
            504, "upstream_timeout", f"the upstream did not answer within {timeout:g} s"
        ) from None
    except httpx.ConnectError as exc:
        raise ApiError(
            502, "upstream_unreachable", f"could not connect to the upstream: {_reason(exc)}"
        ) from None
    except httpx.HTTPError as exc:
        raise ApiError(
            502, "upstream_error", f"the upstream exchange failed: {_reason(exc)}"
        ) from None
    except ApiError:
        raise
    except Exception as exc:
        # On Workers, httpx runs over a fetch-backed transport; a failed fetch may surface
        # as a Pyodide JsException instead of an httpx error (not verified on the edge).
        # It is still the upstream's failure, never an unhandled 500 of ours.
        if type(exc).__module__.split(".")[0] in ("pyodide", "_pyodide", "js"):
            raise ApiError(
                502, "upstream_unreachable", f"the upstream fetch failed: {_reason(exc)}"
            ) from None
        raise
    passed = [
        (name, response.headers[name])
        for name in config.response_headers
        if name in response.headers
    ]
    return UpstreamReply(
        status=response.status_code,
        body=b"".join(chunks),
        headers=passed,
        content_type=response.headers.get("content-type"),
    )


def _reason(exc: Exception) -> str:
    # httpx messages can echo the url, whose query string may hold the credential.
    return type(exc).__name__


async def call_tool(
    ctx: GatewayContext,
    principal: Principal,
    tool_name: str,
    arguments: dict[str, Any],
    input_bytes: int,
) -> UpstreamReply:
    """Steps 2-5 for an authenticated caller (shared by the HTTP route and MCP)."""
    config = await resolve_tool(ctx, principal, tool_name)
    check_input(config, arguments, input_bytes)
    credential = await read_credential(ctx, principal, config)
    return await fetch_upstream(ctx, config, credential, arguments)


def relay(reply: UpstreamReply) -> HttpResponse:
    """Step 6: the upstream's status and body, marked as the upstream's."""
    headers = Headers(reply.headers)
    if reply.content_type:
        headers.set("content-type", reply.content_type)
    headers.set(UPSTREAM_STATUS_HEADER, str(reply.status))
    return HttpResponse(status=reply.status, body=reply.body, headers=headers)


async def handle_tool_call(
    ctx: GatewayContext, request: HttpRequest, tool_name: str
) -> HttpResponse:
    """`POST /api/v1/tools/{tool_name}`: the whole hot path. Never raises."""
    try:
        principal = await authenticate_bearer(
            ctx.kv, ctx.cache, ctx.clock, request.headers.get("authorization"), ctx.resources
        )
        config = await resolve_tool(ctx, principal, tool_name)
        # Size first: a too-large body is refused without being parsed.
        check_size(config, len(request.body))
        arguments = parse_arguments(request.body)
        check_input(config, arguments, len(request.body))
        credential = await read_credential(ctx, principal, config)
        return relay(await fetch_upstream(ctx, config, credential, arguments))
    except ApiError as exc:
        return gateway_error_response(exc)
