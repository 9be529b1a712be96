"""A tier bound to a tenant refuses a tenant id that only looks valid to `re.match(...$)`:
`$` also matches before a trailing newline, so "acme\\n" would otherwise address storage
keyed by a tenant that no route can name (and a different KV prefix than "acme")."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.governance.writes import EventLog
from agent_memory.namespace import is_tenant
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.working import InvalidWorkingMemoryKey, WorkingMemory
from bindings.ports.clock import FixedClock

UNUSED: Any = object()  # the constructors refuse before touching a store


@pytest.mark.parametrize("tenant", ["acme\n", "acme\r\n", "\nacme"])
def test_every_tenant_bound_store_refuses_a_newline_tenant(tenant: str) -> None:
    assert not is_tenant(tenant)
    with pytest.raises(ValueError):
        EventLog(tenant, UNUSED)
    with pytest.raises(ValueError):
        SemanticMemory(tenant, db=UNUSED, vectors=UNUSED, embedder=None, clock=FixedClock())
    with pytest.raises(InvalidWorkingMemoryKey):
        WorkingMemory(UNUSED, tenant, "instance-1")


def test_a_newline_instance_is_refused_by_working_memory() -> None:
    with pytest.raises(InvalidWorkingMemoryKey):
        WorkingMemory(UNUSED, "acme", "instance-1\n")


def test_the_plain_tenant_is_accepted() -> None:
    assert EventLog("acme", UNUSED).tenant_id == "acme"
