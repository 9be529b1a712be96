"""Exports, imports and the change feed at the edge (Access gated; docs/portability.md): the
routes, the `FEED` queue's consumer (`consume`, called by the Worker's `queue` handler and the
local runtime) and the webhook endpoints' secrets, sealed at rest with the credentials' sealer
and posted to through the outbound guard. The CLI calls the same functions.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.directory import control_db
from agent_memory.governance.feed import (
    TEST_TYPE,
    FeedConsumer,
    FeedEndpoints,
    OpenSecret,
    Post,
    change,
)
from agent_memory.ids import is_ulid, new_ulid
from agent_memory.lifecycle.erase import validate_subject
from agent_memory.lifecycle.portability import (
    ImportFormat,
    ImportReport,
    Personal,
    PortabilityJob,
    encode,
)
from agent_memory.memory import Memory
from bindings.environment import Bindings
from bindings.ports.queue import QueueMessage
from bindings.ports.sql import Row
from gateway.credentials import SealedSecret, credential_sealer
from gateway.outbound import OutboundPolicy
from http_messages import ApiError, Headers, HttpResponse
from worker.app import Call, StrictModel, parse_model
from worker.lifecycle_jobs import EXPORT_STEP_SECONDS

SECRET_PREFIX = "whsec_"


# -- exports and imports --------------------------------------------------------------------


class ExportBody(StrictModel):
    personal: Personal = "sealed"


class ExportList(BaseModel):
    exports: list[PortabilityJob]


class SubjectExportQuery(StrictModel):
    personal: Personal = "sealed"


class ImportQuery(StrictModel):
    format: ImportFormat = "agent-memory"
    dry_run: bool = False


async def start_export(call: Call[ExportBody, None]) -> PortabilityJob:
    """Start an export; its parts are written after the response, then by the minute cron."""
    exporter = (await Memory.open(call.bindings, call.params["tenant"])).exporter()
    job = await exporter.start(call.operator.principal, call.body.personal)
    call.bindings.background.wait_until(
        exporter.advance(job.job_id, max_seconds=EXPORT_STEP_SECONDS)
    )
    return job


async def list_exports(call: Call[None, None]) -> ExportList:
    exporter = (await Memory.open(call.bindings, call.params["tenant"])).exporter()
    return ExportList(exports=await exporter.jobs.listed())


async def get_export(call: Call[None, None]) -> PortabilityJob:
    exporter = (await Memory.open(call.bindings, call.params["tenant"])).exporter()
    job = await exporter.jobs.get(call.params["job_id"])
    if job is None or job.kind != "export":
        raise ApiError(404, "export_not_found", "no such export of this tenant")
    return job


async def export_part(call: Call[None, None]) -> HttpResponse:
    """One part (gzip JSON Lines; part 0 is the header): concatenated in order, the export."""
    part = call.params["part"]
    if not part.isdigit() or len(part) > 5:
        raise ApiError(404, "part_not_found", "parts are numbered 0 to 99999")
    exporter = (await Memory.open(call.bindings, call.params["tenant"])).exporter()
    data = await exporter.part(call.params["job_id"], int(part))
    return HttpResponse(200, data, Headers({"content-type": "application/gzip"}))


async def export_subject(call: Call[None, None]) -> HttpResponse:
    """Everything about one subject (the erase's counterpart), as JSON Lines; `?personal=opened`
    opens its sealed personal fields (an event)."""
    query = parse_model(call.request.query, SubjectExportQuery)
    try:
        subject = validate_subject(call.params["subject"])
    except ValueError as exc:
        raise ApiError(422, "invalid_path", str(exc)) from None
    memory = await Memory.open(call.bindings, call.params["tenant"])
    found = await memory.exporter().subject(
        memory.eraser(), subject, by=call.operator.principal, personal=query.personal
    )
    return HttpResponse(200, encode(found), Headers({"content-type": "application/x-ndjson"}))


async def import_records(call: Call[None, ImportQuery]) -> ImportReport:
    """Import the body (JSON Lines of the format named); `dry_run` reports and writes nothing."""
    lines = call.request.body.splitlines()
    importer = (await Memory.open(call.bindings, call.params["tenant"])).importer()
    return await importer.run(
        lambda: lines,
        call.query.format,
        dry_run=call.query.dry_run,
        by=call.operator.principal,
    )


# -- the change feed ------------------------------------------------------------------------


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


def _sealer(bindings: Bindings) -> Any:
    sealer = credential_sealer(bindings.cipher, bindings.settings.pii_keks)
    if sealer is None:
        raise ApiError(
            503, "credential_key_unavailable", "webhook secrets are sealed: set MEMORY_PII_KEKS"
        )
    return sealer


def _aad(tenant: str, endpoint_id: str) -> str:
    return f"feed-endpoint:{tenant}:{endpoint_id}"


async def _new_secret(bindings: Bindings, tenant: str, endpoint_id: str) -> tuple[str, str]:
    """A new endpoint secret and its sealed form."""
    secret = SECRET_PREFIX + base64.b64encode(os.urandom(32)).decode("ascii")
    sealed = await _sealer(bindings).seal(_aad(tenant, endpoint_id), secret)
    return secret, sealed.model_dump_json()


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


def _endpoints(call: Call[Any, Any]) -> FeedEndpoints:
    return FeedEndpoints(control_db(call.bindings), call.params["tenant"])


async def _endpoint(call: Call[Any, Any]) -> Row:
    endpoint_id = call.params["endpoint_id"]
    found = await _endpoints(call).get(endpoint_id) if is_ulid(endpoint_id) else None
    if found is None:
        raise ApiError(404, "endpoint_not_found", "no such webhook endpoint of this tenant")
    return found


async def list_webhooks(call: Call[None, None]) -> WebhooksView:
    store = _endpoints(call)
    return WebhooksView(
        endpoints=[EndpointView.model_validate(e) for e in await store.listed()],
        deliveries=[DeliveryView.model_validate(d) for d in await store.deliveries(50)],
    )


async def add_webhook(call: Call[EndpointBody, None]) -> EndpointSaved:
    """Register an endpoint (its host must pass the outbound guard now as at each delivery)."""
    tenant, bindings = call.params["tenant"], call.bindings
    await OutboundPolicy.from_settings(bindings.settings).check(
        call.body.url, bindings.resolve_host
    )
    now = bindings.clock.now()
    endpoint_id = new_ulid(now)
    secret, sealed = await _new_secret(bindings, tenant, endpoint_id)
    row = await _endpoints(call).add(
        endpoint_id, call.body.url, sealed, call.body.description, int(now * 1000)
    )
    return EndpointSaved(endpoint=EndpointView.model_validate(row), secret=secret)


async def change_webhook(call: Call[EndpointChange, None]) -> EndpointSaved:
    """Pause or resume an endpoint, or rotate its secret (the new one is shown once)."""
    endpoint, body = await _endpoint(call), call.body
    changes: dict[str, str] = {} if body.status is None else {"status": body.status}
    secret = None
    if body.rotate_secret:
        tenant, endpoint_id = call.params["tenant"], str(endpoint["endpoint_id"])
        secret, changes["secret"] = await _new_secret(call.bindings, tenant, endpoint_id)
    now_ms = int(call.bindings.clock.now() * 1000)
    row = await _endpoints(call).update(str(endpoint["endpoint_id"]), now_ms, **changes)
    return EndpointSaved(endpoint=EndpointView.model_validate(row), secret=secret)


async def test_webhook(call: Call[None, None]) -> TestDelivery:
    """Deliver a signed `memory.test` change now and say how the endpoint answered."""
    endpoint = await _endpoint(call)
    message = change(TEST_TYPE, call.bindings.clock.now(), {"endpoint_id": endpoint["endpoint_id"]})
    code, error = await consumer(call.bindings).attempt(endpoint, message)
    delivered = code is not None and 200 <= code < 300
    return TestDelivery(delivered=delivered, http_status=code, error=error)
