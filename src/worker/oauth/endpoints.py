"""The OAuth server's endpoints (docs/gateway.md, "OAuth: connecting with only a URL"):
`/authorize` (behind Cloudflare Access), `/token` (RFC 6749, PKCE, RFC 8707), `/revoke`
(RFC 7009), `/register` (DCR, RFC 7591), and who a client is (DCR or CIMD).

/authorize checks identity, client and exact redirect URI first (else an error page: never
redirect to an unchecked URI), then response type, PKCE, scopes and resource (else a redirect
with `error`). The consent page holds only a single-use ticket bound to the identity (stored
hashed), so its POST can be neither forged nor altered. Pages escape everything shown, cannot
be framed, run no script and are never cached. Secrets compare by hash in constant time.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import re
from dataclasses import replace
from html import escape
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import httpx

from authorization import oauth_store as store
from authorization.oauth_store import ClientInfo, Grant
from authorization.operator_grants import granted_tenants
from bindings.environment import Bindings
from gateway import admin_ops
from gateway.credentials import (
    ACCESS_TOKEN_PREFIX,
    MCP_PATH,
    AccessTokenRecord,
    access_token_key,
    hash_token,
    resources_for_origin,
)
from gateway.outbound import OutboundPolicy
from gateway.routes import issuer_of
from http_messages import (
    ApiError,
    Headers,
    HttpRequest,
    HttpResponse,
    empty_response,
    json_response,
)
from worker.identity import AccessIdentity, require_access
from worker.oauth.protocol import (
    CLIENT_SECRET_PREFIX,
    CODE_PREFIX,
    CODE_TTL,
    CONSENT_TTL,
    MAX_FORM_BYTES,
    REFRESH_TOKEN_PREFIX,
    SCOPE_DESCRIPTIONS,
    OAuthError,
    check_challenge,
    d1,
    forget_access_token,
    issue_tokens,
    new_id,
    new_secret,
    parse_form,
    parse_scopes,
    revoke_grant,
    stores,
    verify_pkce,
)
from worker.routing import Call

CIMD_MAX_BYTES = 5 * 1024
CIMD_TIMEOUT_SECONDS = 5.0
CIMD_CACHE_SECONDS = 3600
# A failed fetch is remembered (KV, by the URL's hash), so unauthenticated token requests
# cannot make the Worker fetch the same URL again and again.
CIMD_FAILURE_SECONDS = 300
MAX_REDIRECT_URIS = 10
MAX_URI_CHARS = 2000
MAX_REGISTRATIONS = 10_000
_SECRET_METHODS = ("client_secret_post", "client_secret_basic")
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# RFC 8252 §7.1: a private-use scheme is a domain name of the app's owner in reverse order
# (`com.example.app`), so its first label is a top-level domain: a country code or one of
# these. `claude.ai:`, `ftp:` or `ws:` are not. Cursor's `cursor:` is the one exception
# (it registers cursor://anysphere.cursor-mcp/oauth/callback, docs/gateway.md).
_REVERSE_DNS_RE = re.compile(r"[a-z]{2,}(\.[a-z0-9-]+)+")
_GENERIC_TLDS = frozenset({"com", "org", "net", "edu", "gov", "info", "biz", "dev", "app"})
_APP_SCHEMES = frozenset({"cursor"})


def _split(url: str) -> SplitResult | None:
    """`url`'s parts, None when malformed (a bad port raises only when read)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018
    except ValueError:
        return None
    return parts


