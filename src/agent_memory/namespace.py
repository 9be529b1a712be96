"""How agent memory is named: tenant, agent type and instance, and how a memory item is named
in every tier (the hot/warm/cold ADR's namespace contract: docs/tiered-memory.md, "The
namespace contract").

Names are validated here, before they reach a storage key, a Durable Object name or a SQL
parameter. They are single segments (no `:`, which separates the segments of KV keys and of
Durable Object names `{tenant}:{agent_type}:{instance}`), so no name aliases another's memory.
`ItemKey.parse` is the one parser of item keys (`InvalidNamespaceKey`; another tenant's key:
`NamespaceForbidden`). `legacy_working_key` is ADR-043's `agent_working:{tenant}:{session}:{key}`;
working memory's session is `agent_session`: `{agent_type}.{instance}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from http_messages import CodedError

# Tenants follow the gateway's rule (lower-case, ≤ 63), so one tenant id works everywhere.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"

AGENT_TYPE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"

# Instances are caller-chosen handles (a contact id, a ticket number...): a little wider.
INSTANCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$"

DEFAULT_INSTANCE = "default"

# The agent type of agents that exist only through the memory API (a memory token minted
# without an agent type, and every token minted before tokens named one).
API_AGENT_TYPE = "memory-api"


TENANT_RE = re.compile(TENANT_PATTERN)

# The subject of a fact written about nobody in particular (the semantic tier's default).
DEFAULT_SUBJECT = "general"

AGENT_TYPE_RE = re.compile(AGENT_TYPE_PATTERN)

INSTANCE_RE = re.compile(INSTANCE_PATTERN)

# A namespace's session: an instance id, or an agent's memory session (`agent_session`).
SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,193}$")


def agent_session(agent_type: str, instance_id: str) -> str:
    """The session that names one agent's own memory: `{agent_type}.{instance_id}`, so an
    `assistant` and an `sdr` on instance `default` have two working memories (issue 25).
    Agent types have no `.`, so the first `.` splits it back into its two names."""
    if not AGENT_TYPE_RE.fullmatch(agent_type) or not INSTANCE_RE.fullmatch(instance_id):
        raise ValueError(f"not an agent: {agent_type!r}, {instance_id!r}")
    return f"{agent_type}.{instance_id}"


class AgentScope(BaseModel):
    """One agent instance: the unit a Durable Object and a working memory belong to."""

    model_config = ConfigDict(frozen=True)

    tenant: str = Field(pattern=TENANT_PATTERN)
    agent_type: str = Field(pattern=AGENT_TYPE_PATTERN)
    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)

    @property
    def object_name(self) -> str:
        """The AgentRuntime Durable Object name: one object per (tenant, type, instance)."""
        return f"{self.tenant}:{self.agent_type}:{self.instance_id}"


def is_tenant(value: str) -> bool:
    return bool(TENANT_RE.fullmatch(value))


def is_agent_type(value: str) -> bool:
    return bool(AGENT_TYPE_RE.fullmatch(value))


def is_instance(value: str) -> bool:
    return bool(INSTANCE_RE.fullmatch(value))


SERVICE = "agent-memory"

SEPARATOR = ":"

MAX_ITEM_KEY_BYTES = 480  # under KV's 512-byte key limit, leaving room for nothing else

LEGACY_WORKING_PREFIX = "agent_working"

INVALID_KEY_CODE = "invalid_namespace_key"

FORBIDDEN_CODE = "namespace_forbidden"


# Matched with fullmatch: `match` with `^...$` would let a trailing newline through.
_SEGMENT = re.compile(r"[A-Za-z0-9._@+-]+")

_KIND = re.compile(r"[a-z][a-z0-9_-]{0,31}")


class InvalidNamespaceKey(CodedError, ValueError):
    """A namespace or item key breaks the grammar; nothing was read or written."""

    status, code = 422, INVALID_KEY_CODE


class NamespaceForbidden(CodedError, PermissionError):
    """A key names another tenant's namespace than the one the caller is bound to."""

    status, code = 403, FORBIDDEN_CODE


