"""`GET /authorize` and `POST /authorize`: the authorization endpoint, behind Cloudflare Access.

Order of checks on GET (RFC 6749 §4.1.2.1: never redirect to an unchecked URI):

1. the Cloudflare Access identity (`worker.access.require_access`; deploy an Access
   application on `/authorize` so a browser is sent to log in first): no identity, an
   error page;
2. the client (`clients.resolve_client`: a DCR row, or the CIMD document fetched through
   the outbound guard) and its redirect URI (exact match): failures are an error page;
3. the request: `response_type=code`, PKCE S256, known scopes, `resource` one this server
   answers for (`invalid_target`): failures are redirected to the client with `error`;
4. the tenants the person may choose: their operator grants (`worker.operators`) that
   are gateway tenants; platform admins choose among every gateway tenant.

The page then holds only a consent ticket (256 random bits, stored hashed in D1 with the
validated request, for that identity, single use, ten minutes), so the POST cannot be
forged cross-site and its request cannot be altered. POST re-checks the identity and the
tenant grant, then redirects with `code`, `state` and `iss` (RFC 9207), or
`error=access_denied`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from bindings.environment import Bindings
from gateway import admin_ops
from gateway.oauth_tokens import MCP_PATH, resources_for_origin
from http_messages import Headers, HttpRequest, HttpResponse
from http_messages.errors import ApiError
from worker.access import AccessIdentity, require_access
from worker.oauth import store
from worker.oauth.clients import check_redirect, resolve_client
from worker.oauth.consent_page import consent_page, error_page
from worker.oauth.metadata import issuer_of
from worker.oauth.protocol import OAuthError, check_challenge, parse_form, parse_scopes
from worker.operators import PLATFORM, Principal, granted
from worker.router import Call


def redirect_with(redirect_uri: str, params: dict[str, str]) -> HttpResponse:
    """302 to `redirect_uri` with `params` added to its query (kept, RFC 6749 §3.1.2)."""
    parts = urlsplit(redirect_uri)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    location = urlunsplit(parts._replace(query=urlencode(query)))
    return HttpResponse(
        status=302, headers=Headers({"location": location, "cache-control": "no-store"})
    )


def _who(identity: AccessIdentity) -> Principal:
    return Principal(email=identity.email, common_name=identity.common_name, groups=identity.groups)


async def tenants_for(identity: AccessIdentity, bindings: Bindings) -> list[str]:
    """The gateway tenants this identity holds a grant for (all of them for a platform admin)."""
    if bindings.kv is None or bindings.db is None:
        raise OAuthError("temporarily_unavailable", "the authorization server needs D1 and KV", 503)
    existing = sorted(t.tenant for t in await admin_ops.list_tenants(bindings.kv))
    who = _who(identity)
    if await granted(who, None, bindings):
        return existing
    pairs = who.pairs()
    if not pairs:
        return []
    matches = " OR ".join("(principal_kind = ? AND principal = ?)" for _ in pairs)
    result = await (
        bindings.db.prepare(
            f"SELECT DISTINCT tenant_id FROM operator_grants WHERE tenant_id != ? AND ({matches})"
        )
        .bind(PLATFORM, *[v for pair in pairs for v in pair])
        .all()
    )
    mine = {str(row["tenant_id"]) for row in result.results}
    return [t for t in existing if t in mine]


async def _identity(request: HttpRequest, bindings: Bindings) -> AccessIdentity:
    try:
        return await require_access(request, bindings)
    except ApiError as exc:
        raise _PageError(
            f"Sign in through Cloudflare Access first ({exc.message}).", exc.status
        ) from None


class _PageError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


async def authorize_get(call: Call[None, None]) -> HttpResponse:
    """`GET /authorize`: validate, then show the consent page."""
    request, bindings = call.request, call.bindings
    query = request.query
    try:
        identity = await _identity(request, bindings)
        try:
            client = await resolve_client(bindings, query.get("client_id"))
            redirect_uri = check_redirect(client, query.get("redirect_uri"))
        except OAuthError as exc:
            raise _PageError(exc.description, exc.status) from None
    except _PageError as exc:
        return error_page(exc.message, exc.status)
    issuer = issuer_of(request)
    state = query.get("state")
    back: dict[str, str] = {"iss": issuer} | ({"state": state} if state is not None else {})
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
    assert bindings.db is not None  # tenants_for checked
    now = int(bindings.clock.now())
    ticket = await store.create_consent(bindings.db, identity.principal, pending, now)
    return consent_page(client, redirect_uri, ticket, tenants, scopes, identity.principal)


async def authorize_post(call: Call[None, None]) -> HttpResponse:
    """`POST /authorize`: the person's decision on the consent page."""
    request, bindings = call.request, call.bindings
    try:
        identity = await _identity(request, bindings)
        try:
            form = parse_form(request.body)
        except OAuthError as exc:
            raise _PageError(exc.description) from None
        if bindings.db is None:
            raise _PageError("the authorization server needs D1", 503)
        now = int(bindings.clock.now())
        pending = await store.take_consent(
            bindings.db, form.get("ticket", ""), identity.principal, now
        )
        if pending is None:
            raise _PageError("This consent expired or was already answered; connect again.")
        tenant = form.get("tenant", "")
        if form.get("decision") == "approve" and tenant not in await tenants_for(
            identity, bindings
        ):
            raise _PageError(f"{identity.principal} holds no grant for tenant {tenant!r}.", 403)
    except _PageError as exc:
        return error_page(exc.message, exc.status)
    except OAuthError as exc:
        return error_page(exc.description, exc.status)
    redirect_uri = str(pending["redirect_uri"])
    back: dict[str, str] = {"iss": str(pending["issuer"])}
    if pending.get("state") is not None:
        back["state"] = str(pending["state"])
    scopes = tuple(s for s in pending["scopes"] if form.get(f"scope.{s}") == "on")
    if form.get("decision") != "approve" or not scopes:
        reason = "the person declined" if form.get("decision") != "approve" else "no scope allowed"
        return redirect_with(
            redirect_uri, {"error": "access_denied", "error_description": reason, **back}
        )
    grant = store.Grant(
        tenant=tenant,
        grant_id="",
        client_id=str(pending["client_id"]),
        principal=identity.principal,
        scopes=scopes,
        resource=str(pending["resource"]),
    )
    code = await store.create_code(
        bindings.db, grant, redirect_uri, str(pending["code_challenge"]), now
    )
    return redirect_with(redirect_uri, {"code": code, **back})
