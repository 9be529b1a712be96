"""Tool configs (docs/gateway.md "Tool config") and tenant credentials (sent as `auth` says,
never in a response or log), validated when registered and again when read. Url
`{placeholders}` take the arguments of that name; the rest go to the query (`input_as`, default
for GET and DELETE) or a JSON body.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bindings.ports.clock import Clock
from bindings.ports.errors import BindingError
from bindings.ports.kv import KVNamespace
from gateway.credentials import (
    PROVIDER_RE,
    TOOL_NAME_RE,
    CredentialSealer,
    KVReadCache,
    SealedSecret,
    credential_key,
    list_keys,
    read_record,
    tool_key,
)
from gateway.json_schema import UnsupportedSchemaError, check_schema
from http_messages import ApiError

# Names the gateway itself serves over MCP (ADR-0030); a proxied tool may not shadow them.
RESERVED_TOOL_NAMES = frozenset({"recall_memory", "store_memory"})

_HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
# The gateway sets these itself, or they describe a message hop, not the payload.
_FORBIDDEN_REQUEST_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "content-type"}
)
# They describe the upstream connection (httpx decoded the body) or are the gateway's own.
_FORBIDDEN_RESPONSE_HEADERS = frozenset(
    ["content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"]
) | {"x-gateway-error", "x-upstream-status"}


def _header_value_ok(value: str) -> bool:
    return not any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value)


class CredentialPlacement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["header", "query", "none"]
    name: str = ""
    prefix: str = Field(default="", max_length=64)

    @model_validator(mode="after")
    def _name_fits_type(self) -> CredentialPlacement:
        if self.type == "none":
            if self.name or self.prefix:
                raise ValueError("auth type 'none' takes no name or prefix")
            return self
        if not _HEADER_NAME_RE.fullmatch(self.name):
            raise ValueError(f"auth type {self.type!r} needs a 'name' (header or parameter name)")
        if self.type == "query" and self.prefix:
            raise ValueError("a prefix only applies to auth type 'header'")
        if self.type == "header" and self.name.lower() in _FORBIDDEN_REQUEST_HEADERS:
            raise ValueError(f"the credential cannot be sent in the {self.name!r} header")
        if not _header_value_ok(self.prefix):
            raise ValueError("the prefix must not contain control characters")
        return self


class ToolConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TOOL_NAME_RE.pattern)
    title: str = Field(default="", max_length=200)
    description: str = Field(default="", max_length=4000)
    provider: str = Field(default="", pattern=r"^$|" + PROVIDER_RE.pattern)
    url: str = Field(max_length=2048)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    auth: CredentialPlacement = CredentialPlacement(type="none")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "additionalProperties": True}
    )
    input_as: Literal["json", "query"] | None = None
    response_headers: tuple[str, ...] = ()
    max_request_bytes: int = Field(default=256 * 1024, ge=2, le=1024 * 1024)
    max_response_bytes: int = Field(default=5 * 1024 * 1024, ge=1, le=20 * 1024 * 1024)

    @field_validator("method", mode="before")
    @classmethod
    def _upper_method(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_TOOL_NAMES:
            raise ValueError(f"{value!r} is reserved for the gateway's memory tools")
        return value

    @field_validator("url")
    @classmethod
    def _url_shape(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the upstream url must be absolute http(s)://host/...")
        if parts.username or parts.password:
            raise ValueError("put credentials in the tenant's credential, not in the url")
        if parts.fragment:
            raise ValueError("the upstream url must not have a #fragment")
        if PLACEHOLDER_RE.search(parts.netloc) or PLACEHOLDER_RE.search(parts.query):
            raise ValueError("{placeholders} are only allowed in the url path")
        for segment in parts.path.split("/"):
            if unquote(unquote(segment)) in (".", ".."):
                raise ValueError("the upstream url path must not contain '.' or '..' segments")
        return value

    @field_validator("headers")
    @classmethod
    def _headers_ok(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header_value in value.items():
            if not _HEADER_NAME_RE.fullmatch(name):
                raise ValueError(f"invalid header name {name!r}")
            if name.lower() in _FORBIDDEN_REQUEST_HEADERS:
                raise ValueError(f"the gateway sets {name!r} itself")
            if not _header_value_ok(header_value):
                raise ValueError(f"header {name!r} has control characters in its value")
        return value

    @field_validator("response_headers")
    @classmethod
    def _response_headers_ok(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _HEADER_NAME_RE.fullmatch(name):
                raise ValueError(f"invalid header name {name!r}")
            if name.lower() in _FORBIDDEN_RESPONSE_HEADERS:
                raise ValueError(f"header {name.lower()!r} cannot be passed through")
        return tuple(name.lower() for name in value)

    @field_validator("input_schema")
    @classmethod
    def _schema_supported(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            check_schema(value)
        except UnsupportedSchemaError as exc:
            raise ValueError(f"input_schema: {exc}") from None
        # MCP requires a tool's inputSchema to describe an object (the arguments map).
        if value.get("type") != "object":
            raise ValueError('input_schema must have "type": "object" at its root')
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ToolConfig:
        if self.auth.type != "none" and not self.provider:
            raise ValueError("a tool that sends a credential needs a 'provider'")
        if self.auth.type == "header" and any(
            name.lower() == self.auth.name.lower() for name in self.headers
        ):
            raise ValueError(f"header {self.auth.name!r} is both static and the credential")
        if self.method == "GET" and self.input_as == "json":
            raise ValueError("a GET tool cannot send a JSON body; use input_as 'query'")
        properties = self.input_schema.get("properties", {})
        required = set(self.input_schema.get("required", ()))
        for placeholder in self.path_placeholders:
            schema = properties.get(placeholder)
            kinds = schema.get("type") if isinstance(schema, dict) else None
            if placeholder not in required or kinds not in ("string", "integer"):
                raise ValueError(
                    f"url placeholder {{{placeholder}}} must be a required string or integer "
                    "property of input_schema"
                )
        return self

    @property
    def path_placeholders(self) -> list[str]:
        return PLACEHOLDER_RE.findall(urlsplit(self.url).path)

    @property
    def sends_input_as(self) -> Literal["json", "query"]:
        if self.input_as is not None:
            return self.input_as
        return "query" if self.method in ("GET", "DELETE") else "json"

    def mcp_tool(self) -> dict[str, Any]:
        """This tool as an MCP `Tool` object (tools/list)."""
        # Hints from the HTTP method's semantics (RFC 9110 §9.2): safe methods only read,
        # GET, PUT and DELETE are idempotent; every upstream is outside the gateway.
        return {
            "name": self.name,
            "title": self.title or self.name,
            "description": self.description or f"Proxied tool {self.name}",
            "inputSchema": self.input_schema,
            "annotations": {
                "readOnlyHint": self.method == "GET",
                "destructiveHint": self.method == "DELETE",
                "idempotentHint": self.method in ("GET", "PUT", "DELETE"),
                "openWorldHint": True,
            },
        }


class Credential(BaseModel):
    """The secret, `sealed` or in clear (written by wrangler, before sealing, or without a
    key-encryption key)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secret: str | None = Field(default=None, min_length=1, max_length=8192, repr=False)
    sealed: SealedSecret | None = Field(default=None, repr=False)
    updated_at: float = 0.0

    @model_validator(mode="after")
    def _one_form(self) -> Credential:
        if (self.secret is None) == (self.sealed is None):
            raise ValueError("a credential holds either its secret or its sealed secret")
        return self

    @field_validator("secret")
    @classmethod
    def _no_control_characters(cls, value: str) -> str:
        # The secret goes into a header or URL: CR/LF would allow header injection.
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError("the secret must not contain control characters (CR, LF, ...)")
        return value


