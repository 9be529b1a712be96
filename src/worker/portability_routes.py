"""Exports, imports and the change feed at the edge (Access gated; docs/portability.md): the
routes, the `FEED` queue's consumer (`consume`, called by the Worker's `queue` handler and the
local runtime) and the webhook endpoints' secrets, sealed at rest with the credentials' sealer
and posted to through the outbound guard. The CLI calls the same functions.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.directory import control_db
from agent_memory.governance.feed import (
    SECRET_PREFIX,
    FeedConsumer,
    FeedEndpoints,
    OpenSecret,
    Post,
    Webhooks,
)
from agent_memory.lifecycle.portability import (
    Exporter,
    ImportFormat,
    ImportReport,
    Personal,
    PortabilityJob,
)
from agent_memory.lifecycle.prune import json_lines
from agent_memory.memory import Memory
from bindings.environment import Bindings
from bindings.ports.queue import QueueMessage
from bindings.ports.sql import Row
from gateway.credentials import CredentialSealer, SealedSecret, credential_sealer
from gateway.outbound import OutboundPolicy
from http_messages import ApiError, Headers, HttpResponse
from worker.routing import Call, StrictModel, parse_model


class ExportBody(StrictModel):
    personal: Personal = "sealed"


class ExportList(BaseModel):
    exports: list[PortabilityJob]


class SubjectExportQuery(StrictModel):
    personal: Personal = "sealed"


class ImportQuery(StrictModel):
    format: ImportFormat = "agent-memory"
    dry_run: bool = False


async def _memory(call: Call[Any, Any]) -> Memory:
    return await Memory.open(call.bindings, call.params["tenant"])


async def _exporter(call: Call[Any, Any]) -> Exporter:
    return (await _memory(call)).exporter()


async def start_export(call: Call[ExportBody, None]) -> PortabilityJob:
    return await (await _memory(call)).export(call.auth.principal, call.body.personal)


async def list_exports(call: Call[None, None]) -> ExportList:
    return ExportList(exports=await (await _exporter(call)).jobs.listed())


async def get_export(call: Call[None, None]) -> PortabilityJob:
    return await (await _exporter(call)).job(call.params["job_id"])


async def export_part(call: Call[None, None]) -> HttpResponse:
    """One part (gzip JSON Lines; part 0 is the header): concatenated in order, the export."""
    part = call.params["part"]
    if not part.isdigit() or len(part) > 5:
        raise ApiError(404, "part_not_found", "parts are numbered 0 to 99999")
    data = await (await _exporter(call)).part(call.params["job_id"], int(part))
    return HttpResponse(200, data, Headers({"content-type": "application/gzip"}))


async def export_subject(call: Call[None, None]) -> HttpResponse:
    """Everything about one subject (the erase's counterpart), as JSON Lines; `?personal=opened`
    opens its sealed personal fields (an event)."""
    query = parse_model(call.request.query, SubjectExportQuery)
    found = await (await _exporter(call)).subject(
        call.params["subject"], by=call.auth.principal, personal=query.personal
    )
    return HttpResponse(200, json_lines(found), Headers({"content-type": "application/x-ndjson"}))


async def import_records(call: Call[None, ImportQuery]) -> ImportReport:
    """Import the body (JSON Lines of the format named); `dry_run` reports and writes nothing."""
    lines = call.request.body.splitlines()
    return (
        await (await _memory(call))
        .importer()
        .run(lambda: lines, call.query.format, dry_run=call.query.dry_run, by=call.auth.principal)
    )


class EndpointView(BaseModel):
    endpoint_id: str
    url: str
    status: Literal["active", "paused"]
    description: str
    created_at: int
    updated_at: int


class DeliveryView(BaseModel):
    endpoint_id: str
    message_id: str
    type: str
    status: str
    attempts: int
    http_status: int | None
    error: str | None
    updated_at: int


class WebhooksView(BaseModel):
    endpoints: list[EndpointView]
    deliveries: list[DeliveryView]


class EndpointBody(StrictModel):
    url: str = Field(min_length=8, max_length=2048, pattern=r"^https?://")
    description: str = Field(default="", max_length=200)


class EndpointChange(StrictModel):
    status: Literal["active", "paused"] | None = None
    rotate_secret: bool = False


class EndpointSaved(BaseModel):
    """An endpoint; `secret` (Standard Webhooks' `whsec_…`) only when it was just made."""

    endpoint: EndpointView
    secret: str | None = None


class TestDelivery(BaseModel):
    delivered: bool
    http_status: int | None
    error: str


def _sealer(bindings: Bindings) -> CredentialSealer:
    sealer = credential_sealer(bindings.cipher, bindings.settings.pii_keks)
    if sealer is None:
        raise ApiError(
            503, "credential_key_unavailable", "webhook secrets are sealed: set MEMORY_PII_KEKS"
        )
    return sealer


def _aad(tenant: str, endpoint_id: str) -> str:
    return f"feed-endpoint:{tenant}:{endpoint_id}"


def secret_opener(bindings: Bindings) -> OpenSecret:
    async def open_secret(endpoint: Row) -> bytes:
        aad = _aad(str(endpoint["tenant_id"]), str(endpoint["endpoint_id"]))
        sealed = SealedSecret.model_validate_json(str(endpoint["secret"]))
        secret = await _sealer(bindings).open(aad, sealed)
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX))

    return open_secret


