"""Configuration from the Worker's vars and secrets: every value arrives as a string and is
validated here once; a bad one is refused with a clear message."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from bindings.ports.crypto import KeyEncryptionKeys, parse_key_encryption_keys

_HOST_NAME_RE = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _entries(raw: str) -> list[str]:
    """The non-empty items of a comma-separated var, stripped."""
    return [entry for entry in (item.strip() for item in raw.split(",")) if entry]


def parse_host_list(raw: str) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    """`OUTBOUND_ALLOWED_HOSTS`: comma-separated host names, IP addresses or CIDR networks,
    as (lower-cased names, networks). Raises ValueError naming a bad entry."""
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in _entries(raw.lower()):
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if not _HOST_NAME_RE.fullmatch(entry.rstrip(".")):
            raise ValueError(f"OUTBOUND_ALLOWED_HOSTS entry {entry!r} is not a host, IP or CIDR")
        names.add(entry.rstrip("."))
    return frozenset(names), tuple(networks)


def parse_origin_list(raw: str) -> frozenset[str]:
    """`MCP_ALLOWED_ORIGINS`: comma-separated origins (`https://app.example.com[:port]`),
    lower-cased. Raises ValueError for an entry with a path, query or other scheme."""
    origins: set[str] = set()
    for entry in _entries(raw):
        parts = urlsplit(entry)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username
        ):
            raise ValueError(f"MCP_ALLOWED_ORIGINS entry {entry!r} is not an http(s) origin")
        origins.add(f"{parts.scheme}://{parts.netloc}".lower())
    return frozenset(origins)


def parse_issuer(raw: str) -> str:
    """`OAUTH_ISSUER`: one http(s) origin, lower-cased, or "" (unset)."""
    origins = parse_origin_list(raw)
    if len(origins) > 1:
        raise ValueError("OAUTH_ISSUER is one origin (https://memory.example.com)")
    return next(iter(origins), "")


PlatformAdminKind = Literal["email", "common_name"]


def parse_platform_admins(raw: str) -> frozenset[tuple[PlatformAdminKind, str]]:
    """`PLATFORM_ADMINS`: comma-separated `(kind, name)`s, `email:ada@example.com` (lower-cased)
    or `common_name:<client id>.access` (a service token); a bare entry is an email when it has
    an `@`. An entry matches only its own kind. Raises ValueError naming a bad entry."""
    admins: set[tuple[PlatformAdminKind, str]] = set()
    for entry in _entries(raw):
        prefix, colon, rest = entry.partition(":")
        if colon and _ADMIN_PREFIX_RE.fullmatch(prefix):
            if prefix not in ("email", "common_name"):
                raise ValueError(
                    f"PLATFORM_ADMINS entry {entry!r}: the kind is email: or common_name:"
                )
            kind: PlatformAdminKind = "email" if prefix == "email" else "common_name"
            name = rest.strip()
        else:
            kind, name = ("email" if "@" in entry else "common_name"), entry
        if not name or (kind == "email" and "@" not in name):
            raise ValueError(f"PLATFORM_ADMINS entry {entry!r} names no {kind}")
        admins.add((kind, name.lower() if kind == "email" else name))
    return frozenset(admins)


_ADMIN_PREFIX_RE = re.compile(r"[a-z_]+")

PRIMARY_SHARD = "primary"
_SHARD_NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_BINDING_NAME_RE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


def parse_shards(raw: str) -> tuple[tuple[str, str, str], ...]:
    """`MEMORY_SHARDS`: comma-separated `name=D1_BINDING:VECTORIZE_BINDING` (`s2=DB_2:VECTORIZE_2`)
    besides the primary (`DB`, `VECTORIZE`), as (name, D1, Vectorize), the primary first. Raises
    ValueError naming a bad entry."""
    shards = [(PRIMARY_SHARD, "DB", "VECTORIZE")]
    for entry in _entries(raw):
        name, _, pair = entry.partition("=")
        d1, _, index = pair.partition(":")
        name, d1, index = name.strip(), d1.strip(), index.strip()
        if not (
            _SHARD_NAME_RE.fullmatch(name)
            and _BINDING_NAME_RE.fullmatch(d1)
            and _BINDING_NAME_RE.fullmatch(index)
        ):
            raise ValueError(
                f"MEMORY_SHARDS entry {entry!r} is not name=D1_BINDING:VECTORIZE_BINDING"
            )
        if any(name == s[0] or d1 == s[1] or index == s[2] for s in shards):
            raise ValueError(f"MEMORY_SHARDS entry {entry!r} repeats a name or a binding")
        shards.append((name, d1, index))
    return tuple(shards)


def _parses(parse: Callable[[str], object]) -> AfterValidator:
    """A list var is kept as text, checked by its parser (its parsed form is cached below)."""

    def check(value: str) -> str:
        parse(value)
        return value

    return AfterValidator(check)


class Settings(BaseModel):
    # Secrets live here too: a refused value is never echoed into the error.
    model_config = ConfigDict(frozen=True, extra="ignore", hide_input_in_errors=True)

    environment: Literal["production", "development", "test"] = "production"
    # Cloudflare Access: team domain ("acme.cloudflareaccess.com") and the app's AUD tag.
    access_team_domain: str = ""
    access_aud: str = ""
    embedding_provider: Literal["workers-ai", "openai", "local-minilm"] = "workers-ai"
    embedding_model: str = "@cf/baai/bge-small-en-v1.5"
    embedding_dimensions: int = Field(default=384, ge=1, le=1536)
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = ""
    llm_provider: Literal["workers-ai", "openai", "scripted"] = "workers-ai"
    llm_model: str = "@cf/meta/llama-3.1-8b-instruct"
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    episode_retention_days: int = Field(default=90, ge=1)
    # Recall scoring/fusion overrides, a JSON object (docs/semantic-memory.md); empty: defaults.
    memory_retrieval_config: str = ""
    # The lifecycle crons' budget per invocation (docs/lifecycle.md): D1 + R2 calls (paid plan:
    # 1000 D1 queries), wall time (an hourly or rarer cron may run 15 min), prune batch size.
    lifecycle_max_operations: int = Field(default=900, ge=10)
    lifecycle_max_seconds: float = Field(default=600.0, gt=0, le=900)
    prune_batch_rows: int = Field(default=500, ge=1, le=5000)
    # A tenant move's step (docs/placement.md): metered D1/Vectorize calls; the step's D1
    # queries run to about 1.5 times this (a progress save a chunk), so 400 keeps a paid
    # plan's invocation under its 1,000 queries (free plan, 50: about 30).
    move_step_calls: int = Field(default=400, ge=10, le=2000)
    # AgentRuntime DO storage (ADR-043): idle time before the alarm clears it; run log caps.
    agent_state_idle_seconds: int = Field(default=86_400, ge=60)
    agent_run_log_max_rows: int = Field(default=5_000, ge=100)
    agent_run_log_max_bytes: int = Field(default=4_194_304, ge=65_536)
    # Knowledge updates (docs/semantic-memory.md): who settles what the rules cannot, and after
    # how many new facts a reconcile is scheduled (0: only the daily cron and on demand).
    memory_update_adjudicator: Literal["rules", "llm"] = "rules"
    memory_reconcile_every_writes: int = Field(default=20, ge=0, le=100_000)
    # Private hosts tools may call anyway (docs/gateway.md "Outbound guard"): names, IPs, CIDRs.
    outbound_allowed_hosts: Annotated[str, _parses(parse_host_list)] = ""
    # Browser origins allowed to call /mcp (docs/gateway.md "Origin").
    mcp_allowed_origins: Annotated[str, _parses(parse_origin_list)] = ""
    # The Worker's public origin (docs/gateway.md "OAuth"): the issuer and resource base.
    oauth_issuer: Annotated[str, _parses(parse_issuer)] = ""
    # Memory tokens (docs/memory-api.md): signing keys by kid (JSON), the kid to sign with.
    memory_token_keys: str = ""
    memory_token_kid: str = ""
    # Personal data at rest (docs/personal-data.md): `kid:base64key,...`, newest first.
    memory_pii_keks: Annotated[str, _parses(parse_key_encryption_keys)] = ""
    # Platform admins without a grant row (`parse_platform_admins`).
    platform_admins: Annotated[str, _parses(parse_platform_admins)] = ""
    # EMBED_RATE_LIMITER's numbers (on Cloudflare the binding has its own; the period gives
    # Retry-After).
    embed_rate_limit: int = Field(default=120, ge=1)
    embed_rate_period: int = 60
    # Namespace migration (docs/tiered-memory.md): phase 1 compat read, 2 both, 3 canonical.
    memory_namespace_compat_read: bool = False
    memory_namespace_write_canonical: bool = False
    # Data-placement overrides by memory kind (JSON; agent_memory.placement checks them).
    memory_placement: str = ""
    # A JSON list of agent types added to (or replacing by name) the built-in ones.
    agent_types: str = ""
    # Tenant placement (docs/placement.md): the other shards (`parse_shards`), and one D1
    # database's size limit (10 GB): new tenants go where most is free.
    memory_shards: Annotated[str, _parses(parse_shards)] = ""
    d1_database_max_bytes: int = Field(default=10 * 1024**3, ge=1)

    @field_validator("embed_rate_period")
    @classmethod
    def _period(cls, value: int) -> int:
        if value not in (10, 60):
            raise ValueError("EMBED_RATE_PERIOD must be 10 or 60 (the binding's periods)")
        return value

    # The parsed forms of the list vars, once per Settings (validated above).
    @cached_property
    def pii_keks(self) -> KeyEncryptionKeys | None:
        return parse_key_encryption_keys(self.memory_pii_keks)

    @cached_property
    def outbound_allow_list(self) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
        return parse_host_list(self.outbound_allowed_hosts)

    @cached_property
    def mcp_origins(self) -> frozenset[str]:
        return parse_origin_list(self.mcp_allowed_origins)

    @cached_property
    def public_origin(self) -> str:
        return parse_issuer(self.oauth_issuer)

    @cached_property
    def shards(self) -> tuple[tuple[str, str, str], ...]:
        return parse_shards(self.memory_shards)

    @cached_property
    def platform_admin_identities(self) -> frozenset[tuple[PlatformAdminKind, str]]:
        return parse_platform_admins(self.platform_admins)

    @field_validator("memory_retrieval_config", "memory_placement", "agent_types")
    @classmethod
    def _json(cls, value: str, info: ValidationInfo) -> str:
        name = str(info.field_name).upper()
        if value.strip():
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{name} is not JSON: {exc}") from None
            if name == "AGENT_TYPES" and not isinstance(parsed, list):
                raise ValueError("AGENT_TYPES must be a JSON list of agent types")
            if name != "AGENT_TYPES" and not isinstance(parsed, dict):
                raise ValueError(f"{name} must be a JSON object")
        return value

    @classmethod
    def from_vars(cls, values: Mapping[str, Any]) -> Settings:
        """Build from upper-case var names (`EMBEDDING_PROVIDER`...); unknown names ignored."""
        lowered = {k.lower(): v for k, v in values.items() if isinstance(k, str)}
        fields = {k: v for k, v in lowered.items() if k in cls.model_fields and v is not None}
        return cls.model_validate(fields)

    @staticmethod
    def var_names() -> list[str]:
        return [name.upper() for name in Settings.model_fields]
