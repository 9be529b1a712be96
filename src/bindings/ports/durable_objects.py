"""Durable Object namespace port: how the agent-run path reaches the AgentRuntime, by RPC."""

from __future__ import annotations

from typing import Any, Protocol


class DurableObjectStub(Protocol):
    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]: ...


class DurableObjectNamespace(Protocol):
    def get_by_name(self, name: str) -> DurableObjectStub: ...
