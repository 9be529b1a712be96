"""A smoke run's state and plumbing: options, the HTTP client, what was written (for the
cleanup), and how a refusal is described."""

from __future__ import annotations

import argparse
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from local_runtime.commands.smoke.credentials import Credentials, unverified_claims

Status = Literal["PASS", "FAIL", "SKIP"]

DEFAULT_TENANT = "smoke"
DEFAULT_INSTANCE = "smoke"
DEFAULT_AGENT_TYPE = "assistant"
DEFAULT_CRON = "0 6 * * *"  # the daily brief: reads and reports, prunes nothing
# Paths behind the Cloudflare Access application (README "Deploy"); only these get the
# Access credentials.
ACCESS_GATED_PREFIXES = ("/v1/agents/", "/admin/")
# Statuses of a refusal at the Access gate: a redirect to the login page, 401, 403.
ACCESS_REFUSALS = frozenset({301, 302, 303, 307, 401, 403})


class Problem(Exception):
    """A check failed; the message says why (never with a credential in it)."""


class Skip(Exception):
    """A check cannot run here; the message says why and how to enable it."""


@dataclass
class Check:
    name: str
    status: Status
    detail: str


def new_marker(now: datetime | None = None) -> str:
    """`smoke-20261125T223012-9f8e7d6c5b4a`: a valid key, subject and search term, unique
    per run, so nothing a run writes can be mistaken for (or erase) anyone else's data."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
    return f"smoke-{stamp}-{secrets.token_hex(6)}"


def json_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def describe_response(response: httpx.Response) -> str:
    """`HTTP 401 memory_token_invalid: <message>`, or the status and what kind of body came."""
    data = json_of(response)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("code"):
        return f"HTTP {response.status_code} {error['code']}: {error.get('message', '')}".strip()
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return f"HTTP {response.status_code}: {data['error']}"
    kind = response.headers.get("content-type", "no content-type").split(";")[0]
    text = " ".join(response.text.split())[:120]
    return f"HTTP {response.status_code} ({kind}){': ' + text if text else ''}"


ACCESS_HINTS = {
    "access_token_missing": "no Access token reached the Worker: is this path behind the "
    "Access application, and does its policy admit this credential?",
    "access_token_invalid": "the Worker refused the Access token: check ACCESS_TEAM_DOMAIN "
    "and ACCESS_AUD (the application's AUD tag)",
    "access_not_configured": "set ACCESS_TEAM_DOMAIN and ACCESS_AUD on the Worker",
    "tenant_forbidden": "grant this identity the tenant: `agent-memory operators grant "
    "PRINCIPAL --tenant T --wrangler` (a service token's principal is its client id, "
    "--kind common_name)",
}


def describe_access_refusal(response: httpx.Response) -> str:
    """Why an Access-gated request was refused, by the edge or by the Worker, and what to do."""
    status = response.status_code
    location = response.headers.get("location", "")
    if 300 <= status < 400 and "cloudflareaccess.com" in location:
        return (
            f"HTTP {status}: Cloudflare Access sent the request to its login page: the "
            "credential was not accepted at the edge (a service token needs a Service Auth "
            "policy on the application; an Access token must be for this application)"
        )
    if status in (401, 403) and (
        "cf-access-error" in response.headers or json_of(response) is None
    ):
        return (
            f"HTTP {status}: Cloudflare Access refused the request at the edge "
            f"({response.headers.get('cf-access-error', 'no JSON body from the Worker')})"
        )
    text = describe_response(response)
    data = json_of(response)
    error = data.get("error") if isinstance(data, dict) else None
    hint = ACCESS_HINTS.get(error.get("code", "")) if isinstance(error, dict) else None
    return f"{text} ({hint})" if hint else text


class Session:
    """One smoke run against one base URL: the checks (functions of a `Session`) record
    their results and what they wrote here."""

    def __init__(self, options: argparse.Namespace, creds: Credentials) -> None:
        self.o = options  # the command's arguments
        self.creds = creds
        self.client = httpx.Client(timeout=options.timeout, follow_redirects=False)
        self.marker = new_marker()
        self.checks: list[Check] = []
        self.environment: str | None = None
        # The memory token in use and what it says of itself (unverified).
        self.memory_token = creds.memory_token
        self.claims = unverified_claims(creds.memory_token) if creds.memory_token else {}
        self.minted_jti: str | None = None
        self.memory_refused: str | None = None
        # What to clean up: (tier, key) by the memory token; fact ids; tenants to erase in.
        self.written_keys: list[tuple[str, str]] = []
        self.written_facts: list[tuple[str, str]] = []
        self.erase_tenants: set[str] = set()
        self.access_refused: str | None = None

    @property
    def agent_tenant(self) -> str:
        return self.o.tenant or str(self.claims.get("tenant") or DEFAULT_TENANT)

    @property
    def memory_tenant(self) -> str:
        return str(self.claims.get("tenant") or self.agent_tenant)

    @property
    def memory_agent(self) -> str:
        return str(self.claims.get("agent_id") or self.o.instance)

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        sent = dict(headers or {})
        if path.startswith(ACCESS_GATED_PREFIXES):
            sent.update(self.creds.access_headers())
        try:
            return self.client.request(
                method,
                self.o.base_url + path,
                json=json_body,
                params=params,
                headers=sent,
            )
        except httpx.HTTPError as exc:
            # The type and the host only: an httpx message can carry the whole URL.
            host = urlsplit(self.o.base_url).netloc
            raise Problem(f"no answer from {host}: {type(exc).__name__}") from None

    def memory_headers(self) -> dict[str, str]:
        assert self.memory_token is not None
        return {"Authorization": f"Bearer {self.memory_token}"}

    def api_key_headers(self) -> dict[str, str]:
        assert self.creds.api_key is not None
        return {"Authorization": f"Bearer {self.creds.api_key}"}

    def until(self, probe: Callable[[], Any | None]) -> Any | None:
        """Call `probe` until it returns something (KV and Vectorize are eventually
        consistent on Cloudflare) or `--wait` seconds have passed; its errors propagate."""
        deadline = time.monotonic() + self.o.wait
        while True:
            found = probe()
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(1.0)

    def record(self, name: str, action: Callable[[], str]) -> None:
        try:
            self.checks.append(Check(name, "PASS", action()))
        except Skip as exc:
            self.checks.append(Check(name, "SKIP", str(exc)))
        except Problem as exc:
            self.checks.append(Check(name, "FAIL", str(exc)))