def _segment(name: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidNamespaceKey(f"{name} segment is empty")
    if not _SEGMENT.fullmatch(value):
        raise InvalidNamespaceKey(
            f"{name} segment {value!r} has characters outside letters, digits and . _ @ + - "
            "(the delimiter is ':' and wildcards are not allowed)"
        )
    return value


@dataclass(frozen=True, slots=True)
class NamespaceKey:
    """`<service>:<tenantId>:<sessionId>`, validated at construction."""

    service: str
    tenant: str
    session: str

    def __post_init__(self) -> None:
        _segment("service", self.service)
        if not isinstance(self.tenant, str) or not TENANT_RE.fullmatch(self.tenant):
            raise InvalidNamespaceKey(f"tenant segment {self.tenant!r} is not a tenant id")
        if not isinstance(self.session, str) or not SESSION_RE.fullmatch(self.session):
            raise InvalidNamespaceKey(f"session segment {self.session!r} is not a session id")

    @property
    def key(self) -> str:
        return SEPARATOR.join((self.service, self.tenant, self.session))


@dataclass(frozen=True, slots=True)
class ItemKey:
    """`<namespaceKey>:<memoryKind>:<entityId>`, validated at construction."""

    namespace: NamespaceKey
    kind: str
    entity: str

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not _KIND.fullmatch(self.kind):
            raise InvalidNamespaceKey(f"memory kind {self.kind!r} is not a kind name")
        if not isinstance(self.entity, str) or not self.entity:
            raise InvalidNamespaceKey("entity id is empty")
        for part in self.entity.split(SEPARATOR):
            _segment("entity id", part)
        if len(self.key.encode("utf-8")) > MAX_ITEM_KEY_BYTES:
            raise InvalidNamespaceKey(f"item key is longer than {MAX_ITEM_KEY_BYTES} bytes")

    @classmethod
    def build(
        cls, tenant: str, session: str, kind: str, entity: str, *, service: str = SERVICE
    ) -> ItemKey:
        return cls(NamespaceKey(service, tenant, session), kind, entity)

    @classmethod
    def parse(cls, key: str) -> ItemKey:
        """The item key `key` names; raises `InvalidNamespaceKey` for anything else."""
        if not isinstance(key, str) or not key:
            raise InvalidNamespaceKey("item key is empty")
        parts = key.split(SEPARATOR)
        if len(parts) < 5:
            raise InvalidNamespaceKey(
                f"item key {key!r} is not <service>:<tenantId>:<sessionId>:<kind>:<entityId>"
            )
        service, tenant, session, kind = parts[:4]
        return cls(NamespaceKey(service, tenant, session), kind, SEPARATOR.join(parts[4:]))

    @property
    def tenant(self) -> str:
        return self.namespace.tenant

    @property
    def session(self) -> str:
        return self.namespace.session

    @property
    def namespace_key(self) -> str:
        return self.namespace.key

    @property
    def key(self) -> str:
        return SEPARATOR.join((self.namespace.key, self.kind, self.entity))


def legacy_working_key(item: ItemKey) -> str:
    """The ADR-043 KV key of a `working` item: `agent_working:{tenant}:{session}:{entity}`."""
    return SEPARATOR.join((LEGACY_WORKING_PREFIX, item.tenant, item.session, item.entity))


def check_tenant(item: ItemKey, tenant: str | None) -> ItemKey:
    """`item` if it is in `tenant`'s namespace (or no tenant is bound), else refused."""
    if tenant is not None and item.tenant != tenant:
        raise NamespaceForbidden("this key names another tenant's namespace")
    return item


MAX_KEY_BYTES = 128
# Keys a URL cannot carry as one path segment (clients and Cloudflare's URL normalisation
# resolve them as dot segments), so `DELETE .../{key}` could never reach them.
_DOT_SEGMENTS = frozenset({".", ".."})


class InvalidMemoryKey(CodedError, ValueError):
    """A memory key that is empty, too long, a wildcard or not addressable in a URL."""

    status, code = 422, "invalid_key"


def validate_key(key: str, error: type[ValueError] = InvalidMemoryKey) -> str:
    """Return `key` if it is a valid memory key (working memory, or an item key of the memory
    API), else raise `error`: keys that could not be addressed later are refused at write."""
    if not isinstance(key, str) or not key:
        raise error("working memory key must be a non-empty string")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise error(f"working memory key is longer than {MAX_KEY_BYTES} bytes")
    for segment in key.split(":"):
        if not segment:
            raise error(f"working memory key {key!r} has an empty segment")
        if not _SEGMENT.fullmatch(segment):
            raise error(
                f"working memory key {key!r} has a segment with characters outside "
                "letters, digits and . _ @ + - (wildcards are not allowed)"
            )
    if key in _DOT_SEGMENTS:
        raise error(f"memory key {key!r} cannot be addressed in a URL path")
    return key