def poster(bindings: Bindings) -> Post:
    """POST through the outbound guard (the gateway's: no private or metadata hosts)."""
    policy = OutboundPolicy.from_settings(bindings.settings)

    async def post(url: str, headers: dict[str, str], body: bytes) -> int:
        await policy.check(url, bindings.resolve_host)
        async with bindings.http_client(timeout=10.0) as client:
            return (await client.post(url, headers=headers, content=body)).status_code

    return post


def consumer(bindings: Bindings) -> FeedConsumer:
    if bindings.signatures is None:
        raise ApiError(503, "feed_unavailable", "the change feed needs the signatures port")
    return FeedConsumer(
        control_db(bindings),
        bindings.feed,
        bindings.signatures,
        bindings.clock,
        poster(bindings),
        secret_opener(bindings),
    )


async def consume(
    queue: str, messages: Sequence[QueueMessage], bindings: Bindings
) -> dict[str, int | None]:
    """The `FEED` queue's (and its dead-letter queue's) consumer: a verdict per message."""
    return await consumer(bindings).consume(queue, messages)


def _webhooks(call: Call[Any, Any]) -> Webhooks:
    """The tenant's endpoints: secrets sealed with the credentials' sealer, URLs checked by the
    outbound guard."""
    tenant, bindings = call.params["tenant"], call.bindings

    async def seal(endpoint_id: str, secret: str) -> str:
        sealed = await _sealer(bindings).seal(_aad(tenant, endpoint_id), secret)
        return sealed.model_dump_json()

    async def check_url(url: str) -> None:
        await OutboundPolicy.from_settings(bindings.settings).check(url, bindings.resolve_host)

    store = FeedEndpoints(control_db(bindings), tenant)
    return Webhooks(store, consumer(bindings), seal, check_url)


def _saved(row: Row | None, secret: str | None) -> EndpointSaved:
    return EndpointSaved(endpoint=EndpointView.model_validate(row), secret=secret)


async def list_webhooks(call: Call[None, None]) -> WebhooksView:
    store = _webhooks(call).store
    return WebhooksView(
        endpoints=[EndpointView.model_validate(e) for e in await store.listed()],
        deliveries=[DeliveryView.model_validate(d) for d in await store.deliveries(50)],
    )


async def add_webhook(call: Call[EndpointBody, None]) -> EndpointSaved:
    return _saved(*await _webhooks(call).add(call.body.url, call.body.description))


async def change_webhook(call: Call[EndpointChange, None]) -> EndpointSaved:
    body = call.body
    return _saved(
        *await _webhooks(call).change(call.params["endpoint_id"], body.status, body.rotate_secret)
    )


async def test_webhook(call: Call[None, None]) -> TestDelivery:
    code, error = await _webhooks(call).test(call.params["endpoint_id"])
    delivered = code is not None and 200 <= code < 300
    return TestDelivery(delivered=delivered, http_status=code, error=error)
