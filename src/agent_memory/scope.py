"""Who a piece of agent memory belongs to: tenant, agent type and agent instance.

Names are validated once, here, before they reach a storage key, a Durable Object name or
a SQL parameter. They are single segments (no `:`), because `:` separates the segments of
KV keys (`agent_working:{tenant}:{instance}:{key}`) and of Durable Object names
(`{tenant}:{agent_type}:{instance}`); a name with a `:` could alias another scope.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

# Tenants follow the gateway's rule (lower-case, ≤ 63), so one tenant id works everywhere.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
AGENT_TYPE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
# Instances are caller-chosen handles (a contact id, a ticket number...): a little wider.
INSTANCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$"
DEFAULT_INSTANCE = "default"

TENANT_RE = re.compile(TENANT_PATTERN)
AGENT_TYPE_RE = re.compile(AGENT_TYPE_PATTERN)
INSTANCE_RE = re.compile(INSTANCE_PATTERN)


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
