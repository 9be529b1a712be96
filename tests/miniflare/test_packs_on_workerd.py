"""Workflow pack promotion on workerd's D1: the version is computed inside the INSERT and
read back through RETURNING from a batch, which the local D1 adapter must not be the only
one to support."""

from __future__ import annotations

from agent_memory.tiers.episodic import Workflow, WorkflowPacks
from tests.miniflare.adapters import MiniflareD1


def workflow(pulls: int) -> Workflow:
    return Workflow(
        workflow_id="assistant.general.direct",
        agent_type="assistant",
        task_type="general",
        spec={},
        alpha=1.0 + pulls,
        beta=1.0,
        pulls=pulls,
        status="active",
        created_at=0.0,
        updated_at=0.0,
    )


async def test_promotions_number_versions_and_deprecate_the_previous_on_workerd(
    mf_migrated_d1: MiniflareD1,
) -> None:
    packs = WorkflowPacks(mf_migrated_d1, "acme")
    first = await packs.promote("concise", workflow(5), instance_id="i1", by="ops", now_ms=1)
    second = await packs.promote("concise", workflow(9), instance_id="i1", by="ops", now_ms=2)
    assert (first.version, second.version, second.pulls) == (1, 2, 9)
    listed = await packs.list("assistant")
    assert [(p.version, p.status) for p in listed] == [(2, "active"), (1, "deprecated")]
    offered = await packs.offered("assistant", "general")
    assert offered is not None and offered.version == 2
