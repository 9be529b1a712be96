"""Tenant records: which tenants exist and whether they have the memory tools.

The tool-call hot path never reads these (the API key already names the tenant); MCP
`tools/list` and the memory tools read `memory_enabled`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway import kv_layout
from gateway.kv_cache import KVReadCache, read_cached
from http_messages.errors import ApiError


class TenantRecord(BaseModel):
    """The value at `gw:tenant:{tenant}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(pattern=kv_layout.TENANT_RE.pattern)
    display_name: str = Field(default="", max_length=200)
    # ADR-0030: memory tools are granted by the platform when enabled, not declared per tool.
    memory_enabled: bool = False
    created_at: float = 0.0


def _parse(raw: str) -> TenantRecord:
    try:
        return TenantRecord.model_validate_json(raw)
    except ValidationError as exc:
        raise ApiError(
            500,
            "gateway_misconfigured",
            f"the stored tenant record is invalid ({exc.error_count()} problems)",
        ) from None


async def load_tenant(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, tenant: str
) -> TenantRecord | None:
    return await read_cached(kv, cache, clock, kv_layout.tenant_key(tenant), _parse)
