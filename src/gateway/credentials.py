"""Tenant credentials for upstream providers: step 2 of the hot path.

`gw:cred:{tenant}:{provider}` holds `{"secret": "...", "updated_at": <epoch s>}`. The
secret is sent upstream as the tool config says (header or query parameter) and never
appears in any gateway response or log line.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bindings.ports.clock import Clock
from bindings.ports.kv import KVNamespace
from gateway import kv_layout
from gateway.kv_cache import KVReadCache, read_cached
from http_messages.errors import ApiError


class Credential(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    secret: str = Field(min_length=1, max_length=8192, repr=False)
    updated_at: float = 0.0

    @field_validator("secret")
    @classmethod
    def _no_control_characters(cls, value: str) -> str:
        # The secret goes into a header or URL: CR/LF would allow header injection.
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError("the secret must not contain control characters (CR, LF, ...)")
        return value


def _parse(raw: str) -> Credential:
    try:
        return Credential.model_validate_json(raw)
    except ValidationError as exc:
        raise ApiError(
            500,
            "gateway_misconfigured",
            f"the stored credential is invalid ({exc.error_count()} problems); set it again",
        ) from None


async def load_credential(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, tenant: str, provider: str
) -> Credential | None:
    return await read_cached(kv, cache, clock, kv_layout.credential_key(tenant, provider), _parse)
