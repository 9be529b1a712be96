"""The memory lifecycle's admin routes (Cloudflare Access gated; docs/lifecycle.md).

    GET    /admin/tenants/{tenant}/lifecycle            settings + today's brief numbers
    PUT    /admin/tenants/{tenant}/lifecycle            override retention / episode limit
    POST   /admin/tenants/{tenant}/prune                prune the tenant now ({"dry_run"})
    POST   /admin/tenants/{tenant}/reconcile            run the reconciler for the tenant
    DELETE /admin/tenants/{tenant}/subjects/{subject}   erase a subject from every tier
    POST   /admin/tenants/{tenant}/namespace-backfill   copy legacy hot keys to canonical keys

The router checks the path parameters first (422 `invalid_path`; `{subject}` is
percent-decoded once there, so a subject with `/` or spaces is sent encoded and a `%` as
`%25`), then every route checks the Access token (401/403), then the body (422
`validation_error`). 503 when a binding the route needs is missing.
"""

from __future__ import annotations

from dataclasses import asdict

from pydantic import BaseModel, ConfigDict

from agent_memory.ids import new_ulid
from agent_memory.lifecycle.brief import build_brief
from agent_memory.lifecycle.erase import validate_subject
from agent_memory.lifecycle.retention import LifecycleUpdate, get_lifecycle, set_lifecycle
from agent_memory.tiered.backfill import backfill_namespace
from agent_memory.tiered.deployment import namespace_flags
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from bindings.ports.errors import BindingLimitError
from http_messages import HttpRequest, HttpResponse, json_response
from worker.access import AccessIdentity, access_gated
from worker.api_models import BackfillBody, BackfillView
from worker.body import parse_body, parse_model, read_json
from worker.errors import ApiError
from worker.lifecycle_jobs import make_eraser, make_pruner, make_reconciler
from worker.path_params import tenant_param


class PruneBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False


class EmptyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _db(bindings: Bindings) -> D1Database:
    if bindings.db is None:
        raise ApiError(503, "lifecycle_unavailable", "the D1 binding is missing")
    return bindings.db


def _now_ms(bindings: Bindings) -> int:
    return int(bindings.clock.now() * 1000)


@access_gated
async def get_tenant_lifecycle(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    db = _db(bindings)
    days = bindings.settings.episode_retention_days
    settings = await get_lifecycle(db, tenant, days)
    brief = await build_brief(
        db, now_ms=_now_ms(bindings), default_retention_days=days, tenants=[tenant]
    )
    return json_response(
        {"settings": settings.model_dump(), "brief": brief.tenants[0].model_dump()}
    )


@access_gated
async def put_tenant_lifecycle(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    update = parse_body(request, LifecycleUpdate)
    settings = await set_lifecycle(
        _db(bindings),
        tenant,
        update,
        default_days=bindings.settings.episode_retention_days,
        now_ms=_now_ms(bindings),
        updated_by=identity.principal,
    )
    return json_response({"settings": settings.model_dump()})


@access_gated
async def prune_tenant(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    body = parse_body(request, PruneBody) if request.body else PruneBody()
    pruner = make_pruner(bindings)
    if pruner is None:
        raise ApiError(503, "lifecycle_unavailable", "the prune needs the DB and COLD bindings")
    now_ms = _now_ms(bindings)
    if body.dry_run:
        report = await pruner.dry_run(now_ms, tenants=[tenant])
    else:
        job = f"manual-{new_ulid(now_ms / 1000)}"
        report = await pruner.run(job, now_ms, tenants=[tenant])
    return json_response(
        {"prune": report.summary(), "tenants": [t.model_dump() for t in report.tenants]}
    )


@access_gated
async def reconcile_tenant(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    if request.body:
        parse_model(read_json(request), EmptyBody)
    reconciler = make_reconciler(bindings, tenant)
    if reconciler is None:
        raise ApiError(
            503,
            "lifecycle_unavailable",
            "the reconciler needs the DB and VECTORIZE bindings and an embedder",
        )
    report = await reconciler.run()
    return json_response(report.model_dump())


@access_gated
async def erase_subject(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    try:
        subject = validate_subject(params["subject"])
    except ValueError as exc:
        raise ApiError(422, "invalid_path", str(exc)) from None
    eraser = make_eraser(bindings, tenant)
    if eraser is None:
        raise ApiError(503, "lifecycle_unavailable", "the D1 binding is missing")
    report = await eraser.erase(subject)
    if not report.complete:
        # Some tier failed; what was removed is in the details. Repeating the DELETE
        # finishes the job (every step is idempotent).
        raise ApiError(
            502,
            "erase_incomplete",
            "the erase did not finish in every tier; repeat the request",
            report.model_dump(),
        )
    return json_response({**report.model_dump(), "erased_by": identity.principal})


@access_gated
async def backfill_tenant_namespace(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    """One bounded step of the namespace backfill (`agent_memory.tiered.backfill`); repeat
    with `next_cursor` until it is null. Never deletes a key."""
    tenant = tenant_param(params)
    body = parse_body(request, BackfillBody) if request.body else BackfillBody()
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "the KV binding is missing")
    try:
        report = await backfill_namespace(
            bindings.kv,
            bindings.clock,
            tenant=tenant,
            dry_run=body.dry_run,
            cursor=body.cursor,
            max_keys=body.max_keys,
        )
    except BindingLimitError:
        raise ApiError(422, "invalid_cursor", "cursor is not one this route returned") from None
    view = BackfillView(tenant=tenant, phase=namespace_flags(bindings).phase, **asdict(report))
    return json_response(view.model_dump())
