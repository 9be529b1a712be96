"""A tenant's own vectors among a list of ids: the one ownership check before any delete.

Vector ids are unique per index, not per namespace, so an id alone is never trusted: a
vector is the tenant's only when it sits in the tenant's namespace *and* carries its
`tenant_id`. The semantic tier, the reconciler and the subject eraser all delete through
here.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_memory.statements import chunks
from agent_memory.tiers.semantic.models import namespace_for_tenant
from bindings.ports.vectorize import VectorIndex

IDS_PER_CALL = 100


async def own_vector_ids(vectors: VectorIndex, tenant_id: str, ids: Sequence[str]) -> list[str]:
    """The ids among `ids` whose vector belongs to `tenant_id`."""
    namespace = namespace_for_tenant(tenant_id)
    mine: list[str] = []
    for chunk in chunks(list(ids), IDS_PER_CALL):
        records = await vectors.get_by_ids(list(chunk))
        mine += [
            r.id
            for r in records
            if r.namespace == namespace and r.metadata.get("tenant_id") == tenant_id
        ]
    return mine


async def delete_own_vectors(vectors: VectorIndex, tenant_id: str, ids: Sequence[str]) -> list[str]:
    """Delete the tenant's vectors among `ids`; returns the ids deleted."""
    mine = await own_vector_ids(vectors, tenant_id, ids)
    for chunk in chunks(mine, IDS_PER_CALL):
        await vectors.delete_by_ids(list(chunk))
    return mine
