"""`smoke`: check a running Worker over HTTP — the last step of the README's "Deploy".

    agent-memory smoke BASE_URL [--tenant smoke] [--instance smoke] [--agent-type assistant]
        [--tool NAME [--tool-args JSON]] [--cron "0 6 * * *"] [--wait 30] [--timeout 60]
        [credentials]

Credentials, each from its flag or (better: out of shell history and process listings)
from its environment variable; none is ever printed:

    --memory-token          $AGENT_MEMORY_MEMORY_TOKEN  a memory token (docs/memory-api.md)
    --access-token          $AGENT_MEMORY_TOKEN         a Cloudflare Access application token
    --access-client-id      $CF_ACCESS_CLIENT_ID        an Access service token's id ...
    --access-client-secret  $CF_ACCESS_CLIENT_SECRET    ... and its secret
    --api-key               $AGENT_MEMORY_API_KEY       a tool-gateway API key

Checks, one line each (PASS / FAIL / SKIP and why), then a summary and, last, one JSON line:

* `healthz` — `GET /healthz` answers ok and every binding is present;
* `memory.working`, `memory.episodic` — a write read back / listed (memory token);
* `memory.semantic` — a fact written, then found by a search, with its score;
* `agent.run` — `POST /v1/agents/{tenant}/{agent_type}/run` through Cloudflare Access;
* `tool.call` — `POST /api/v1/tools/{tool}` with the API key (only for `--tool`);
* `mcp` — MCP `initialize` + `tools/list` with the API key;
* `scheduled` — the local runtime's `/cdn-cgi/handler/scheduled?cron=` (Cloudflare offers no
  such route: there only Cron Triggers run the handler, so the check is skipped);
* `cleanup` — what the run wrote is deleted again.

Access credentials go only to the Access-gated paths (`/v1/agents/*`, `/admin/*`): a service
token as `CF-Access-Client-Id` / `CF-Access-Client-Secret`, which Access exchanges at the edge
for the JWT the Worker verifies; an Access token as `cf-access-token` (what Access at the edge
reads) and `Cf-Access-Jwt-Assertion` (what the Worker reads; the local runtime has no edge).
Without a memory token, an Access credential mints one for `--tenant`/`--instance` through
`POST /admin/tenants/{tenant}/memory-tokens` and revokes it at the end.

What a run writes carries one marker, `smoke-<UTC time>-<random>`, unique per run. Cleanup
deletes the working and episodic keys with the memory token; with an Access credential it
also deletes the fact and erases the marker as a subject (`DELETE
/admin/tenants/{tenant}/subjects/{marker}`), which removes the agent run's runs, episodes,
working notes and memory events. So the semantic and agent checks, whose data only an
operator can delete, need an Access credential; without one they SKIP. (Without one, the
episodic write's `memory_written` event — ids and sizes, no content — stays in the log.)
The erase visits every agent instance of the tenant: use a tenant kept for smoke checks.

Anything that needs a credential which was not given is SKIP, never FAIL; the exit status
is 1 when any check failed, else 0.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import httpx

Status = Literal["PASS", "FAIL", "SKIP"]

DEFAULT_TENANT = "smoke"
DEFAULT_INSTANCE = "smoke"
DEFAULT_AGENT_TYPE = "assistant"
DEFAULT_CRON = "0 6 * * *"  # the daily brief: reads and reports, prunes nothing
MCP_PROTOCOL = "2025-06-18"
EXPECTED_BINDINGS = ("kv", "d1", "vectorize", "ai_embedder", "llm", "agent_runtime", "cold")
# Paths behind the Cloudflare Access application (README "Deploy"); only these get the
# Access credentials.
ACCESS_GATED_PREFIXES = ("/v1/agents/", "/admin/")
# Statuses of a refusal at the Access gate: a redirect to the login page, 401, 403.
ACCESS_REFUSALS = frozenset({301, 302, 303, 307, 401, 403})
# Header names, as Cloudflare Access and the Worker (`worker.access`) spell them.
ACCESS_JWT_HEADER = "Cf-Access-Jwt-Assertion"
ACCESS_EDGE_TOKEN_HEADER = "cf-access-token"
ACCESS_CLIENT_ID_HEADER = "CF-Access-Client-Id"
ACCESS_CLIENT_SECRET_HEADER = "CF-Access-Client-Secret"

# (attribute, flag, environment variable, what it is)
CREDENTIALS = (
    ("memory_token", "--memory-token", "AGENT_MEMORY_MEMORY_TOKEN", "memory token"),
    ("access_token", "--access-token", "AGENT_MEMORY_TOKEN", "Access token"),
    ("client_id", "--access-client-id", "CF_ACCESS_CLIENT_ID", "Access service token id"),
    (
        "client_secret",
        "--access-client-secret",
        "CF_ACCESS_CLIENT_SECRET",
        "Access service token secret",
    ),
    ("api_key", "--api-key", "AGENT_MEMORY_API_KEY", "API key"),
)


class Problem(Exception):
    """A check failed; the message says why (never with a credential in it)."""


class Skip(Exception):
    """A check cannot run here; the message says why and how to enable it."""


@dataclass
class Check:
    name: str
    status: Status
    detail: str


@dataclass
class Credentials:
    memory_token: str | None = None
    access_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    api_key: str | None = None
    # attribute -> where it came from ("--flag" or "$VAR"), for the header line
    sources: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: dict[str, str]) -> Credentials:
        creds = cls()
        for attr, flag, env, _ in CREDENTIALS:
            value = getattr(args, attr, None)
            source = flag
            if not value:
                value, source = environ.get(env) or None, f"${env}"
            if value:
                setattr(creds, attr, value.strip())
                creds.sources[attr] = source
        return creds

    @property
    def has_service_token(self) -> bool:
        return bool(self.client_id and self.client_secret)

    @property
    def has_access(self) -> bool:
        return bool(self.access_token) or self.has_service_token

    def access_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.has_service_token:
            assert self.client_id is not None and self.client_secret is not None
            headers[ACCESS_CLIENT_ID_HEADER] = self.client_id
            headers[ACCESS_CLIENT_SECRET_HEADER] = self.client_secret
        if self.access_token:
            headers[ACCESS_EDGE_TOKEN_HEADER] = self.access_token
            headers[ACCESS_JWT_HEADER] = self.access_token
        return headers

    def secrets(self) -> list[str]:
        values = [self.memory_token, self.access_token, self.client_secret, self.api_key]
        return [v for v in values if v]

    def describe(self) -> str:
        names = {attr: what for attr, _, _, what in CREDENTIALS}
        given = [f"{names[a]} ({s})" for a, s in self.sources.items()]
        return ", ".join(given) if given else "none"


def unverified_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, NOT verified (the Worker verifies it): which tenant, agent and
    tiers a memory token is for, so the checks address the right paths. {} if unreadable."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(raw)
    except (binascii.Error, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def new_marker(now: datetime | None = None) -> str:
    """`smoke-20261125T223012-9f8e7d6c5b4a`: a valid key, subject and search term, unique
    per run, so nothing a run writes can be mistaken for (or erase) anyone else's data."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
    return f"smoke-{stamp}-{secrets.token_hex(6)}"


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def describe_response(response: httpx.Response) -> str:
    """`HTTP 401 memory_token_invalid: <message>`, or the status and what kind of body came."""
    data = _json(response)
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
    if status in (401, 403) and ("cf-access-error" in response.headers or _json(response) is None):
        return (
            f"HTTP {status}: Cloudflare Access refused the request at the edge "
            f"({response.headers.get('cf-access-error', 'no JSON body from the Worker')})"
        )
    text = describe_response(response)
    data = _json(response)
    error = data.get("error") if isinstance(data, dict) else None
    hint = ACCESS_HINTS.get(error.get("code", "")) if isinstance(error, dict) else None
    return f"{text} ({hint})" if hint else text


