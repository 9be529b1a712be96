"""The consent page and the authorization server's error page: small, static HTML.

Everything shown is escaped (a client chooses its own name). The page cannot be framed
(`frame-ancestors 'none'`, clickjacking), loads nothing, runs no script, and is never cached.
"""

from __future__ import annotations

from html import escape

from http_messages import Headers, HttpResponse
from worker.oauth.protocol import SCOPE_DESCRIPTIONS
from worker.oauth.store import ClientInfo

_HEADERS = {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
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
