"""The subject erase's Durable Object step: every AgentRuntime instance of the tenant.

Instances are found in D1 (`instances.tenant_instances`: the instances named by the
tenant's `agent_runs` rows and those that reported an `agent_instances` row) and reached
through the Durable Object namespace port, each by its object name
(`AgentScope.object_name`). Each is registered in `agent_instances` (so it stays findable
once the runs rows naming it are gone), then gets the `erase_subject` RPC
(`agent_runtime_do.erase`) with the ids of the runs the erase removes from D1, in slices
of `RUN_IDS_PER_CALL`; its counts per store are added to the report's `agent_state`.

This step runs before the D1 rows are deleted: the instance list comes from those rows,
and an object's queued writes of an erased run would otherwise bring it back. A failure
raises, so the caller can stop before deleting anything a repeat would need to find.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_memory.lifecycle._erase_rules import EraseReport
from agent_memory.lifecycle.instances import register_instances, tenant_instances
from agent_memory.scope import AgentScope
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.durable_objects import DurableObjectNamespace

RUN_IDS_PER_CALL = 1000  # agent_runtime_do.protocol.MAX_ERASE_RUN_IDS

AGENT_STATE_STORES = ("run_log", "turn_state", "failed_writes", "pending_writes")


class InstanceEraseError(RuntimeError):
    """An instance refused or failed the erase (its answer's code is in the message)."""


class InstanceEraser:
    def __init__(
        self, tenant_id: str, *, db: D1Database, agents: DurableObjectNamespace, clock: Clock
    ) -> None:
        self.tenant_id = tenant_id
        self._db = db
        self._agents = agents
        self._clock = clock

    async def erase(self, subject: str, run_ids: Sequence[str], report: EraseReport) -> None:
        runs = sorted(run_ids)
        slices = [runs[i : i + RUN_IDS_PER_CALL] for i in range(0, len(runs), RUN_IDS_PER_CALL)]
        instances = await tenant_instances(self._db, self.tenant_id)
        # Registered first: once the runs rows that name an instance are erased, this row
        # is how a repeat (or the next erase) still finds it.
        await register_instances(self._db, self.tenant_id, instances, int(self._clock.now() * 1000))
        for agent_type, instance_id in instances:
            scope = AgentScope(
                tenant=self.tenant_id, agent_type=agent_type, instance_id=instance_id
            )
            stub = self._agents.get_by_name(scope.object_name)
            for run_slice in slices or [[]]:
                answer = await stub.call(
                    "erase_subject",
                    {
                        "tenant": scope.tenant,
                        "agent_type": scope.agent_type,
                        "instance_id": scope.instance_id,
                        "subject": subject,
                        "run_ids": run_slice,
                    },
                )
                error = answer.get("error")
                if isinstance(error, dict):
                    raise InstanceEraseError(
                        f"instance {agent_type}/{instance_id}: {error.get('code', 'error')}"
                    )
                erased = answer.get("erased", {})
                for store in AGENT_STATE_STORES:
                    report.agent_state[store] += int(erased.get(store, 0))
            report.agent_state["instances"] += 1
