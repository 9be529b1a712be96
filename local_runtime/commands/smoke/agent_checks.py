"""The Worker's own checks: health, an agent run through Cloudflare Access, and the
scheduled handler where it can be reached."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from pydantic import VERSION as PYDANTIC

from local_runtime.commands.smoke.session import (
    ACCESS_REFUSALS,
    Problem,
    Session,
    Skip,
    describe_access_refusal,
    describe_response,
    json_of,
)

EXPECTED_BINDINGS = ("kv", "d1", "vectorize", "ai_embedder", "llm", "agent_runtime", "cold")
# The Python wrangler.toml's compatibility_date selects (python_workers_314 from 2026-09-08).
DEPLOYED_PYTHON = "3.14."


def check_healthz(s: Session) -> str:
    response = s.request("GET", "/healthz")
    data = json_of(response)
    if response.status_code != 200 or not isinstance(data, dict):
        raise Problem(describe_response(response))
    if data.get("status") != "ok":
        raise Problem(f"status is {data.get('status')!r}, not 'ok'")
    s.environment = str(data.get("environment"))
    bindings = data.get("bindings")
    if not isinstance(bindings, dict):
        bindings = {}
    missing = [name for name in EXPECTED_BINDINGS if not bindings.get(name)]
    if missing:
        raise Problem(f"bindings missing: {', '.join(missing)} (wrangler.toml and README 'Deploy')")
    runtime, embedding = data.get("runtime") or {}, data.get("embedding") or {}
    python, pydantic = runtime.get("python"), runtime.get("pydantic")
    if pydantic != PYDANTIC:  # this checkout's pin: the deploy uploads it (docs/pyodide.md)
        raise Problem(f"the Worker runs pydantic {pydantic}, this checkout {PYDANTIC}: redeploy")
    if s.environment == "production" and not str(python).startswith(DEPLOYED_PYTHON):
        raise Problem(f"the Worker runs Python {python}, not {DEPLOYED_PYTHON} (wrangler.toml)")
    return (
        f"environment {s.environment}; Python {python}, pydantic {pydantic}; bindings "
        f"{', '.join(EXPECTED_BINDINGS)}; embedding {embedding.get('provider')}:"
        f"{embedding.get('model')} ({embedding.get('dimensions')} dims)"
    )


def no_access_reason(s: Session) -> str:
    creds = s.creds
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


def check_agent_run(s: Session) -> str:
    if not s.creds.has_access:
        raise Skip(no_access_reason(s))
    tenant = s.agent_tenant
    response = s.request(
        "POST",
        f"/v1/agents/{quote(tenant, safe='')}/{quote(s.o.agent_type, safe='')}/run",
        json_body={
            "input": f"Smoke check {s.marker}: please note this marker.",
            "instance_id": s.o.instance,
            "subject": s.marker,
        },
    )
    data = json_of(response)
    if response.status_code in ACCESS_REFUSALS:
        # Refused at the gate (the edge's or the Worker's): nothing ran, nothing to erase.
        s.access_refused = describe_access_refusal(response)
        raise Problem(s.access_refused)
    s.erase_tenants.add(tenant)  # the run may have written before failing
    if response.status_code != 200 or not isinstance(data, dict):
        raise Problem(describe_response(response))
    if data.get("status") != "completed":
        raise Problem(
            f"run {data.get('run_id')} ended {data.get('status')!r}: {data.get('failure')}"
        )
    return (
        f"run {data.get('run_id')} completed in {data.get('steps')} step(s) "
        f"(tenant {tenant}, {s.o.agent_type}/{s.o.instance})"
    )


def check_scheduled(s: Session) -> str:
    host = urlsplit(s.o.base_url).hostname or ""
    local = host in ("127.0.0.1", "localhost", "::1") or s.environment == "development"
    if not local:
        raise Skip(
            "not reachable from outside on Cloudflare: only Cron Triggers run the "
            "scheduled handler there (watch one with `npx wrangler tail`)"
        )
    if not s.creds.access_token:
        # The route runs every tenant's jobs: a platform admin's Access token, as a header.
        # A service token would need Access's edge to exchange it, and no edge fronts it.
        raise Skip(
            "the scheduled route needs a platform admin's Access token: give --access-token "
            "($AGENT_MEMORY_TOKEN)"
        )
    response = s.request(
        "GET",
        "/cdn-cgi/handler/scheduled",
        params={"cron": s.o.cron},
        headers=s.creds.access_headers(),
    )
    if response.status_code == 404:
        raise Skip("this server has no /cdn-cgi/handler/scheduled route (HTTP 404)")
    error = (json_of(response) or {}).get("error") if response.status_code == 403 else None
    if isinstance(error, dict) and error.get("code") == "tenant_forbidden":
        # A tenant-scoped credential: right for the other checks, not for this one.
        raise Skip(
            "the scheduled route needs a platform admin; this Access identity is not one "
            "(agent-memory operators grant ... --platform-admin)"
        )
    if response.status_code in ACCESS_REFUSALS:
        raise Problem(describe_access_refusal(response))
    data = json_of(response)
    if response.status_code != 200 or not isinstance(data, dict):
        raise Problem(describe_response(response))
    if data.get("cron") != s.o.cron or not data.get("job"):
        raise Problem(f"the Worker has no job for cron {s.o.cron!r}")
    return f"cron {s.o.cron!r} ran {data['job']}"