def is_metadata_url(client_id: str) -> bool:
    """A CIMD client_id: `https://host/path` with a path, no fragment, no credentials."""
    parts = _split(client_id)
    return (
        parts is not None
        and parts.scheme == "https"
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


def is_private_use_scheme(scheme: str) -> bool:
    first = scheme.split(".", 1)[0]
    reverse_dns = _REVERSE_DNS_RE.fullmatch(scheme) is not None
    return scheme in _APP_SCHEMES or (reverse_dns and (len(first) == 2 or first in _GENERIC_TLDS))


def _check_redirect_uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        raise OAuthError("invalid_redirect_uri", "each redirect URI must be a string")
    if (parts := _split(uri)) is None:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} is malformed")
    # No fragment (RFC 6749 §3.1.2), no userinfo: https://claude.ai@evil.example/ is evil's.
    if "#" in uri or "@" in parts.netloc:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} is not allowed")
    scheme, host = parts.scheme, parts.hostname or ""
    if (scheme == "https" and host) or (scheme == "http" and host in _LOOPBACK_HOSTS):
        return uri
    if scheme not in ("http", "https") and is_private_use_scheme(scheme):
        return uri
    raise OAuthError(
        "invalid_redirect_uri",
        f"redirect URI {uri!r}: use https, http on 127.0.0.1, [::1] or localhost, or a "
        "private-use scheme named after your domain in reverse (com.example.app:/callback)",
    )


def _web_uri(metadata: dict[str, Any], name: str) -> dict[str, str]:
    """`{name: value}` for an http(s) URL a person may be shown (client_uri, logo_uri)."""
    value = metadata.get(name)
    if value is None:
        return {}
    parts = _split(value) if isinstance(value, str) and len(value) <= MAX_URI_CHARS else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise OAuthError("invalid_client_metadata", f"{name} must be an http(s) URL")
    if "@" in parts.netloc:
        raise OAuthError("invalid_client_metadata", f"{name} must not carry userinfo")
    return {name: value}


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
    kept = _web_uri(metadata, "client_uri") | _web_uri(metadata, "logo_uri")
    if isinstance(metadata.get("scope"), str):
        kept["scope"] = metadata["scope"][:500]
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
        failed_key = f"gw:oauth:cimd-failed:{hash_token(client_id)}"
        if bindings.kv is not None and (failure := await bindings.kv.get(failed_key)):
            raise OAuthError("invalid_client", f"{failure} (remembered; try again later)")
        try:
            document = await fetch_metadata_document(bindings, client_id)
            client = client_from_document(client_id, document)
        except OAuthError as exc:
            if bindings.kv is not None:
                ttl = CIMD_FAILURE_SECONDS
                await bindings.kv.put(failed_key, exc.description, expiration_ttl=ttl)
            raise
        await store.save_client(db, client, {}, now, fetched_at=now)
        return client
    found = await store.load_client(db, client_id)
    if found is None or found[0].kind != "dcr":
        raise OAuthError("invalid_client", "unknown client_id", 401)
    return found[0]


def _bad_document(problem: str) -> OAuthError:
    return OAuthError("invalid_client", f"the client metadata document {problem}")


