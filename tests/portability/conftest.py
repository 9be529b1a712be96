"""Fixtures for exports, imports and the change feed: the memory API's runtime (two shards,
a clock pinned at the real time) and client, an operator of every tenant, and helpers that
read an export back."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from standardwebhooks import Webhook

from agent_memory.lifecycle.portability import Personal, part_key
from agent_memory.memory import Memory
from local_runtime.runtime import LocalRuntime
from local_runtime.server import serving_in_thread
from tests.memory_api.conftest import Client, client, clock, memory_runtime

__all__ = [
    "Client",
    "Receiver",
    "client",
    "clock",
    "export_lines",
    "exported",
    "memory_runtime",
    "receiver",
]


async def exported(
    runtime: LocalRuntime, tenant: str, personal: Personal = "sealed"
) -> list[dict[str, Any]]:
    """A whole export of `tenant`, run to the end in process, header first."""
    exporter = (await Memory.open(runtime.bindings(), tenant)).exporter()
    job = await exporter.start("ops@example.com", personal)
    job = await exporter.advance(job.job_id, max_seconds=600)
    records: list[dict[str, Any]] = []
    for part in range(job.progress["part"]):
        body = await runtime.cold.get(part_key(tenant, job.job_id, part))
        assert body is not None
        records += [json.loads(line) for line in gzip.decompress(body.data).splitlines()]
    return records


def comparable(records: list[dict[str, Any]]) -> list[str]:
    """Records as another tenant's import must give them back: without the tenant, the header
    and the events of the import and of the exports themselves."""
    out = []
    for record in records:
        op = record.get("payload", {}).get("op")
        if record["record"] == "header" or op in ("imported", "personal_data_opened"):
            continue
        rest = {k: v for k, v in record.items() if k != "tenant_id"}
        out.append(json.dumps(rest, sort_keys=True))
    return sorted(out)


async def export_lines(client: Client, tenant: str, job_id: str) -> list[dict[str, Any]]:
    """Every record of a finished export, its parts concatenated in order (header first)."""
    job = (
        await client.send(
            "GET", f"/admin/tenants/{tenant}/exports/{job_id}", access=client.operator
        )
    ).json()
    assert job["status"] == "complete", job
    records: list[dict[str, Any]] = []
    for part in range(job["progress"]["part"]):
        response = await client.send(
            "GET", f"/admin/tenants/{tenant}/exports/{job_id}/parts/{part}", access=client.operator
        )
        assert response.status == 200, response.body[:300]
        records += [json.loads(line) for line in gzip.decompress(response.body).splitlines()]
    return records


@dataclass
class Receiver:
    """A webhook receiver on loopback: records each request (headers, body) and answers the
    next scripted status (200 once the script is spent)."""

    url: str = ""
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append((headers, body))
        status = self.statuses.pop(0) if self.statuses else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def verified(self, secret: str) -> list[dict[str, Any]]:
        """Every body, each verified by the independent Standard Webhooks implementation."""
        webhook = Webhook(secret)
        return [webhook.verify(body, headers) for headers, body in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await found.app(scope, receive, send)  # a function: uvicorn then speaks ASGI 3

    with serving_in_thread(app, lifespan="off") as base:
        found.url = base + "/hook"
        yield found
