"""`AgentRuntimeCore`: one agent instance's turn loop and its DO-local tiers.

The Cloudflare wrapper calls `initialize()` inside `blockConcurrencyWhile` from its
constructor, then forwards each RPC to `call(method, payload)`.
"""

from __future__ import annotations

from typing import Any

from agent_runtime_do.schema import create_schema
from bindings.environment import Bindings
from bindings.ports.do_sql import DurableObjectStorage


class UnknownMethodError(LookupError):
    """RPC named a method the runtime does not expose."""


class AgentRuntimeCore:
    def __init__(self, storage: DurableObjectStorage, bindings: Bindings) -> None:
        self.storage = storage
        self.bindings = bindings

    async def initialize(self) -> None:
        """Create the schema; runs before any call is delivered."""
        create_schema(self.storage.sql)

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Dispatch one RPC. Public methods are listed in `RPC_METHODS`."""
        if method not in RPC_METHODS:
            raise UnknownMethodError(method)
        handler = getattr(self, f"rpc_{method}")
        result: dict[str, Any] = await handler(payload)
        return result

    async def rpc_ping(self, payload: dict[str, Any]) -> dict[str, Any]:
        row = self.storage.sql.exec("SELECT COUNT(*) AS n FROM turn_state").one()
        return {"ok": True, "instances": int(row["n"])}


RPC_METHODS = frozenset({"ping"})