@dataclass
class Options:
    base_url: str
    tenant: str | None
    instance: str
    agent_type: str
    tool: str | None
    tool_args: dict[str, Any]
    cron: str
    wait: float
    timeout: float
    poll_interval: float = 1.0


class Smoke:
    """One smoke run against one base URL. `run()` returns the checks in order."""

    def __init__(
        self, options: Options, creds: Credentials, client: httpx.Client | None = None
    ) -> None:
        self.o = options
        self.creds = creds
        self.client = client or httpx.Client(timeout=options.timeout, follow_redirects=False)
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

    # --- plumbing ---------------------------------------------------------------------

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

    def until(self, probe: Callable[[], Any | None]) -> Any | None:
        """Call `probe` until it returns something (KV and Vectorize are eventually
        consistent on Cloudflare) or `--wait` seconds have passed; its errors propagate."""
        deadline = time.monotonic() + self.o.wait
        while True:
            found = probe()
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(self.o.poll_interval)

    def record(self, name: str, action: Callable[[], str]) -> None:
        try:
            self.checks.append(Check(name, "PASS", action()))
        except Skip as exc:
            self.checks.append(Check(name, "SKIP", str(exc)))
        except Problem as exc:
            self.checks.append(Check(name, "FAIL", str(exc)))

    # --- the run ----------------------------------------------------------------------

    def run(self) -> list[Check]:
        self.record("healthz", self.check_healthz)
        if self.checks[-1].status == "FAIL":
            reason = "not tried: the Worker did not pass /healthz"
            for name in (
                "memory.working",
                "memory.episodic",
                "memory.semantic",
                "agent.run",
                "tool.call",
                "mcp",
                "scheduled",
                "cleanup",
            ):
                self.checks.append(Check(name, "SKIP", reason))
            return self.checks
        self.prepare_memory_token()
        self.record("memory.working", self.check_working)
        self.record("memory.episodic", self.check_episodic)
        self.record("memory.semantic", self.check_semantic)
        self.record("agent.run", self.check_agent_run)
        self.record("tool.call", self.check_tool_call)
        self.record("mcp", self.check_mcp)
        self.record("scheduled", self.check_scheduled)
        self.record("cleanup", self.cleanup)
        return self.checks

    def check_healthz(self) -> str:
        response = self.request("GET", "/healthz")
        data = _json(response)
        if response.status_code != 200 or not isinstance(data, dict):
            raise Problem(describe_response(response))
        if data.get("status") != "ok":
            raise Problem(f"status is {data.get('status')!r}, not 'ok'")
        self.environment = str(data.get("environment"))
        bindings = data.get("bindings")
        if not isinstance(bindings, dict):
            bindings = {}
        missing = [name for name in EXPECTED_BINDINGS if not bindings.get(name)]
        if missing:
            raise Problem(
                f"bindings missing: {', '.join(missing)} (wrangler.toml and README 'Deploy')"
            )
        embedding = data.get("embedding") or {}
        return (
            f"environment {self.environment}; bindings {', '.join(EXPECTED_BINDINGS)}; "
            f"embedding {embedding.get('provider')}:{embedding.get('model')} "
            f"({embedding.get('dimensions')} dims)"
        )

    # --- memory -----------------------------------------------------------------------

    def prepare_memory_token(self) -> None:
        """Use the given memory token, or mint one with the Access credential."""
        if self.memory_token or not self.creds.has_access:
            return
        tenant, agent = self.agent_tenant, self.o.instance
        response = self.request(
            "POST",
            f"/admin/tenants/{quote(tenant, safe='')}/memory-tokens",
            json_body={
                "agent_id": agent,
                "tiers": ["working", "episodic", "semantic"],
                "scopes": ["read", "write"],
                "ttl_seconds": 600,
            },
        )
        data = _json(response)
        if response.status_code in ACCESS_REFUSALS:
            self.access_refused = describe_access_refusal(response)
        if response.status_code != 201 or not isinstance(data, dict) or not data.get("token"):
            self.memory_refused = (
                "minting a memory token through POST /admin/tenants/{tenant}/memory-tokens "
                f"failed: {describe_access_refusal(response)}"
            )
            return
        self.memory_token = str(data["token"])
        self.creds.sources.setdefault("memory_token", "minted with the Access credential")
        self.minted_jti = str(data.get("jti") or "") or None
        self.claims = {
            "tenant": data.get("tenant", tenant),
            "agent_id": data.get("agent_id", agent),
            "tiers": data.get("tiers", []),
            "scopes": data.get("scopes", []),
        }

    def require_memory(self, tier: str) -> None:
        if self.memory_refused:
            raise Problem(self.memory_refused)
        if not self.memory_token:
            raise Skip(
                "no memory token: give --memory-token / $AGENT_MEMORY_MEMORY_TOKEN, or an "
                "Access credential to mint one"
            )
        tiers, scopes = self.claims.get("tiers"), self.claims.get("scopes")
        if isinstance(tiers, list) and tiers and tier not in tiers:
            raise Skip(f"the memory token has no {tier} tier (it has {', '.join(tiers)})")
        if isinstance(scopes, list) and scopes and "write" not in scopes:
            raise Skip("the memory token may not write (scope 'write')")

    def memory_call(self, method: str, path: str = "", **kwargs: Any) -> tuple[httpx.Response, Any]:
        route = f"/api/v1/memory/{quote(self.memory_agent, safe='')}{path}"
        response = self.request(method, route, headers=self.memory_headers(), **kwargs)
        if response.status_code in (401, 403):
            # The token itself is refused: every later memory call would be too.
            self.memory_refused = f"the memory token was refused: {describe_response(response)}"
            raise Problem(self.memory_refused)
        return response, _json(response)

    def write(self, tier: str, key: str, value: Any, ttl: int) -> dict[str, Any]:
        body = {"tier": tier, "key": key, "value": value, "ttl": ttl}
        response, data = self.memory_call("POST", json_body=body)
        if response.status_code != 201 or not isinstance(data, dict):
            raise Problem(f"the {tier} write failed: {describe_response(response)}")
        item = data.get("item")
        return item if isinstance(item, dict) else {}

    def find_listed(self, tier: str, key: str, pages: int = 5) -> dict[str, Any] | None:
        cursor: str | None = None
        for _ in range(pages):
            params: dict[str, Any] = {"tier": tier, "limit": 100}
            if cursor:
                params["cursor"] = cursor
            response, data = self.memory_call("GET", params=params)
            if response.status_code != 200 or not isinstance(data, dict):
                raise Problem(f"listing {tier} failed: {describe_response(response)}")
            for item in data.get("items") or []:
                if isinstance(item, dict) and item.get("key") == key:
                    return item
            cursor = data.get("next_cursor")
            if not cursor:
                return None
        return None

    def check_working(self) -> str:
        self.require_memory("working")
        key, value = f"{self.marker}-working", {"smoke": self.marker, "n": 1}
        self.write("working", key, value, ttl=60)
        self.written_keys.append(("working", key))
        item = self.until(lambda: self.find_listed("working", key))
        if item is None:
            raise Problem(f"wrote {key}, but it was not read back within {self.o.wait:g} s")
        if item.get("value") != value:
            raise Problem(f"read back {key} with another value: {item.get('value')!r}")
        return f"wrote and read back {key} (tenant {self.memory_tenant}, agent {self.memory_agent})"

    def check_episodic(self) -> str:
        self.require_memory("episodic")
        key = f"{self.marker}-episode"
        self.write("episodic", key, f"smoke check episode {self.marker}", ttl=600)
        self.written_keys.append(("episodic", key))
        item = self.until(lambda: self.find_listed("episodic", key))
        if item is None:
            raise Problem(f"wrote episode {key}, but the listing did not show it")
        return f"wrote episode {key} and found it in the episodic listing"

    def check_semantic(self) -> str:
        self.require_memory("semantic")
        if not self.creds.has_access:
            raise Skip(
                "a fact can only be deleted by an operator (DELETE /admin/tenants/{t}/facts/"
                "{id}), so this check needs an Access credential to clean up after itself"
            )
        text = f"The smoke check {self.marker} stored this fact."
        item = self.write("semantic", self.marker, text, ttl=3600)
        fact_id = str((item.get("metadata") or {}).get("fact_id") or "")
        if not fact_id:
            raise Problem("the semantic write answered no fact_id")
        self.written_facts.append((self.memory_tenant, fact_id))
        self.erase_tenants.add(self.memory_tenant)
        query = f"smoke check {self.marker}"

        def search() -> dict[str, Any] | None:
            params = {"tier": "semantic", "query": query, "limit": 10}
            response, data = self.memory_call("GET", params=params)
            if response.status_code != 200 or not isinstance(data, dict):
                raise Problem(f"the semantic search failed: {describe_response(response)}")
            for found in data.get("items") or []:
                if (
                    isinstance(found, dict)
                    and (found.get("metadata") or {}).get("fact_id") == fact_id
                ):
                    return found
            return None

        found = self.until(search)
        if found is None:
            raise Problem(
                f"wrote fact {fact_id}, but a search did not find it in {self.o.wait:g} s"
            )
        breakdown = found.get("score_breakdown") or {}
        channels = sorted((breakdown.get("channels") or {}).keys())
        via = f" via {', '.join(channels)}" if channels else ""
        return f"wrote fact {fact_id}; search found it with score {found.get('score')}{via}"

    # --- agent run --------------------------------------------------------------------

    def no_access_reason(self) -> str:
        creds = self.creds
        if bool(creds.client_id) != bool(creds.client_secret):
            missing = (
                "--access-client-secret / $CF_ACCESS_CLIENT_SECRET"
                if creds.client_id
                else "--access-client-id / $CF_ACCESS_CLIENT_ID"
            )
            return f"the Access service token is incomplete: give {missing} too"
        return (
            "no Access credential: give --access-client-id/--access-client-secret "
            "($CF_ACCESS_CLIENT_ID/$CF_ACCESS_CLIENT_SECRET) or --access-token "
            "($AGENT_MEMORY_TOKEN)"
        )

    def check_agent_run(self) -> str:
        if not self.creds.has_access:
            raise Skip(self.no_access_reason())
        tenant = self.agent_tenant
        response = self.request(
            "POST",
            f"/v1/agents/{quote(tenant, safe='')}/{quote(self.o.agent_type, safe='')}/run",
            json_body={
                "input": f"Smoke check {self.marker}: please note this marker.",
                "instance_id": self.o.instance,
                "subject": self.marker,
            },
        )
        data = _json(response)
        if response.status_code in ACCESS_REFUSALS:
            # Refused at the gate (the edge's or the Worker's): nothing ran, nothing to erase.
            self.access_refused = describe_access_refusal(response)
            raise Problem(self.access_refused)
        self.erase_tenants.add(tenant)  # the run may have written before failing
        if response.status_code != 200 or not isinstance(data, dict):
            raise Problem(describe_response(response))
        if data.get("status") != "completed":
            raise Problem(
                f"run {data.get('run_id')} ended {data.get('status')!r}: {data.get('failure')}"
            )
        return (
            f"run {data.get('run_id')} completed in {data.get('steps')} step(s) "
            f"(tenant {tenant}, {self.o.agent_type}/{self.o.instance})"
        )

    # --- gateway ----------------------------------------------------------------------

    def api_key_headers(self) -> dict[str, str]:
        assert self.creds.api_key is not None
        return {"Authorization": f"Bearer {self.creds.api_key}"}

    def check_tool_call(self) -> str:
        if not self.o.tool:
            raise Skip(
                "no tool named: give --tool NAME --tool-args JSON (a tool registered for "
                "the API key's tenant) and --api-key / $AGENT_MEMORY_API_KEY"
            )
        if not self.creds.api_key:
            raise Skip("no API key: give --api-key / $AGENT_MEMORY_API_KEY")
        response = self.request(
            "POST",
            f"/api/v1/tools/{quote(self.o.tool, safe='')}",
            json_body=self.o.tool_args,
            headers=self.api_key_headers(),
        )
        upstream = response.headers.get("x-upstream-status")
        if upstream is None:
            raise Problem(f"the gateway refused the call: {describe_response(response)}")
        if not upstream.isdigit() or int(upstream) >= 400:
            raise Problem(f"the gateway called the upstream, which answered HTTP {upstream}")
        return (
            f"{self.o.tool}: the upstream answered HTTP {upstream} ({len(response.content)} bytes)"
        )

    def mcp_call(self, message: dict[str, Any]) -> Any:
        response = self.request(
            "POST",
            "/mcp",
            json_body=message,
            headers={
                **self.api_key_headers(),
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": MCP_PROTOCOL,
            },
        )
        data = _json(response)
        if response.status_code != 200 or not isinstance(data, dict):
            error = data.get("error") if isinstance(data, dict) else None
            if isinstance(error, dict) and "message" in error:
                code = (error.get("data") or {}).get("code", error.get("code"))
                raise Problem(
                    f"{message['method']}: HTTP {response.status_code} {code}: {error['message']}"
                )
            raise Problem(f"{message['method']}: {describe_response(response)}")
        if "error" in data:
            raise Problem(f"{message['method']}: JSON-RPC error {data['error']}")
        return data.get("result")

    def check_mcp(self) -> str:
        if not self.creds.api_key:
            raise Skip("no API key: give --api-key / $AGENT_MEMORY_API_KEY")
        init = self.mcp_call(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": MCP_PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "agent-memory-smoke", "version": "1"},
                },
            }
        )
        if not isinstance(init, dict) or "protocolVersion" not in init:
            raise Problem(f"initialize answered no protocolVersion: {init!r}"[:200])
        listed = self.mcp_call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = listed.get("tools") if isinstance(listed, dict) else None
        if not isinstance(tools, list):
            raise Problem("tools/list answered no tools list")
        names = [str(t.get("name")) for t in tools if isinstance(t, dict)]
        if self.o.tool and self.o.tool not in names:
            raise Problem(f"tools/list does not list {self.o.tool} (it lists {names})")
        server = (init.get("serverInfo") or {}).get("name", "?")
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        return (
            f"initialize: protocol {init['protocolVersion']}, server {server}; "
            f"tools/list: {len(names)} tool(s){': ' + shown if names else ''}"
        )

    # --- scheduled --------------------------------------------------------------------

    def check_scheduled(self) -> str:
        host = urlsplit(self.o.base_url).hostname or ""
        local = host in ("127.0.0.1", "localhost", "::1") or self.environment == "development"
        if not local:
            raise Skip(
                "not reachable from outside on Cloudflare: only Cron Triggers run the "
                "scheduled handler there (watch one with `npx wrangler tail`)"
            )
        response = self.request("GET", "/cdn-cgi/handler/scheduled", params={"cron": self.o.cron})
        if response.status_code == 404:
            raise Skip("this server has no /cdn-cgi/handler/scheduled route (HTTP 404)")
        data = _json(response)
        if response.status_code != 200 or not isinstance(data, dict):
            raise Problem(describe_response(response))
        if data.get("cron") != self.o.cron or not data.get("job"):
            raise Problem(f"the Worker has no job for cron {self.o.cron!r}")
        return f"cron {self.o.cron!r} ran {data['job']}"

    # --- cleanup ----------------------------------------------------------------------

    def cleanup(self) -> str:
        done: list[str] = []
        left: list[str] = []
        if self.memory_token and not self.memory_refused:
            for tier, key in self.written_keys:
                try:
                    response, data = self.memory_call(
                        "DELETE", f"/{quote(key, safe='')}", params={"tier": tier}
                    )
                except Problem as exc:
                    left.append(f"{tier} key {key} ({exc})")
                    continue
                if response.status_code == 200 and isinstance(data, dict):
                    done.append(f"{tier} key")
                else:
                    left.append(f"{tier} key {key} ({describe_response(response)})")
        elif self.written_keys:
            left.extend(f"{tier} key {key}" for tier, key in self.written_keys)
        for tenant, fact_id in self.written_facts:
            response = self.request(
                "DELETE", f"/admin/tenants/{quote(tenant, safe='')}/facts/{fact_id}"
            )
            data = _json(response)
            if response.status_code == 200 and isinstance(data, dict) and data.get("complete"):
                done.append(f"fact {fact_id}")
            else:
                left.append(f"fact {fact_id} ({describe_access_refusal(response)})")
        if self.creds.has_access and not self.access_refused:
            for tenant in sorted(self.erase_tenants):
                path = (
                    f"/admin/tenants/{quote(tenant, safe='')}/subjects/"
                    f"{quote(self.marker, safe='')}"
                )
                response = self.request("DELETE", path)
                data = _json(response)
                if response.status_code == 200 and isinstance(data, dict):
                    counts = {
                        k: data[k]
                        for k in ("runs", "episodes", "working_keys", "facts", "events")
                        if data.get(k)
                    }
                    shown = ", ".join(f"{k} {v}" for k, v in counts.items()) or "nothing left"
                    done.append(f"erased marker in tenant {tenant} ({shown})")
                else:
                    left.append(
                        f"the marker in tenant {tenant} ({describe_access_refusal(response)})"
                    )
        elif self.erase_tenants:
            left.append(
                "the agent run's records (the Access credential was refused, so the marker "
                f"could not be erased: DELETE /admin/tenants/T/subjects/{self.marker})"
            )
        if self.minted_jti:
            tenant = str(self.claims.get("tenant") or self.agent_tenant)
            response = self.request(
                "DELETE", f"/admin/tenants/{quote(tenant, safe='')}/memory-tokens/{self.minted_jti}"
            )
            if response.status_code == 200:
                done.append("revoked the minted memory token")
            else:
                left.append(f"the minted memory token ({describe_access_refusal(response)})")
        if left:
            raise Problem(f"left behind: {'; '.join(left)}")
        if not done:
            raise Skip("nothing was written")
        return "deleted " + ", ".join(done)


