"""The `AgentRuntime` core, imported on the first object, not at start-up (docs/pyodide.md
"Start-up"); the local runtime builds its cores here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the entry imports this module at start-up
    from agent_runtime_do.core import AgentRuntimeCore
    from bindings.environment import Bindings
    from bindings.ports.alarms import AlarmStorage
    from bindings.ports.do_sql import DurableObjectStorage


def new_runtime_core(
    storage: DurableObjectStorage, bindings: Bindings, *, alarms: AlarmStorage | None = None
) -> AgentRuntimeCore:
    """An `AgentRuntimeCore` over the object's storage, with the memory tools installed."""
    from agent_runtime_do.core import AgentRuntimeCore

    return AgentRuntimeCore(storage, bindings, alarms=alarms)
