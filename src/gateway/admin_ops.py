"""Operator operations on the gateway's KV state (not on any request path).

Plain async functions over the `KVNamespace` port, for the `agent-memory gateway ...` CLI
against the local runtime. For a deployed Worker the same writes are rendered as
`wrangler kv key put --remote` commands (`wrangler_put_commands`), because the Worker
exposes no admin route: operators write KV directly with their Cloudflare credentials.

Every write op validates its input with the same models the gateway reads with, so a
config that registers cleanly is one the hot path accepts. Failures a person can fix
raise `AdminError` with a message saying what to do.
"""

from __future__ import annotations

import json
import secrets
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway import kv_layout
from gateway.api_keys import ALL_SCOPES, ApiKeyRecord, Scope, hash_api_key
from gateway.credentials import Credential
from gateway.tenants import TenantRecord
from gateway.tool_config import ToolConfig

API_KEY_PREFIX = "amk_"


class AdminError(ValueError):
    """An operator mistake (unknown tenant, invalid config, ...), with what to do about it."""


class KVWrite(BaseModel):
    """One KV put an operation performs (also rendered as a wrangler command)."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: str


class ApiKeyIndexEntry(BaseModel):
    """The value at `gw:keyid:{tenant}:{key_id}`: lets operators find a key's hash by id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_id: str
    tenant: str
    sha256: str = Field(pattern=kv_layout.SHA256_HEX_RE.pattern)
    scopes: tuple[Scope, ...]
    label: str = ""
    status: Literal["active", "revoked"] = "active"
    created_at: float = 0.0
    revoked_at: float | None = None


class IssuedApiKey(BaseModel):
    """A newly issued key. `api_key` is shown once and stored nowhere (only its hash)."""

    model_config = ConfigDict(frozen=True)

    api_key: str = Field(repr=False)
    key_id: str
    tenant: str
    scopes: tuple[Scope, ...]
    label: str


def _dump(model: BaseModel) -> str:
    return model.model_dump_json(exclude_none=True)


