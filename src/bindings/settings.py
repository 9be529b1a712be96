"""Configuration read from the Worker's `[vars]` (or the local runtime's equivalent).

Every value arrives as a string (wrangler vars, environment variables) and is validated
here once, so the rest of the code gets typed values or the Worker refuses to start a
request with a clear message.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from bindings.ports.cipher import KeyEncryptionKeys, parse_key_encryption_keys

_HOST_NAME_RE = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_host_list(raw: str) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    """`OUTBOUND_ALLOWED_HOSTS`: comma-separated host names, IP addresses or CIDR networks,
    as (lower-cased names, networks). Raises ValueError naming a bad entry."""
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in (item.strip().lower() for item in raw.split(",")):
        if not entry:
            continue
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
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
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


class Settings(BaseModel):
    # Secrets live here too (MEMORY_PII_KEKS, MEMORY_TOKEN_KEYS, OPENAI_API_KEY): a refused
    # value is never echoed into the error (and so into a log or a response).
    model_config = ConfigDict(frozen=True, extra="ignore", hide_input_in_errors=True)

    environment: Literal["production", "development", "test"] = "production"
    # Cloudflare Access: team domain like "acme.cloudflareaccess.com" and the app's AUD tag.
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
    # Recall scoring and fusion overrides as a JSON object (docs/semantic-memory.md), e.g.
    # {"tiers": {"semantic": {"relevance": 0.6, "recency": 0.1, ...}}}; empty = defaults.
    memory_retrieval_config: str = ""
    # The lifecycle crons' budget per invocation (docs/lifecycle.md): D1 statements + R2
    # calls (paid plan: 1000 D1 queries per invocation; set ~45 on the free plan's 50) and
    # wall time (a cron whose interval is >= 1 h may run 15 min), and the prune batch size.
    lifecycle_max_operations: int = Field(default=900, ge=10)
    lifecycle_max_seconds: float = Field(default=600.0, gt=0, le=900)
    prune_batch_rows: int = Field(default=500, ge=1, le=5000)
    # AgentRuntime Durable Object storage (docs/lifecycle.md, "Agent instance state"): after
    # this long without a turn the object's alarm clears run_log and turn_state once their
    # content is in D1 (ADR-043: ~24 h idle); the run log is capped per object, oldest
    # runs (already in D1) dropped first.
    agent_state_idle_seconds: int = Field(default=86_400, ge=60)
    agent_run_log_max_rows: int = Field(default=5_000, ge=100)
    agent_run_log_max_bytes: int = Field(default=4_194_304, ge=65_536)
    # Knowledge updates (docs/semantic-memory.md): who decides candidate pairs in the
    # reconciler ("rules": no model; "llm": the LLM binding decides what the rules cannot
    # settle with a marker), and after how many new facts of a tenant a reconcile is
    # scheduled in the background (0: only the daily cron and on demand).
    memory_update_adjudicator: Literal["rules", "llm"] = "rules"
    memory_reconcile_every_writes: int = Field(default=20, ge=0, le=100_000)

    # Hosts tools may call although they are loopback, private, link-local or metadata space
    # (docs/gateway.md "Outbound guard"): comma-separated names, IPs or CIDR networks.
    outbound_allowed_hosts: str = ""
    # Browser origins allowed to call /mcp (docs/gateway.md "Origin"); requests without an
    # Origin header (CLI and IDE clients with API keys) never need to be listed.
    mcp_allowed_origins: str = ""
    # Agent-scoped memory tokens (worker.memory_tokens, docs/memory-api.md): a Worker secret
    # holding a JSON object of signing keys by kid ({"k2": "<secret>", "k1": "<old>"}), and
    # the kid new tokens are signed with (empty: the first key). Old kids keep verifying.
    memory_token_keys: str = ""
    memory_token_kid: str = ""
    # Personal data at rest (docs/personal-data.md): the key-encryption keys, a Worker secret
    # `kid:base64(32 bytes),...`, newest first (it wraps new data keys; every kid unwraps).
    # Empty: marked personal data is refused, never stored in plaintext.
    memory_pii_keks: str = ""
    # Tenant-scoped operators (worker.operators): emails / Access service-token common
    # names with the platform-admin role without a grant row (bootstrap), comma-separated.
    platform_admins: str = ""
    # Embedding calls per tenant per EMBED_RATE_PERIOD seconds through the memory API: the
    # numbers of wrangler.toml's EMBED_RATE_LIMITER binding (the local runtime's limiter
    # uses them; on Cloudflare the binding enforces its own, the period gives Retry-After).
    embed_rate_limit: int = Field(default=120, ge=1)
    embed_rate_period: int = 60
    # The namespace migration of the hot/warm/cold ADR (docs/tiered-memory.md): read the
    # canonical key first and legacy keys on a miss (with read-repair), and write canonical
    # keys. Phase 1: compat read only; 2: both; 3: canonical write only.
    memory_namespace_compat_read: bool = False
    memory_namespace_write_canonical: bool = False
    # Overrides of the data-placement table (agent_memory.placement) as a JSON object by
    # memory kind, e.g. {"log": {"cold_retention_days": 30}}; empty = the defaults. Checked
    # here as a JSON object; the fields by `agent_memory.placement.parse_placement` (the
    # memory core is a layer above this module).
    memory_placement: str = ""
    # The deployment's own agent types (agent_memory.governance.agent_types.catalog): a JSON
    # list of agent type definitions added to (or replacing, by name) the built-in ones.
    agent_types: str = ""

    @field_validator("embed_rate_period")
    @classmethod
    def _period(cls, value: int) -> int:
        if value not in (10, 60):
            raise ValueError("EMBED_RATE_PERIOD must be 10 or 60 (the binding's periods)")
        return value

    @field_validator("memory_pii_keks")
    @classmethod
    def _kek_ring(cls, value: str) -> str:
        parse_key_encryption_keys(value)
        return value

    @property
    def pii_keks(self) -> KeyEncryptionKeys | None:
        return parse_key_encryption_keys(self.memory_pii_keks)

    @field_validator("outbound_allowed_hosts")
    @classmethod
    def _host_list(cls, value: str) -> str:
        parse_host_list(value)
        return value

    @field_validator("mcp_allowed_origins")
    @classmethod
    def _origin_list(cls, value: str) -> str:
        parse_origin_list(value)
        return value

    @property
    def outbound_allow_list(self) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
        return parse_host_list(self.outbound_allowed_hosts)

    @property
    def mcp_origins(self) -> frozenset[str]:
        return parse_origin_list(self.mcp_allowed_origins)

    @field_validator("agent_types")
    @classmethod
    def _json_list(cls, value: str) -> str:
        if value.strip():
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"AGENT_TYPES is not JSON: {exc}") from None
            if not isinstance(parsed, list):
                raise ValueError("AGENT_TYPES must be a JSON list of agent types")
        return value

    @field_validator("memory_retrieval_config", "memory_placement")
    @classmethod
    def _json_object(cls, value: str, info: ValidationInfo) -> str:
        if value.strip():
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{str(info.field_name).upper()} is not JSON: {exc}") from None
            if not isinstance(parsed, dict):
                raise ValueError(f"{str(info.field_name).upper()} must be a JSON object")
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