async def load_tool(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, tenant: str, tool: str
) -> ToolConfig | None:
    if not TOOL_NAME_RE.fullmatch(tool):
        return None
    key = tool_key(tenant, tool)
    return await read_record(kv, cache, clock, key, ToolConfig, "tool config", "register it again")


async def load_tools(
    kv: KVNamespace, cache: KVReadCache, clock: Clock, tenant: str
) -> list[ToolConfig]:
    """Every tool of the tenant (a KV list, then each config through the cache)."""
    prefix = tool_key(tenant, "")
    names = [key[len(prefix) :] for key in await list_keys(kv, prefix)]
    configs = [await load_tool(kv, cache, clock, tenant, name) for name in names]
    return [config for config in configs if config is not None]


async def load_credential(
    kv: KVNamespace,
    cache: KVReadCache,
    clock: Clock,
    tenant: str,
    provider: str,
    sealer: CredentialSealer | None = None,
) -> str | None:
    """The tenant's secret for `provider`, opened; one in clear is sealed in KV now if the
    deployment has a sealer (a failed write leaves it for next time)."""
    key = credential_key(tenant, provider)
    stored = await read_record(kv, cache, clock, key, Credential, "credential", "set it again")
    if stored is None:
        return None
    if stored.sealed is not None:
        if sealer is None:
            raise ApiError(
                503,
                "credential_key_unavailable",
                "the credential is sealed and this deployment has no MEMORY_PII_KEKS to open it",
            )
        # Validated again once opened: the secret goes into a header or a URL.
        return Credential(secret=await sealer.open(key, stored.sealed)).secret
    if sealer is not None and stored.secret is not None:
        sealed = await sealer.seal(key, stored.secret)
        record = Credential(sealed=sealed, updated_at=stored.updated_at)
        with contextlib.suppress(BindingError):
            await kv.put(key, record.model_dump_json(exclude_none=True))
            cache.put(key, record, clock.now())
    return stored.secret