def _check_tenant_name(tenant: str) -> None:
    if not kv_layout.TENANT_RE.fullmatch(tenant):
        raise AdminError(
            f"invalid tenant id {tenant!r}: use 1-63 lower-case letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )


async def _apply(kv: KVNamespace, writes: Iterable[KVWrite]) -> None:
    for write in writes:
        await kv.put(write.key, write.value)


async def _require_tenant(kv: KVNamespace, tenant: str) -> TenantRecord:
    _check_tenant_name(tenant)
    raw = await kv.get(kv_layout.tenant_key(tenant))
    if raw is None:
        raise AdminError(f"unknown tenant {tenant!r}; create it first")
    return TenantRecord.model_validate_json(raw)


# --- tenants -------------------------------------------------------------------------------


def plan_create_tenant(
    tenant: str, *, now: float, display_name: str = "", memory_enabled: bool = False
) -> tuple[TenantRecord, list[KVWrite]]:
    _check_tenant_name(tenant)
    record = TenantRecord(
        tenant=tenant, display_name=display_name, memory_enabled=memory_enabled, created_at=now
    )
    return record, [KVWrite(key=kv_layout.tenant_key(tenant), value=_dump(record))]


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
    if await kv.get(kv_layout.tenant_key(tenant)) is not None:
        raise AdminError(f"tenant {tenant!r} already exists")
    await _apply(kv, writes)
    return record


async def get_tenant(kv: KVNamespace, tenant: str) -> TenantRecord | None:
    _check_tenant_name(tenant)
    raw = await kv.get(kv_layout.tenant_key(tenant))
    return None if raw is None else TenantRecord.model_validate_json(raw)


async def set_tenant_memory(kv: KVNamespace, tenant: str, enabled: bool) -> TenantRecord:
    """Turn the memory tools (`recall_memory`, `store_memory`) on or off for a tenant."""
    record = (await _require_tenant(kv, tenant)).model_copy(update={"memory_enabled": enabled})
    await kv.put(kv_layout.tenant_key(tenant), _dump(record))
    return record


async def list_tenants(kv: KVNamespace) -> list[TenantRecord]:
    records: list[TenantRecord] = []
    for key in await _list_keys(kv, "gw:tenant:"):
        raw = await kv.get(key)
        if raw is not None:
            records.append(TenantRecord.model_validate_json(raw))
    return records


async def _list_keys(kv: KVNamespace, prefix: str) -> list[str]:
    keys: list[str] = []
    cursor: str | None = None
    while True:
        page = await kv.list(prefix=prefix, cursor=cursor)
        keys.extend(k.name for k in page.keys)
        if page.list_complete or not page.cursor:
            return keys
        cursor = page.cursor


# --- API keys ------------------------------------------------------------------------------


def generate_api_key() -> str:
    """A new random key: `amk_` + 256 bits, URL-safe. Call only inside a request or CLI run
    (never at import: Workers forbid randomness in global scope)."""
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def _scopes(scopes: Iterable[str]) -> tuple[Scope, ...]:
    chosen = tuple(dict.fromkeys(scopes))
    unknown = [s for s in chosen if s not in ALL_SCOPES]
    if unknown or not chosen:
        raise AdminError(f"scopes must be a non-empty subset of {list(ALL_SCOPES)}; got {unknown}")
    return tuple(s for s in ALL_SCOPES if s in chosen)


def plan_issue_api_key(
    tenant: str,
    *,
    now: float,
    scopes: Iterable[str] = ALL_SCOPES,
    label: str = "",
    api_key: str | None = None,
) -> tuple[IssuedApiKey, list[KVWrite]]:
    """The key and the two KV writes that make it work (record by hash, index by key id)."""
    _check_tenant_name(tenant)
    chosen = _scopes(scopes)
    key = api_key or generate_api_key()
    key_id = "k_" + secrets.token_hex(8)
    digest = hash_api_key(key)
    record = ApiKeyRecord(tenant=tenant, key_id=key_id, scopes=chosen, label=label, created_at=now)
    index = ApiKeyIndexEntry(
        key_id=key_id, tenant=tenant, sha256=digest, scopes=chosen, label=label, created_at=now
    )
    issued = IssuedApiKey(api_key=key, key_id=key_id, tenant=tenant, scopes=chosen, label=label)
    return issued, [
        KVWrite(key=kv_layout.api_key_key(digest), value=_dump(record)),
        KVWrite(key=kv_layout.key_id_key(tenant, key_id), value=_dump(index)),
    ]


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
    """Mark a key revoked (idempotent). Gateways stop accepting it within the cache bound
    (30 s, plus KV propagation on Cloudflare)."""
    _check_tenant_name(tenant)
    raw_index = await kv.get(kv_layout.key_id_key(tenant, key_id))
    if raw_index is None:
        raise AdminError(f"tenant {tenant!r} has no API key {key_id!r}")
    index = ApiKeyIndexEntry.model_validate_json(raw_index)
    now = clock.now()
    if index.status == "revoked":
        return index
    record_key = kv_layout.api_key_key(index.sha256)
    raw_record = await kv.get(record_key)
    if raw_record is not None:
        record = ApiKeyRecord.model_validate_json(raw_record).model_copy(
            update={"status": "revoked", "revoked_at": now}
        )
        # The record first: once it says revoked, the key stops working.
        await kv.put(record_key, _dump(record))
    revoked = index.model_copy(update={"status": "revoked", "revoked_at": now})
    await kv.put(kv_layout.key_id_key(tenant, key_id), _dump(revoked))
    return revoked


async def list_api_keys(kv: KVNamespace, tenant: str) -> list[ApiKeyIndexEntry]:
    _check_tenant_name(tenant)
    entries: list[ApiKeyIndexEntry] = []
    for key in await _list_keys(kv, kv_layout.key_id_prefix(tenant)):
        raw = await kv.get(key)
        if raw is not None:
            entries.append(ApiKeyIndexEntry.model_validate_json(raw))
    return entries


# --- credentials ---------------------------------------------------------------------------


def plan_set_credential(tenant: str, provider: str, secret: str, *, now: float) -> list[KVWrite]:
    _check_tenant_name(tenant)
    if not kv_layout.PROVIDER_RE.fullmatch(provider):
        raise AdminError(
            f"invalid provider {provider!r}: use lower-case letters, digits, '.', '-' or '_'"
        )
    try:
        credential = Credential(secret=secret, updated_at=now)
    except ValidationError as exc:
        raise AdminError(f"invalid secret: {exc.errors()[0]['msg']}") from None
    return [KVWrite(key=kv_layout.credential_key(tenant, provider), value=_dump(credential))]


async def set_credential(
    kv: KVNamespace, clock: Clock, tenant: str, provider: str, secret: str
) -> None:
    """Store (or rotate) the tenant's secret for `provider`. The secret is never echoed."""
    await _require_tenant(kv, tenant)
    await _apply(kv, plan_set_credential(tenant, provider, secret, now=clock.now()))


async def delete_credential(kv: KVNamespace, tenant: str, provider: str) -> bool:
    """Remove a credential; returns whether one existed."""
    _check_tenant_name(tenant)
    key = kv_layout.credential_key(tenant, provider)
    existed = await kv.get(key) is not None
    await kv.delete(key)
    return existed


# --- tool configs --------------------------------------------------------------------------


def validate_tool_config(config: Mapping[str, Any] | ToolConfig) -> ToolConfig:
    """Parse and check a tool config, or raise `AdminError` listing every problem."""
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
    return [KVWrite(key=kv_layout.tool_key(tenant, tool.name), value=_dump(tool))]


async def register_tool(
    kv: KVNamespace, tenant: str, config: Mapping[str, Any] | ToolConfig
) -> ToolConfig:
    """Register (or replace) a tool for a tenant after validating it in full, including its
    input schema against the supported JSON-schema subset."""
    await _require_tenant(kv, tenant)
    tool = validate_tool_config(config)
    await _apply(kv, plan_register_tool(tenant, tool))
    return tool


async def remove_tool(kv: KVNamespace, tenant: str, name: str) -> bool:
    _check_tenant_name(tenant)
    key = kv_layout.tool_key(tenant, name)
    existed = await kv.get(key) is not None
    await kv.delete(key)
    return existed


async def list_tools(kv: KVNamespace, tenant: str) -> list[ToolConfig]:
    _check_tenant_name(tenant)
    tools: list[ToolConfig] = []
    for key in await _list_keys(kv, kv_layout.tool_prefix(tenant)):
        raw = await kv.get(key)
        if raw is not None:
            tools.append(ToolConfig.model_validate_json(raw))
    return tools


# --- deployed Workers ----------------------------------------------------------------------


def wrangler_put_commands(writes: Iterable[KVWrite], *, binding: str = "KV") -> list[str]:
    """Shell commands that perform `writes` on the deployed namespace.

    Wrangler v4 defaults `kv` commands to local storage, hence `--remote`
    (cloudflare/workers-sdk#7392). Values are shell-quoted; for a credential prefer
    writing the value to a file and passing `--path` (see docs/gateway.md) so the secret
    stays out of shell history.
    """
    return [
        f"npx wrangler kv key put --binding={shlex.quote(binding)} --remote "
        f"{shlex.quote(write.key)} {shlex.quote(write.value)}"
        for write in writes
    ]


def describe_tool(config: ToolConfig) -> dict[str, Any]:
    """A config as JSON-ready data for listings (no secrets live in configs)."""
    data: dict[str, Any] = json.loads(_dump(config))
    return data
