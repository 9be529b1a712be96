"""Durable Object namespace port: how the agent-run path (and only it; tests enforce that)
reaches the AgentRuntime, by RPC: a method name and a JSON-able payload, a JSON-able result."""

from __future__ import annotations

from typing import Any, Protocol


class DurableObjectStub(Protocol):
    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Invoke public method `method` of the object with one dict argument."""


class DurableObjectNamespace(Protocol):
    def get_by_name(self, name: str) -> DurableObjectStub:
        """The stub of the object named `name` (created on first use)."""
