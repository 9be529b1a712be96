"""RFC 8414 authorization-server metadata and RFC 9728 protected-resource metadata.

The issuer is the origin the request came to (`https://memory.example.com`): the Worker is
its own authorization server, and each host name it answers on is its own issuer, so a
token minted on one host name is refused on another (`gateway.credentials`).

Advertised so that every MCP client finds what it needs: `code_challenge_methods_supported`
(S256; clients refuse to proceed without it), `client_id_metadata_document_supported` and
the `none` token endpoint auth method (claude.ai uses CIMD only when both are there),
`registration_endpoint` (DCR, the fallback), `authorization_response_iss_parameter_supported`
(RFC 9207; ChatGPT checks `iss`) and the scopes.
"""

from __future__ import annotations

from typing import Any

from gateway.credentials import MCP_PATH, OAUTH_SCOPES, origin_of
from http_messages import HttpRequest, HttpResponse, json_response
from worker.router import Call

RESOURCE_NAME = "agent-memory tool gateway"
AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]
# Metadata is public and the same for everyone: browsers (the MCP Inspector) may read it.
_PUBLIC = {"access-control-allow-origin": "*", "cache-control": "public, max-age=300"}


def issuer_of(request: HttpRequest) -> str:
    return origin_of(request.url)


def authorization_server_metadata(issuer: str) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "revocation_endpoint": f"{issuer}/revoke",
        "scopes_supported": list(OAUTH_SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


def protected_resource_metadata(issuer: str, resource: str) -> dict[str, Any]:
    return {
        "resource": resource,
        "authorization_servers": [issuer],
        "scopes_supported": list(OAUTH_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": RESOURCE_NAME,
    }


async def authorization_server_route(call: Call[None, None]) -> HttpResponse:
    """`GET /.well-known/oauth-authorization-server` (RFC 8414 §3)."""
    request = call.request
    return json_response(authorization_server_metadata(issuer_of(request)), headers=_PUBLIC)


async def protected_resource_route(call: Call[None, None]) -> HttpResponse:
    """`GET /.well-known/oauth-protected-resource` (the origin: the plain tool route)."""
    request = call.request
    issuer = issuer_of(request)
    return json_response(protected_resource_metadata(issuer, issuer), headers=_PUBLIC)


async def mcp_protected_resource_route(call: Call[None, None]) -> HttpResponse:
    """`GET /.well-known/oauth-protected-resource/mcp` (RFC 9728 §3.1: the well-known
    segment inserted before the resource's path)."""
    request = call.request
    issuer = issuer_of(request)
    document = protected_resource_metadata(issuer, f"{issuer}{MCP_PATH}")
    return json_response(document, headers=_PUBLIC)
