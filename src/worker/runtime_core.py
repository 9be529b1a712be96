"""The `AgentRuntime` Durable Object's core, imported when the first object is made.

`worker.entry` defines the Durable Object class (workerd finds it by scanning the main
module) but its core — the agent loop, the four tiers, the lifecycle, the outbox — is
most of the project's code. Importing it at start-up would put it in the deploy's
snapshot, whose CPU Cloudflare limits (docs/pyodide.md "Start-up"); here it loads on the
first object construction of an isolate instead. The local runtime builds its cores here
too, so both hosts build them the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the entry imports this module at start-up
    from agent_runtime_do.runtime import AgentRuntimeCore
    from bindings.environment import Bindings
    from bindings.ports.alarms import AlarmStorage
    from bindings.ports.do_sql import DurableObjectStorage


def new_runtime_core(
    storage: DurableObjectStorage, bindings: Bindings, *, alarms: AlarmStorage | None = None
) -> AgentRuntimeCore:
    """An `AgentRuntimeCore` over the object's storage, with the memory tools installed."""
    from agent_runtime_do.runtime import AgentRuntimeCore

    return AgentRuntimeCore(storage, bindings, alarms=alarms)
