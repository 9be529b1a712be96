"""Which MCP protocol revision a request speaks, and the shapes that differ between them.

Served: 2025-06-18 and 2025-11-25 (the `initialize` handshake era) and 2026-07-28 (the
stateless per-request envelope). The server is stateless in every revision, so the
revision is read from each request (modelcontextprotocol.io/specification/2026-07-28
basic/index.mdx "Per-request protocol fields", basic/transports.mdx; the official Python
SDK 2.3.0's `mcp.shared.inbound.classify_inbound_request` and `mcp_types._v2026_07_28`):

* **2026-07-28** when the `MCP-Protocol-Version` header names a version outside the
  handshake era, or the body carries `params._meta["io.modelcontextprotocol/protocolVersion"]`.
  Its ladder, first failure wins: `_meta` must hold the protocol version and client
  capabilities (-32602); the header must equal the body's version, `Mcp-Method` the method
  and, for `tools/call`, `Mcp-Name` the tool name (-32020 header mismatch); the version must
  be served (-32022 with `data: {supported, requested}`). Every answer carries
  `resultType: "complete"` and `_meta["io.modelcontextprotocol/serverInfo"]`; cacheable
  results (`server/discover`, `tools/list`) add `ttlMs` and `cacheScope: "private"` (a list
  depends on the caller's tenant and scopes). `initialize` and `ping` do not exist there.
  Error statuses follow the SDK's table: -32601 is HTTP 404, the others named here 400.
* **handshake era** otherwise: `initialize` echoes 2025-06-18 or 2025-11-25 and offers
  2025-11-25 for anything else; later requests name the version in the header (absent:
  2025-06-18's rules). From 2025-11-25 on, invalid tool arguments are a tool result with
  `isError: true` (SEP-1303) instead of a -32602 protocol error.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from http_messages import Headers

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-06-18", "2025-11-25")
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
SUPPORTED_VERSIONS: tuple[str, ...] = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)
LATEST_HANDSHAKE_VERSION = "2025-11-25"
# Handshake-era versions the SDKs know; a header naming one we do not serve is refused with
# 400 rather than treated as a 2026 request.
KNOWN_OLD_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26")

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
INVALID_PARAMS = -32602
# 2026-07-28 HTTP statuses by JSON-RPC code (the SDK's ERROR_CODE_HTTP_STATUS).
MODERN_ERROR_STATUS: dict[int, int] = {
    -32700: 400,
    -32600: 400,
    -32602: 400,
    HEADER_MISMATCH: 400,
    -32021: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    -32601: 404,
}
# How long a client may reuse a discover / tools/list answer: short, since an operator may
# register a tool at any time.
LIST_TTL_MS = 60_000

_B64_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


@dataclass(frozen=True)
class Revision:
    """The revision one request is answered in."""

    version: str

    @property
    def modern(self) -> bool:
        return self.version in MODERN_VERSIONS

    @property
    def input_errors_are_tool_results(self) -> bool:
        """SEP-1303 (2025-11-25 on): bad tool arguments are a result the model can see."""
        return self.version != "2025-06-18"


class RevisionError(Exception):
    """A refusal of the request's revision envelope: a JSON-RPC error with its HTTP status."""

    def __init__(self, code: int, message: str, data: Any = None, http_status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status


def decode_header_value(value: str | None) -> str | None:
    """A header value as sent, or the UTF-8 inside the SDK's `=?base64?…?=` wrapping."""
    if value is None:
        return None
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _unsupported(requested: Any) -> RevisionError:
    return RevisionError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )


def _modern(headers: Headers, method: str, params: Any) -> Revision:
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        raise RevisionError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {META_PROTOCOL_VERSION!r} and "
            f"{META_CLIENT_CAPABILITIES!r}",
        )
    missing = [k for k in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if k not in meta]
    if missing:
        raise RevisionError(
            INVALID_PARAMS, f"params._meta is missing the required key(s): {', '.join(missing)}"
        )
    version = meta[META_PROTOCOL_VERSION]
    header = headers.get(PROTOCOL_VERSION_HEADER)
    if header is None or header != version:
        raise RevisionError(
            HEADER_MISMATCH, "MCP-Protocol-Version header does not match params._meta's version"
        )
    if headers.get(METHOD_HEADER) != method:
        raise RevisionError(HEADER_MISMATCH, "Mcp-Method header does not match the method")
    name = params.get("name") if method == "tools/call" else None
    if name is not None and decode_header_value(headers.get(NAME_HEADER)) != name:
        raise RevisionError(HEADER_MISMATCH, "Mcp-Name header does not match the tool name")
    if not isinstance(version, str):
        raise RevisionError(INVALID_PARAMS, "the protocol version in params._meta must be a string")
    if version not in MODERN_VERSIONS:
        raise _unsupported(version)
    return Revision(version)


def classify(headers: Headers, method: str, params: Any) -> Revision:
    """The revision of one request (a request or a notification); raises `RevisionError`."""
    header = headers.get(PROTOCOL_VERSION_HEADER)
    meta = params.get("_meta") if isinstance(params, dict) else None
    in_body = isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
    if in_body or header in MODERN_VERSIONS:
        return _modern(headers, method, params)
    if header is not None and header not in HANDSHAKE_VERSIONS + KNOWN_OLD_VERSIONS:
        raise _unsupported(header)  # a version nobody here knows: name the ones served
    if method == "initialize" or header is None:
        return Revision("2025-06-18")  # initialize negotiates; no header: 2025-06-18's rules
    if header not in HANDSHAKE_VERSIONS:
        raise RevisionError(
            -32600,
            f"Unsupported MCP-Protocol-Version {header!r}; this server speaks "
            f"{', '.join(SUPPORTED_VERSIONS)}",
            {"supported": list(SUPPORTED_VERSIONS)},
        )
    return Revision(header)


def negotiate_handshake(requested: str) -> str:
    """initialize: echo a served handshake version, else offer our latest (lifecycle.mdx)."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION


def shape_result(
    revision: Revision, result: dict[str, Any], server_info: dict[str, Any], cacheable: bool
) -> dict[str, Any]:
    """A result in the request's revision: unchanged in the handshake era; with
    `resultType`, the serverInfo stamp and (for cacheable results) TTL hints in 2026-07-28."""
    if not revision.modern:
        return result
    shaped = {**result, "resultType": "complete"}
    if cacheable:
        shaped["ttlMs"] = LIST_TTL_MS
        shaped["cacheScope"] = "private"
    meta = shaped.get("_meta")
    shaped["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_SERVER_INFO: server_info}
    return shaped


def discover_result(capabilities: dict[str, Any], instructions: str) -> dict[str, Any]:
    """`server/discover` (2026-07-28): the served versions and what the server offers."""
    return {
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "capabilities": capabilities,
        "instructions": instructions,
    }
