"""`GET /authorize` and `POST /authorize`: the authorization endpoint, behind Cloudflare Access.

GET checks the Access identity, the client and its exact redirect URI first (else an error page:
never redirect to an unchecked URI, RFC 6749 §4.1.2.1), then response type, PKCE, scopes and
resource (else a redirect with `error`). The page holds only a single-use consent ticket bound to
the identity (ten minutes, stored hashed), so the POST can be neither forged nor altered. POST
re-checks identity and tenant grant and redirects with `code`, `state` and `iss` (RFC 9207). The
pages escape everything shown, cannot be framed, run no script and are never cached.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from authorization import oauth_store
from authorization.oauth_store import ClientInfo, Grant
from authorization.operator_grants import granted_tenants
from bindings.environment import Bindings
from gateway import admin_ops
from gateway.credentials import MCP_PATH, hash_token, origin_of, resources_for_origin
from http_messages import ApiError, Headers, HttpRequest, HttpResponse
from worker.app import Call
from worker.identity import AccessIdentity, require_access
from worker.oauth.protocol import (
    CODE_PREFIX,
    CODE_TTL,
    CONSENT_TTL,
    SCOPE_DESCRIPTIONS,
    OAuthError,
    check_challenge,
    d1,
    new_secret,
    parse_form,
    parse_scopes,
    stores,
)
from worker.oauth.token_endpoint import check_redirect, resolve_client


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
    """`GET /authorize`: validate, then show the consent page."""
    request, bindings = call.request, call.bindings
    query = request.query
    try:
        identity = await _identity(request, bindings)
        client = await resolve_client(bindings, query.get("client_id"))
        redirect_uri = check_redirect(client, query.get("redirect_uri"))
    except OAuthError as exc:
        return error_page(exc.description, exc.status)
    issuer = origin_of(request.url)
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
    await oauth_store.create_consent(
        d1(bindings), hash_token(ticket), identity.principal, pending, expires
    )
    return consent_page(client, redirect_uri, ticket, tenants, scopes, identity.principal)


async def authorize_post(call: Call[None, None]) -> HttpResponse:
    """`POST /authorize`: the person's decision on the consent page."""
    request, bindings = call.request, call.bindings
    try:
        identity = await _identity(request, bindings)
        form = parse_form(request.body)
        db, now = d1(bindings), int(bindings.clock.now())
        ticket_hash = hash_token(form.get("ticket", ""))
        pending = await oauth_store.take_consent(db, ticket_hash, identity.principal, now)
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
    await oauth_store.create_code(
        db, hash_token(code), grant, redirect_uri, challenge, now + CODE_TTL
    )
    return redirect_with(redirect_uri, {"code": code, **back})


# --- the pages ----------------------------------------------------------------------------

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
    """Ask `principal` whether `client` may act on one of `tenants` with `scopes`."""
    origin = (
        f"its metadata document at <span class=host id=client-host>{escape(client.host)}</span>"
        if client.kind == "cimd"
        else "registration with this server; it will return to "
        f"<span class=host id=client-host>{escape(client.host)}</span>"
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
        f"<p>This client is known by {origin}.</p>"
        f"<p class=who>Signed in as <span id=principal>{escape(principal)}</span>. "
        f"After you decide, you return to <span class=host>{escape(redirect_uri)}</span>.</p>"
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