# --- output ------------------------------------------------------------------------------


def redact(text: str, hidden: Iterable[str]) -> str:
    """`text` with every credential value replaced: output never shows a secret, even if a
    server echoed one."""
    for value in sorted(hidden, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "[redacted]")
    return text


def report(
    checks: list[Check], options: Options, marker: str, creds: Credentials
) -> tuple[list[str], int]:
    counts = {
        status: sum(c.status == status for c in checks) for status in ("PASS", "FAIL", "SKIP")
    }
    lines = [f"{c.status} {c.name}: {c.detail}" for c in checks]
    lines.append(
        f"summary: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
    )
    lines.append(
        json.dumps(
            {
                "base_url": options.base_url,
                "run": marker,
                "ok": counts["FAIL"] == 0,
                "passed": counts["PASS"],
                "failed": counts["FAIL"],
                "skipped": counts["SKIP"],
                "credentials": sorted(creds.sources),
                "checks": [
                    {"name": c.name, "status": c.status, "detail": c.detail} for c in checks
                ],
            },
            ensure_ascii=False,
        )
    )
    hidden = creds.secrets()
    return [redact(line, hidden) for line in lines], (1 if counts["FAIL"] else 0)


def cmd_smoke(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # request lines would clutter output
    creds = Credentials.from_args(args, dict(os.environ))
    options = Options(
        base_url=args.base_url,
        tenant=args.tenant,
        instance=args.instance,
        agent_type=args.agent_type,
        tool=args.tool,
        tool_args=args.tool_args,
        cron=args.cron,
        wait=args.wait,
        timeout=args.timeout,
    )
    smoke = Smoke(options, creds)
    print(redact(f"# smoke check of {options.base_url}, run {smoke.marker}", creds.secrets()))
    print(f"# credentials: {creds.describe()}")
    try:
        checks = smoke.run()
    finally:
        smoke.client.close()
    lines, status = report(checks, options, smoke.marker, creds)
    print("\n".join(lines))
    sys.stdout.flush()
    return status


# --- arguments ---------------------------------------------------------------------------


def _base_url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError("BASE_URL must be http(s)://host[:port][/path]")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise argparse.ArgumentTypeError("BASE_URL must have no query, fragment or user info")
    return raw.strip().rstrip("/")


def _tool_args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--tool-args is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--tool-args must be a JSON object")
    return value


def register(sub: Any) -> None:
    smoke = sub.add_parser(
        "smoke",
        help="check a running Worker (deployed or local) over HTTP",
        description=(
            "Exercise a running Worker over HTTP: healthz, memory write/read/search, an "
            "agent run, a tool call, MCP and the scheduled route; one PASS/FAIL/SKIP line "
            "per check, a summary, and a JSON last line. Exit status 1 if a check failed. "
            "Credentials: each flag or its environment variable (preferred: it keeps the "
            "secret out of shell history); checks without their credential SKIP."
        ),
    )
    smoke.add_argument("base_url", type=_base_url, metavar="BASE_URL")
    smoke.add_argument(
        "--tenant",
        help=f"tenant of the agent run and of a minted memory token (default: the memory "
        f"token's, else {DEFAULT_TENANT!r}); use one kept for smoke checks",
    )
    smoke.add_argument(
        "--instance",
        default=DEFAULT_INSTANCE,
        help=f"agent instance id for the run and a minted token (default {DEFAULT_INSTANCE})",
    )
    smoke.add_argument("--agent-type", default=DEFAULT_AGENT_TYPE)
    smoke.add_argument("--tool", help="a tool of the API key's tenant to call")
    smoke.add_argument(
        "--tool-args", type=_tool_args, default={}, help="the tool's arguments, a JSON object"
    )
    smoke.add_argument(
        "--cron", default=DEFAULT_CRON, help=f"cron to run locally (default {DEFAULT_CRON!r})"
    )
    smoke.add_argument(
        "--wait",
        type=float,
        default=30.0,
        help="seconds to wait for a write to become visible (KV, Vectorize: default 30)",
    )
    smoke.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    for attr, flag, env, what in CREDENTIALS:
        smoke.add_argument(flag, dest=attr, help=f"{what} (default ${env})")
    smoke.set_defaults(func=cmd_smoke)
