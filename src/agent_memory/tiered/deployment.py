"""The `MemoryClient` as a deployment configures it: its bindings (KV, D1, the `COLD` bucket)
and its vars (`MEMORY_NAMESPACE_COMPAT_READ`, `MEMORY_NAMESPACE_WRITE_CANONICAL`,
`MEMORY_PLACEMENT`), bound to one tenant.

A binding the deployment lacks leaves its tier out (the client skips it); the cold tier
needs D1 too (its index). A bad `MEMORY_PLACEMENT` raises `PlacementError`.
"""

from __future__ import annotations

from agent_memory.governance.personal_data import PersonalData
from agent_memory.placement import PlacementTable, parse_placement
from agent_memory.tiered.client import MemoryBuilder, MemoryClient
from agent_memory.tiered.cold import ArchiveColdMemory
from agent_memory.tiered.hot import KVHotMemory
from agent_memory.tiered.warm import D1WarmMemory
from agent_memory.tiers.working import NamespaceFlags, ReadCounts
from bindings.environment import Bindings


def namespace_flags(bindings: Bindings) -> NamespaceFlags:
    settings = bindings.settings
    return NamespaceFlags(
        compat_read=settings.memory_namespace_compat_read,
        write_canonical=settings.memory_namespace_write_canonical,
    )


def placement_table(bindings: Bindings) -> PlacementTable:
    return parse_placement(bindings.settings.memory_placement)


def deployment_client(
    bindings: Bindings, tenant: str, *, counts: ReadCounts | None = None
) -> MemoryClient:
    """The tenant's client over this deployment's tiers (see the module docstring)."""
    table = placement_table(bindings)
    working_ttl = table.placement("working").ttl_seconds
    hot = (
        None
        if bindings.kv is None
        else KVHotMemory(
            bindings.kv, flags=namespace_flags(bindings), counts=counts, repair_ttl=working_ttl
        )
    )
    warm = (
        None
        if bindings.db is None
        else D1WarmMemory(bindings.db, PersonalData.from_bindings(bindings, tenant))
    )
    cold = (
        None
        if bindings.db is None or bindings.cold is None
        else ArchiveColdMemory(bindings.db, bindings.cold, bindings.clock)
    )
    return (
        MemoryBuilder()
        .with_hot(hot)
        .with_warm(warm)
        .with_cold(cold)
        .with_rules(read_fallback=True, promote_on_read=True, placement=table)
        .for_tenant(tenant)
        .build()
    )