async def fetch_metadata_document(bindings: Bindings, url: str) -> Any:
    """GET the client's document, guarded and bounded; refusals are `invalid_client`."""
    try:
        await OutboundPolicy.from_settings(bindings.settings).check(url, bindings.resolve_host)
    except ApiError:
        raise _bad_document("is on a loopback, private or link-local address") from None
    headers = {"accept": "application/json"}
    try:
        # One deadline for the whole exchange: httpx's timeout is per read, so a server
        # sending a byte a second would hold the request far longer.
        async with (
            asyncio.timeout(CIMD_TIMEOUT_SECONDS),
            bindings.http_client(timeout=CIMD_TIMEOUT_SECONDS) as client,
            client.stream("GET", url, headers=headers, follow_redirects=False) as response,
        ):
            if response.status_code != 200:
                raise _bad_document(f"answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) > CIMD_MAX_BYTES:
                    raise _bad_document(f"exceeds {CIMD_MAX_BYTES} bytes")
    except TimeoutError:
        raise _bad_document(f"did not arrive within {CIMD_TIMEOUT_SECONDS:g} s") from None
    except httpx.HTTPError as exc:
        raise _bad_document(f"could not be fetched ({type(exc).__name__})") from None
    try:
        return json.loads(bytes(body))
    except ValueError:
        raise _bad_document("is not JSON") from None


def client_from_document(url: str, document: Any) -> ClientInfo:
    """Check a fetched document (draft-ietf-oauth-client-id-metadata-document §4)."""
    if not isinstance(document, dict):
        raise _bad_document("is not a JSON object")
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


def _portless(uri: str) -> str:
    """A loopback `http` URI without its port (RFC 8252 §7.3: native apps listen on a port
    chosen at run time); any other URI as it is."""
    parts = _split(uri)
    if parts is None or parts.scheme != "http" or "@" in parts.netloc:
        return uri
    host = parts.hostname or ""
    if host not in _LOOPBACK_HOSTS:
        return uri
    return urlunsplit(parts._replace(netloc=f"[{host}]" if ":" in host else host))


def check_redirect(client: ClientInfo, redirect_uri: str | None) -> str:
    """The redirect URI to use: one the client registered, exactly, or a loopback `http`
    one on any port (scheme, host, path and query still exact). Omitted is allowed only
    when the client has one. Never redirect to an unchecked URI (RFC 6749 §4.1.2.1)."""
    if redirect_uri is None:
        if len(client.redirect_uris) == 1:
            return client.redirect_uris[0]
        raise OAuthError("invalid_request", "redirect_uri is required")
    registered = {_portless(uri) for uri in client.redirect_uris}
    if redirect_uri not in client.redirect_uris and _portless(redirect_uri) not in registered:
        raise OAuthError("invalid_request", "redirect_uri is not registered for this client")
    return redirect_uri


_NO_STORE = {"cache-control": "no-store"}


def _basic_credentials(request: HttpRequest) -> tuple[str, str] | None:
    scheme, _, value = (request.headers.get("authorization") or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise OAuthError("invalid_client", "malformed Basic credentials", 401)
    return unquote(client_id), unquote(secret)


async def authenticate_client(
    bindings: Bindings, request: HttpRequest, form: dict[str, str]
) -> ClientInfo:
    """The client making a token or revocation request (RFC 6749 §2.3, OAuth 2.1 §2.4)."""
    basic = _basic_credentials(request)
    if basic and form.get("client_id") not in (None, basic[0]):
        raise OAuthError("invalid_request", "client_id differs from the Basic credentials")
    client_id, secret = basic or (form.get("client_id"), form.get("client_secret"))
    try:
        client = await resolve_client(bindings, client_id)
    except OAuthError as exc:
        raise OAuthError("invalid_client", exc.description, 401) from None
    if client.secret_hash is None:
        if secret:
            raise OAuthError("invalid_client", "this client has no secret", 401)
    elif not secret or not hmac.compare_digest(hash_token(secret), client.secret_hash):
        raise OAuthError("invalid_client", "client authentication failed", 401)
    return client


def _check_resource(form: dict[str, str], consented: str) -> None:
    if form.get("resource") not in (None, consented):
        raise OAuthError("invalid_target", "resource differs from the one consented to")


async def _authorization_code(
    bindings: Bindings, client: ClientInfo, form: dict[str, str], now: int
) -> Grant:
    db, kv = stores(bindings)
    code = form.get("code")
    if not code:
        raise OAuthError("invalid_request", "code is required")
    row, first_use = await store.redeem_code(db, hash_token(code), now)
    if row is None:
        raise OAuthError("invalid_grant", "unknown authorization code")
    if not first_use:
        if row.grant_id:
            await revoke_grant(db, kv, row.grant.tenant, row.grant_id, "code_reuse", now)
        raise OAuthError("invalid_grant", "this authorization code was already used")
    if row.grant.client_id != client.client_id:
        raise OAuthError("invalid_grant", "this code was issued to another client")
    if now >= row.expires_at:
        raise OAuthError("invalid_grant", "this authorization code has expired")
    if form.get("redirect_uri") != row.redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request")
    if not verify_pkce(form.get("code_verifier"), row.code_challenge):
        raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
    _check_resource(form, row.grant.resource)
    grant = replace(row.grant, grant_id=new_id("g_"), created_at=now, last_used_at=now)
    await store.create_grant(db, grant, hash_token(code))
    return grant


async def _refresh_token(
    bindings: Bindings, client: ClientInfo, form: dict[str, str], now: int
) -> Grant:
    db, kv = stores(bindings)
    token = form.get("refresh_token")
    if not token:
        raise OAuthError("invalid_request", "refresh_token is required")
    grant, status = await store.rotate_refresh_token(db, hash_token(token), now)
    if grant is None or status == "expired":
        raise OAuthError("invalid_grant", "unknown or expired refresh token")
    if status == "reused" or grant.client_id != client.client_id:
        # A rotated token presented again (or by another client) means it leaked: end the
        # grant, so whoever holds the newer token loses it too (OAuth 2.1 §4.3.1).
        await revoke_grant(db, kv, grant.tenant, grant.grant_id, "refresh_token_reuse", now)
        raise OAuthError("invalid_grant", "this refresh token was already used; grant revoked")
    if grant.revoked_at is not None:
        raise OAuthError("invalid_grant", "this grant was revoked")
    _check_resource(form, grant.resource)
    scopes = grant.scopes
    if form.get("scope"):
        asked = tuple(s for s in form["scope"].split() if s != "offline_access")
        if not set(asked) <= set(grant.scopes):
            raise OAuthError("invalid_scope", "a refresh cannot widen the granted scopes")
        scopes = tuple(s for s in grant.scopes if s in asked) or grant.scopes
    await store.touch_grant(db, grant, now)
    return replace(grant, scopes=scopes)


async def token_route(call: Call[None, None]) -> HttpResponse:
    request, bindings = call.request, call.bindings
    form = parse_form(request.body)
    grant_type = form.get("grant_type")
    if grant_type not in ("authorization_code", "refresh_token"):
        raise OAuthError(
            "unsupported_grant_type", "grant_type must be authorization_code or refresh_token"
        )
    client = await authenticate_client(bindings, request, form)
    exchange = _authorization_code if grant_type == "authorization_code" else _refresh_token
    now = int(bindings.clock.now())
    grant = await exchange(bindings, client, form, now)
    tokens = await issue_tokens(*stores(bindings), grant, now)
    body = {**tokens, "scope": " ".join(grant.scopes)}
    return json_response(body, headers={"pragma": "no-cache", **_NO_STORE})


async def revoke_route(call: Call[None, None]) -> HttpResponse:
    """`POST /revoke` (RFC 7009): 200 whether or not the token was known (§2.2)."""
    request, bindings = call.request, call.bindings
    form = parse_form(request.body)
    client = await authenticate_client(bindings, request, form)
    db, kv = stores(bindings)
    token = form.get("token")
    if not token:
        raise OAuthError("invalid_request", "token is required")
    token_hash, now = hash_token(token), int(bindings.clock.now())
    if token.startswith(ACCESS_TOKEN_PREFIX):
        raw = await kv.get(access_token_key(token_hash))
        if raw and AccessTokenRecord.model_validate_json(raw).client_id == client.client_id:
            await forget_access_token(kv, token_hash)
    elif token.startswith(REFRESH_TOKEN_PREFIX):
        grant = await store.refresh_token_grant(db, token_hash)
        if grant is not None and grant.client_id == client.client_id:
            await revoke_grant(db, kv, grant.tenant, grant.grant_id, "revoked_by_client", now)
    return empty_response(200, _NO_STORE)


async def _admit_registration(bindings: Bindings, request: HttpRequest) -> None:
    """429 past `OAUTH_RATE_LIMITER` for the client's address (Cloudflare's
    `CF-Connecting-IP`; the local server sets it from the socket) or `MAX_REGISTRATIONS`."""
    limiter, address = bindings.oauth_rate_limiter, request.headers.get("cf-connecting-ip")
    if limiter is not None and not await limiter.limit(f"register:{address or 'unknown'}"):
        period = limiter.period_seconds
        message = f"too many registrations from this address; retry in {period} s"
        raise OAuthError("too_many_requests", message, 429)
    if await store.count_registrations(d1(bindings)) >= MAX_REGISTRATIONS:
        message = "the server holds as many registrations as it takes; retry tomorrow"
        raise OAuthError("too_many_requests", message, 429)


async def register_route(call: Call[None, None]) -> HttpResponse:
    """`POST /register` (RFC 7591 §3): 201 with the client's information."""
    await _admit_registration(call.bindings, call.request)
    if len(call.request.body) > MAX_FORM_BYTES:
        raise OAuthError("invalid_client_metadata", "the metadata is too large")
    try:
        metadata: Any = json.loads(call.request.body or b"null")
    except ValueError:
        raise OAuthError("invalid_client_metadata", "the body must be JSON") from None
    body = await register(call.bindings, metadata)
    return json_response(body, status=201, headers=_NO_STORE)


def redirect_with(redirect_uri: str, params: dict[str, str]) -> HttpResponse:
    """302 to `redirect_uri` with `params` added to its query (kept, RFC 6749 §3.1.2)."""
    parts = urlsplit(redirect_uri)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    location = urlunsplit(parts._replace(query=urlencode(query)))
    return HttpResponse(
        status=302, headers=Headers({"location": location, "cache-control": "no-store"})
    )


def _back(issuer: str, state: Any) -> dict[str, str]:
    """What every redirect back to the client carries: `iss` and the client's `state`."""
    return {"iss": issuer} | ({"state": str(state)} if state is not None else {})


async def tenants_for(identity: AccessIdentity, bindings: Bindings) -> list[str]:
    """The gateway tenants this identity holds a grant for (all of them for a platform admin)."""
    existing = sorted(t.tenant for t in await admin_ops.list_tenants(stores(bindings)[1]))
    mine = await granted_tenants(identity, bindings)
    return existing if mine is None else [t for t in existing if t in mine]


async def _identity(request: HttpRequest, bindings: Bindings) -> AccessIdentity:
    try:
        return await require_access(request, bindings)
    except ApiError as exc:
        message = f"Sign in through Cloudflare Access first ({exc.message})."
        raise OAuthError("access_denied", message, exc.status) from None


async def authorize_get(call: Call[None, None]) -> HttpResponse:
    request, bindings = call.request, call.bindings
    query = request.query
    try:
        identity = await _identity(request, bindings)
        client = await resolve_client(bindings, query.get("client_id"))
        redirect_uri = check_redirect(client, query.get("redirect_uri"))
    except OAuthError as exc:
        return error_page(exc.description, exc.status)
    issuer = issuer_of(bindings, request)
    state = query.get("state")
    back = _back(issuer, state)
    try:
        if query.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "response_type must be code")
        challenge = check_challenge(query.get("code_challenge"), query.get("code_challenge_method"))
        scopes = parse_scopes(query.get("scope"))
        resource = query.get("resource") or f"{issuer}{MCP_PATH}"
        if resource not in resources_for_origin(issuer):
            raise OAuthError("invalid_target", f"this server does not serve resource {resource}")
        tenants = await tenants_for(identity, bindings)
    except OAuthError as exc:
        return redirect_with(
            redirect_uri, {"error": exc.error, "error_description": exc.description, **back}
        )
    if not tenants:
        return error_page(
            f"{identity.principal} holds no tenant grant; ask an operator for one "
            "(agent-memory operators grant).",
            403,
        )
    pending: dict[str, Any] = {
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "scopes": list(scopes),
        "resource": resource,
        "issuer": issuer,
    }
    ticket, expires = new_secret("amt_"), int(bindings.clock.now()) + CONSENT_TTL
    await store.create_consent(
        d1(bindings), hash_token(ticket), identity.principal, pending, expires
    )
    return consent_page(client, redirect_uri, ticket, tenants, scopes, identity.principal)


async def authorize_post(call: Call[None, None]) -> HttpResponse:
    request, bindings = call.request, call.bindings
    try:
        identity = await _identity(request, bindings)
        form = parse_form(request.body)
        db, now = d1(bindings), int(bindings.clock.now())
        ticket_hash = hash_token(form.get("ticket", ""))
        pending = await store.take_consent(db, ticket_hash, identity.principal, now)
        if pending is None:
            raise OAuthError(
                "invalid_request", "This consent expired or was already answered; connect again."
            )
        tenant, approve = form.get("tenant", ""), form.get("decision") == "approve"
        if approve and tenant not in await tenants_for(identity, bindings):
            message = f"{identity.principal} holds no grant for tenant {tenant!r}."
            raise OAuthError("access_denied", message, 403)
    except OAuthError as exc:
        return error_page(exc.description, exc.status)
    redirect_uri = str(pending["redirect_uri"])
    back = _back(str(pending["issuer"]), pending.get("state"))
    scopes = tuple(s for s in pending["scopes"] if form.get(f"scope.{s}") == "on")
    if not approve or not scopes:
        reason = "no scope allowed" if approve else "the person declined"
        return redirect_with(
            redirect_uri, {"error": "access_denied", "error_description": reason, **back}
        )
    grant = Grant(
        tenant=tenant,
        grant_id="",
        client_id=str(pending["client_id"]),
        principal=identity.principal,
        scopes=scopes,
        resource=str(pending["resource"]),
    )
    code = new_secret(CODE_PREFIX)
    challenge = str(pending["code_challenge"])
    await store.create_code(db, hash_token(code), grant, redirect_uri, challenge, now + CODE_TTL)
    return redirect_with(redirect_uri, {"code": code, **back})


# The page's own CSP (its inline style) wins over the default one; `worker.app.handle` adds
# the other security headers to every response (`http_messages.secure_response`).
_HEADERS = {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'",
}

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.3rem} .client{font-weight:600} .host{font-family:monospace;color:#555}
fieldset{border:1px solid #ccc;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
label{display:block;margin:.4rem 0} select{font-size:1rem;padding:.2rem}
button{font-size:1rem;padding:.5rem 1.2rem;margin-right:.6rem}
.who{color:#555;font-size:.9rem}
"""


def _page(title: str, body: str, status: int = 200) -> HttpResponse:
    html = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )
    return HttpResponse(status=status, body=html.encode(), headers=Headers(_HEADERS))


def error_page(message: str, status: int = 400) -> HttpResponse:
    body = f"<h1>Cannot connect this client</h1><p id=error>{escape(message)}</p>"
    return _page("Authorization error", body, status)


def consent_page(
    client: ClientInfo,
    redirect_uri: str,
    ticket: str,
    tenants: list[str],
    scopes: tuple[str, ...],
    principal: str,
) -> HttpResponse:
    """Ask `principal` whether `client` may act on one of `tenants` with `scopes`, naming
    where the answer goes: the host of the redirect URI in use (a private-use scheme's
    app: the scheme itself, which reads as no web host)."""
    origin = (
        f"its metadata document at <span class=host id=client-host>{escape(client.host)}</span>"
        if client.kind == "cimd"
        else "its registration with this server alone (nobody vouches for it)"
    )
    parts = urlsplit(redirect_uri)
    destination = (
        f"<span class=host id=redirect-host>{escape(parts.hostname or '')}</span>"
        if parts.scheme in ("http", "https")
        else f"the app registered for <span class=host id=redirect-host>"
        f"{escape(parts.scheme)}:</span> links"
    )
    options = "".join(f"<option value='{escape(t)}'>{escape(t)}</option>" for t in tenants)
    boxes = "".join(
        f"<label><input type=checkbox name='scope.{escape(s)}' value=on checked> "
        f"<b>{escape(s)}</b> &mdash; {escape(SCOPE_DESCRIPTIONS.get(s, s))}</label>"
        for s in scopes
    )
    body = (
        "<h1>Connect <span class=client id=client-name>"
        f"{escape(client.display_name)}</span>?</h1>"
        f"<p>This client is known by {origin}. After you decide, your answer goes to "
        f"{destination} (<span class=host>{escape(redirect_uri)}</span>).</p>"
        f"<p class=who>Signed in as <span id=principal>{escape(principal)}</span>.</p>"
        "<form method=post action='/authorize'>"
        f"<input type=hidden name=ticket value='{escape(ticket)}'>"
        "<fieldset><legend>Tenant</legend>"
        f"<label>Act on tenant <select name=tenant id=tenant>{options}</select></label>"
        "</fieldset>"
        f"<fieldset id=scopes><legend>It may</legend>{boxes}</fieldset>"
        "<button type=submit name=decision value=approve id=approve>Allow</button>"
        "<button type=submit name=decision value=deny id=deny>Deny</button>"
        "</form>"
    )
    return _page(f"Connect {client.display_name}", body)
