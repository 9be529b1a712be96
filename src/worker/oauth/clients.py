"""Who a client is: registered dynamically (DCR, RFC 7591) or named by its metadata document.

CIMD: an `https` client_id with a path is fetched through the gateway's outbound guard (no private
addresses), 5 s, no redirects, at most `CIMD_MAX_BYTES`; its `client_id` must be its URL and its
auth method `none`; cached in D1 for `CIMD_CACHE_SECONDS`. DCR: redirect URIs `https`, loopback
`http` or a private-use scheme, and a hashed secret unless `none`. Redirect URIs match exactly.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from authorization import oauth_store as store
from authorization.oauth_store import ClientInfo
from bindings.environment import Bindings
from gateway.credentials import hash_token
from gateway.outbound import OutboundPolicy
from http_messages import ApiError
from worker.oauth.protocol import CLIENT_SECRET_PREFIX, OAuthError, d1, new_id, new_secret

CIMD_MAX_BYTES = 5 * 1024
CIMD_TIMEOUT_SECONDS = 5.0
CIMD_CACHE_SECONDS = 3600
MAX_REDIRECT_URIS = 10
MAX_URI_CHARS = 2000
_SECRET_METHODS = ("client_secret_post", "client_secret_basic")
_FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob"})
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def is_metadata_url(client_id: str) -> bool:
    """A CIMD client_id: `https://host/path` with a path, no fragment, no credentials."""
    try:
        parts = urlsplit(client_id)
        parts.port  # noqa: B018  (raises ValueError for a malformed port)
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and bool(parts.hostname)
        and parts.path not in ("", "/")
        and not parts.fragment
        and parts.username is None
        and "/./" not in parts.path + "/"
        and "/../" not in parts.path + "/"
        and len(client_id) <= MAX_URI_CHARS
    )


def _redirect_uris(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or len(value) > MAX_REDIRECT_URIS:
        raise OAuthError(
            "invalid_redirect_uri", f"redirect_uris must list 1-{MAX_REDIRECT_URIS} URIs"
        )
    return tuple(_check_redirect_uri(uri) for uri in value)


def _check_redirect_uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        raise OAuthError("invalid_redirect_uri", "each redirect URI must be a string")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (raises ValueError for a malformed port)
    except ValueError:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} is malformed") from None
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment or scheme in _FORBIDDEN_SCHEMES:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} is not allowed")
    if scheme == "http" and (parts.hostname or "") not in _LOOPBACK_HOSTS:
        raise OAuthError(
            "invalid_redirect_uri", f"redirect URI {uri!r}: http is allowed for loopback only"
        )
    if scheme in ("http", "https") and not parts.hostname:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} has no host")
    return uri


def _name(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OAuthError("invalid_client_metadata", "client_name must be a string")
    return "".join(ch for ch in value if ch.isprintable())[:200]


def _check_grant_types(metadata: dict[str, Any]) -> None:
    grants = metadata.get("grant_types", ["authorization_code"])
    responses = metadata.get("response_types", ["code"])
    if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"}:
        raise OAuthError(
            "invalid_client_metadata", "grant_types may be authorization_code and refresh_token"
        )
    if responses != ["code"]:
        raise OAuthError("invalid_client_metadata", 'response_types must be ["code"]')


async def register(bindings: Bindings, metadata: Any) -> dict[str, Any]:
    """RFC 7591 §3: validate and store the client; the response body."""
    if not isinstance(metadata, dict):
        raise OAuthError("invalid_client_metadata", "the body must be a JSON object")
    redirect_uris = _redirect_uris(metadata.get("redirect_uris"))
    _check_grant_types(metadata)
    method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in ("none", *_SECRET_METHODS):
        raise OAuthError(
            "invalid_client_metadata",
            "token_endpoint_auth_method must be none, client_secret_post or client_secret_basic",
        )
    secret = new_secret(CLIENT_SECRET_PREFIX) if method in _SECRET_METHODS else None
    client = ClientInfo(
        client_id=new_id("amcl_"),
        kind="dcr",
        client_name=_name(metadata.get("client_name")),
        redirect_uris=redirect_uris,
        auth_method=method,
        secret_hash=hash_token(secret) if secret else None,
    )
    now = int(bindings.clock.now())
    kept = {k: metadata[k] for k in ("client_uri", "logo_uri", "scope") if k in metadata}
    await store.save_client(d1(bindings), client, kept, now, fetched_at=0)
    body: dict[str, Any] = {
        "client_id": client.client_id,
        "client_id_issued_at": now,
        "client_name": client.client_name,
        "redirect_uris": list(redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        **kept,
    }
    if secret is not None:
        body["client_secret"] = secret
        body["client_secret_expires_at"] = 0
    return body


async def resolve_client(bindings: Bindings, client_id: str | None) -> ClientInfo:
    """The client named by `client_id` (DCR row, or CIMD document), or `invalid_client`."""
    if not client_id:
        raise OAuthError("invalid_request", "client_id is required")
    db = d1(bindings)
    now = int(bindings.clock.now())
    if is_metadata_url(client_id):
        cached = await store.load_client(db, client_id)
        if cached is not None and now - cached[1] < CIMD_CACHE_SECONDS:
            return cached[0]
        document = await fetch_metadata_document(bindings, client_id)
        client = client_from_document(client_id, document)
        await store.save_client(db, client, {}, now, fetched_at=now)
        return client
    found = await store.load_client(db, client_id)
    if found is None or found[0].kind != "dcr":
        raise OAuthError("invalid_client", "unknown client_id", 401)
    return found[0]


async def fetch_metadata_document(bindings: Bindings, url: str) -> Any:
    """GET the client's document, guarded and bounded; refusals are `invalid_client`."""
    try:
        await OutboundPolicy.from_settings(bindings.settings).check(url, bindings.resolve_host)
    except ApiError:
        raise OAuthError(
            "invalid_client",
            "the client metadata document is on a loopback, private or link-local address",
        ) from None
    try:
        async with bindings.http_client(timeout=CIMD_TIMEOUT_SECONDS) as client:
            request = client.build_request("GET", url, headers={"accept": "application/json"})
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                if response.status_code != 200:
                    raise OAuthError(
                        "invalid_client",
                        f"the client metadata document answered HTTP {response.status_code}",
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > CIMD_MAX_BYTES:
                        raise OAuthError(
                            "invalid_client",
                            f"the client metadata document exceeds {CIMD_MAX_BYTES} bytes",
                        )
            finally:
                await response.aclose()
    except httpx.HTTPError as exc:
        raise OAuthError(
            "invalid_client",
            f"the client metadata document could not be fetched ({type(exc).__name__})",
        ) from None
    try:
        return json.loads(bytes(body))
    except ValueError:
        raise OAuthError("invalid_client", "the client metadata document is not JSON") from None


def client_from_document(url: str, document: Any) -> ClientInfo:
    """Check a fetched document (draft-ietf-oauth-client-id-metadata-document §4)."""
    if not isinstance(document, dict):
        raise OAuthError("invalid_client", "the client metadata document is not a JSON object")
    if document.get("client_id") != url:
        raise OAuthError("invalid_client", "the document's client_id is not its own URL")
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise OAuthError(
            "invalid_client", "a metadata-document client must use token_endpoint_auth_method none"
        )
    if "client_secret" in document or "client_secret_expires_at" in document:
        raise OAuthError("invalid_client", "a client metadata document must not hold a secret")
    try:
        redirect_uris = _redirect_uris(document.get("redirect_uris"))
        _check_grant_types(document)
        name = _name(document.get("client_name"))
    except OAuthError as exc:
        raise OAuthError("invalid_client", exc.description) from None
    return ClientInfo(client_id=url, kind="cimd", client_name=name, redirect_uris=redirect_uris)


def check_redirect(client: ClientInfo, redirect_uri: str | None) -> str:
    """The redirect URI to use: exactly one the client registered. Omitted is allowed only
    when the client has one. Never redirect to an unchecked URI (RFC 6749 §4.1.2.1)."""
    if redirect_uri is None:
        if len(client.redirect_uris) == 1:
            return client.redirect_uris[0]
        raise OAuthError("invalid_request", "redirect_uri is required")
    if redirect_uri not in client.redirect_uris:
        raise OAuthError("invalid_request", "redirect_uri is not registered for this client")
    return redirect_uri
