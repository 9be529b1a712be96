"""Operators' operations on the gateway's KV state (the `agent-memory gateway` CLI). Each write
has a `plan_*` form that `wrangler_put_commands` renders for a deployed namespace. An
operator's mistake is an `AdminError` saying what to do.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway.credentials import (
    ALL_SCOPES,
    PROVIDER_RE,
    TENANT_RE,
    ApiKeyRecord,
    CredentialSealer,
    Scope,
    TenantRecord,
    api_key_key,
    credential_key,
    hash_token,
    key_id_key,
    list_keys,
    tenant_key,
    tool_key,
)
from gateway.tool_config import Credential, ToolConfig

API_KEY_PREFIX = "amk_"

M = TypeVar("M", bound=BaseModel)


class AdminError(ValueError):
    """An operator mistake (unknown tenant, invalid config, ...), with what to do about it."""


class KVWrite(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    value: str


class ApiKeyIndexEntry(ApiKeyRecord):
    """The value at `gw:keyid:{tenant}:{key_id}`: a key's record and hash."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class IssuedApiKey(BaseModel):
    """A newly issued key; `api_key` is shown once and stored nowhere."""

    model_config = ConfigDict(frozen=True)

    api_key: str = Field(repr=False)
    key_id: str
    tenant: str
    scopes: tuple[Scope, ...]
    label: str


def _write(key: str, record: BaseModel) -> KVWrite:
    return KVWrite(key=key, value=record.model_dump_json(exclude_none=True))


