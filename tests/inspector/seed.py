"""Seed a tenant through the public routes only, as an operator and an MCP client would.

`seed(base, state)` mints an Access token and an MCP key with the CLI, stores facts over
MCP (`store_memory`, two of them conflicting about `customer:ada`), recalls once, runs the
assistant twice (`POST /v1/agents/...`; the second run recalls the first run's episode)
and runs the reconciler (`POST /admin/tenants/{t}/reconcile`), which supersedes the older
conflicting fact.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from local_runtime.cli import main as cli_main
from worker.identity import ACCESS_HEADER

TENANT = "acme"
SUBJECT = "customer:ada"
OLD_FACT = "Ada prefers email contact"
NEW_FACT = "Ada now prefers phone calls"
OTHER_FACT = "The Berlin office closes at 18:00"
FIRST_RUN = f"Note for {SUBJECT}: call before noon"
SECOND_RUN = "What should I remember about the office?"


@dataclass(frozen=True)
class Seeded:
    base: str
    token: str
    api_key: str
    state: Path

    def operator(self, email: str, *tenants: str) -> str:
        """An Access token for `email`, granted `tenants` only (a tenant-scoped operator)."""
        for tenant in tenants:
            cli("operators", "grant", email, "--tenant", tenant, "--state", str(self.state))
        return cli("token", "--email", email, "--state", str(self.state)).splitlines()[-1]

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={ACCESS_HEADER: self.token}, timeout=30)

    def mcp(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(
            f"{self.base}/mcp",
            headers={
                "Authorization": f"Bearer {self.api_key}",
                "Accept": "application/json, text/event-stream",
            },
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            },
            timeout=30,
        )
        response.raise_for_status()
        result: dict[str, Any] = response.json()["result"]
        assert not result.get("isError"), result
        return result


def cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(list(argv)) == 0
    return out.getvalue()


def seed(base: str, state: Path) -> Seeded:
    token = cli("token", "--email", "ops@example.com", "--state", str(state)).splitlines()[-1]
    cli("gateway", "tenant", "create", TENANT, "--memory", "--state", str(state))
    issued = cli("gateway", "key", "issue", TENANT, "--scope", "memory", "--state", str(state))
    seeded = Seeded(base, token, issued.strip().splitlines()[-1], state)
    triple = {"subject": SUBJECT, "predicate": "prefers_channel"}
    seeded.mcp(
        "store_memory",
        {"content": OLD_FACT, "metadata": {**triple, "object": "email", "confidence": 0.6}},
    )
    seeded.mcp(
        "store_memory",
        {"content": NEW_FACT, "metadata": {**triple, "object": "phone", "confidence": 0.9}},
    )
    seeded.mcp(
        "store_memory",
        {"content": OTHER_FACT, "metadata": {"subject": "office:berlin", "predicate": "hours"}},
    )
    seeded.mcp("recall_memory", {"query": "how does Ada like to be contacted"})
    with seeded.admin() as admin:
        for text, subject in ((FIRST_RUN, SUBJECT), (SECOND_RUN, None)):
            body: dict[str, Any] = {"input": text}
            if subject:
                body["subject"] = subject
            response = admin.post(f"/v1/agents/{TENANT}/assistant/run", json=body)
            assert response.status_code == 200, response.text
        reconciled = admin.post(f"/admin/tenants/{TENANT}/reconcile")
        assert reconciled.json()["superseded_conflicts"] == 1, reconciled.text
        # The recall's statistics and event are written after its response (waitUntil);
        # the dev server's scheduled route drains that work (a cron with no job runs
        # nothing), so every seeded row exists before a test looks at or erases it.
        drained = admin.get("/cdn-cgi/handler/scheduled", params={"cron": "seed-drain"})
        assert drained.status_code == 200, drained.text
    return seeded