def _check_tenant_name(tenant: str) -> None:
    if not TENANT_RE.fullmatch(tenant):
        raise AdminError(
            f"invalid tenant id {tenant!r}: use 1-63 lower-case letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )


async def _apply(kv: KVNamespace, writes: Iterable[KVWrite]) -> None:
    for write in writes:
        await kv.put(write.key, write.value)


async def _require_tenant(kv: KVNamespace, tenant: str) -> TenantRecord:
    _check_tenant_name(tenant)
    raw = await kv.get(tenant_key(tenant))
    if raw is None:
        raise AdminError(f"unknown tenant {tenant!r}; create it first")
    return TenantRecord.model_validate_json(raw)


async def _read_all(kv: KVNamespace, prefix: str, model: type[M]) -> list[M]:
    raws = [await kv.get(key) for key in await list_keys(kv, prefix)]
    return [model.model_validate_json(raw) for raw in raws if raw is not None]


async def _delete(kv: KVNamespace, key: str) -> bool:
    existed = await kv.get(key) is not None
    await kv.delete(key)
    return existed


def plan_create_tenant(
    tenant: str, *, now: float, display_name: str = "", memory_enabled: bool = False
) -> tuple[TenantRecord, list[KVWrite]]:
    _check_tenant_name(tenant)
    record = TenantRecord(
        tenant=tenant, display_name=display_name, memory_enabled=memory_enabled, created_at=now
    )
    return record, [_write(tenant_key(tenant), record)]


async def create_tenant(
    kv: KVNamespace,
    clock: Clock,
    tenant: str,
    *,
    display_name: str = "",
    memory_enabled: bool = False,
) -> TenantRecord:
    """Create a tenant; an existing tenant is an error (use `set_tenant_memory` to change it)."""
    record, writes = plan_create_tenant(
        tenant, now=clock.now(), display_name=display_name, memory_enabled=memory_enabled
    )
    if await kv.get(tenant_key(tenant)) is not None:
        raise AdminError(f"tenant {tenant!r} already exists")
    await _apply(kv, writes)
    return record


async def set_tenant_memory(kv: KVNamespace, tenant: str, enabled: bool) -> TenantRecord:
    """Turn the memory tools (`recall_memory`, `store_memory`) on or off for a tenant."""
    record = (await _require_tenant(kv, tenant)).model_copy(update={"memory_enabled": enabled})
    await _apply(kv, [_write(tenant_key(tenant), record)])
    return record


async def list_tenants(kv: KVNamespace) -> list[TenantRecord]:
    return await _read_all(kv, tenant_key(""), TenantRecord)


def plan_issue_api_key(
    tenant: str, *, now: float, scopes: Iterable[str] = ALL_SCOPES, label: str = ""
) -> tuple[IssuedApiKey, list[KVWrite]]:
    """A new key (`amk_` + 256 random bits) and its two writes: record by hash, index by id."""
    _check_tenant_name(tenant)
    chosen = tuple(dict.fromkeys(scopes))
    unknown = [s for s in chosen if s not in ALL_SCOPES]
    if unknown or not chosen:
        raise AdminError(f"scopes must be a non-empty subset of {list(ALL_SCOPES)}; got {unknown}")
    granted = tuple(s for s in ALL_SCOPES if s in chosen)
    key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = "k_" + secrets.token_hex(8)
    digest = hash_token(key)
    record = ApiKeyRecord(tenant=tenant, key_id=key_id, scopes=granted, label=label, created_at=now)
    index = ApiKeyIndexEntry(**record.model_dump(), sha256=digest)
    issued = IssuedApiKey(api_key=key, key_id=key_id, tenant=tenant, scopes=granted, label=label)
    return issued, [_write(api_key_key(digest), record), _write(key_id_key(tenant, key_id), index)]


async def issue_api_key(
    kv: KVNamespace,
    clock: Clock,
    tenant: str,
    *,
    scopes: Iterable[str] = ALL_SCOPES,
    label: str = "",
) -> IssuedApiKey:
    """Mint a key for an existing tenant. Show `api_key` to the operator once; it is not kept."""
    await _require_tenant(kv, tenant)
    issued, writes = plan_issue_api_key(tenant, now=clock.now(), scopes=scopes, label=label)
    await _apply(kv, writes)
    return issued


async def revoke_api_key(
    kv: KVNamespace, clock: Clock, tenant: str, key_id: str
) -> ApiKeyIndexEntry:
    """Mark a key revoked (idempotent); gateways stop accepting it within the cache TTL."""
    _check_tenant_name(tenant)
    raw_index = await kv.get(key_id_key(tenant, key_id))
    if raw_index is None:
        raise AdminError(f"tenant {tenant!r} has no API key {key_id!r}")
    index = ApiKeyIndexEntry.model_validate_json(raw_index)
    if index.status == "revoked":
        return index
    revoked = {"status": "revoked", "revoked_at": clock.now()}
    writes = []
    if raw_record := await kv.get(api_key_key(index.sha256)):
        # The record first: once it says revoked, the key stops working.
        record = ApiKeyRecord.model_validate_json(raw_record).model_copy(update=revoked)
        writes.append(_write(api_key_key(index.sha256), record))
    index = index.model_copy(update=revoked)
    await _apply(kv, [*writes, _write(key_id_key(tenant, key_id), index)])
    return index


async def list_api_keys(kv: KVNamespace, tenant: str) -> list[ApiKeyIndexEntry]:
    _check_tenant_name(tenant)
    return await _read_all(kv, key_id_key(tenant, ""), ApiKeyIndexEntry)


def plan_set_credential(tenant: str, provider: str, secret: str, *, now: float) -> list[KVWrite]:
    _check_tenant_name(tenant)
    if not PROVIDER_RE.fullmatch(provider):
        raise AdminError(
            f"invalid provider {provider!r}: use lower-case letters, digits, '.', '-' or '_'"
        )
    try:
        credential = Credential(secret=secret, updated_at=now)
    except ValidationError as exc:
        raise AdminError(f"invalid secret: {exc.errors()[0]['msg']}") from None
    return [_write(credential_key(tenant, provider), credential)]


async def set_credential(
    kv: KVNamespace,
    clock: Clock,
    tenant: str,
    provider: str,
    secret: str,
    sealer: CredentialSealer | None = None,
) -> None:
    """Store (or rotate) the tenant's secret for `provider`, sealed when a `sealer` is given
    (else the Worker seals it on first use)."""
    await _require_tenant(kv, tenant)
    plan = plan_set_credential(tenant, provider, secret, now=clock.now())
    if sealer is not None:
        key = credential_key(tenant, provider)
        sealed = Credential(sealed=await sealer.seal(key, secret), updated_at=clock.now())
        plan = [_write(key, sealed)]
    await _apply(kv, plan)


async def delete_credential(kv: KVNamespace, tenant: str, provider: str) -> bool:
    """Remove a credential; returns whether one existed."""
    _check_tenant_name(tenant)
    return await _delete(kv, credential_key(tenant, provider))


def validate_tool_config(config: Mapping[str, Any] | ToolConfig) -> ToolConfig:
    """The parsed, fully checked config, or an `AdminError` listing every problem."""
    if isinstance(config, ToolConfig):
        return config
    try:
        return ToolConfig.model_validate(dict(config))
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise AdminError("invalid tool config:\n  " + "\n  ".join(problems)) from None


def plan_register_tool(tenant: str, config: Mapping[str, Any] | ToolConfig) -> list[KVWrite]:
    _check_tenant_name(tenant)
    tool = validate_tool_config(config)
    return [_write(tool_key(tenant, tool.name), tool)]


async def register_tool(
    kv: KVNamespace, tenant: str, config: Mapping[str, Any] | ToolConfig
) -> ToolConfig:
    """Register (or replace) a tool for a tenant after validating it in full."""
    await _require_tenant(kv, tenant)
    tool = validate_tool_config(config)
    await _apply(kv, plan_register_tool(tenant, tool))
    return tool


async def remove_tool(kv: KVNamespace, tenant: str, name: str) -> bool:
    _check_tenant_name(tenant)
    return await _delete(kv, tool_key(tenant, name))


async def list_tools(kv: KVNamespace, tenant: str) -> list[ToolConfig]:
    _check_tenant_name(tenant)
    return await _read_all(kv, tool_key(tenant, ""), ToolConfig)


def wrangler_put_commands(writes: Iterable[KVWrite], *, binding: str = "KV") -> list[str]:
    """Shell commands performing `writes` on the deployed namespace (`--remote`: wrangler v4
    defaults to local storage, workers-sdk#7392)."""
    return [
        f"npx wrangler kv key put --binding={shlex.quote(binding)} --remote "
        f"{shlex.quote(write.key)} {shlex.quote(write.value)}"
        for write in writes
    ]
