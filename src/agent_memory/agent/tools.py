"""Tools an agent can call during a turn, and `platform_tools`, the one place that decides
a turn's tools: the working-memory tools its type lists (when it has working memory) and
`recall_memory` / `store_memory` for `long_term_enabled` types (ADR-0030) when the
deployment has the semantic tier. A tool raises `ToolError` for a problem the model should
see (its message goes back to the model, the turn goes on); any other exception fails the
turn.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_memory.agent.memory_tools import MEMORY_TOOLS, run_memory_tool
from agent_memory.governance.agent_types import AgentType
from agent_memory.memory import Memory
from agent_memory.retrieval.scoring import RankItem
from agent_memory.tiers.semantic.models import MemoryInputError
from agent_memory.tiers.working import WorkingMemory, WorkingMemoryError
from bindings.ports.llm import ToolSpec

# kind is one of the run_log kinds: "memory_read" / "memory_write" for tier access.
StepLogger = Callable[[str, dict[str, Any]], None]


class ToolError(Exception):
    """A problem the model should be told about (bad arguments, over budget...)."""


@dataclass
class ToolContext:
    """What a tool may use: the turn's scope, the tenant's memory, and the run log."""

    agent_type: AgentType
    instance_id: str
    run_id: str
    memory: Memory
    working: WorkingMemory | None
    log_step: StepLogger = field(default=lambda kind, detail: None)


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    """A tool: its name, description and JSON schema of its arguments, and its function."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: ToolFunction

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        try:
            return await self.function(arguments, context)
        except WorkingMemoryError as exc:
            raise ToolError(str(exc)) from None

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


# --- working memory ------------------------------------------------------------------


def _working(context: ToolContext) -> WorkingMemory:
    if context.working is None:
        raise ToolError("working memory is not available to this agent")
    return context.working


def _key(arguments: dict[str, Any]) -> str:
    key = arguments.get("key")
    if not isinstance(key, str):
        raise ToolError("argument 'key' must be a string")
    return key


async def _wm_get(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    key = _key(arguments)
    found = await _working(context).read(key)
    context.log_step(
        "memory_read", {"tier": "working", "op": "get", "key": key, "found": found is not None}
    )
    if found is None:
        return {"key": key, "found": False, "value": None}
    # Scored with working memory's weights and recorded as `memory_retrieved`, like the
    # turn-start snapshot (the key is the query: an exact lookup is fully relevant).
    text = f"{found.key} {json.dumps(found.value, ensure_ascii=False)}"
    item = RankItem(id=found.key, text=text, written_at=found.written_at or 0.0, confidence=1.0)
    context.memory.rank("working", found.key, [item], pool=1, agent_type=context.agent_type.name)
    return {"key": key, "found": True, "value": found.value}


async def _wm_set(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    key = _key(arguments)
    if "value" not in arguments:
        raise ToolError("argument 'value' is required")
    try:
        write = await _working(context).set(key, arguments["value"])
    except WorkingMemoryError as exc:
        context.log_step("error", {"tier": "working", "op": "set", "key": key, "error": str(exc)})
        raise
    context.log_step("memory_write", {"tier": "working", "op": "set", **write.model_dump()})
    return {"stored": True, **write.model_dump()}


async def _wm_delete(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    key = _key(arguments)
    await _working(context).delete(key)
    context.log_step("memory_write", {"tier": "working", "op": "delete", "key": key})
    return {"deleted": True, "key": key}


async def _wm_list(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    working = _working(context)
    entries = await working.entries()
    context.log_step("memory_read", {"tier": "working", "op": "list", "keys": len(entries)})
    return {
        "keys": [entry.key for entry in entries],
        "used_bytes": sum(entry.bytes for entry in entries),
        "budget_bytes": working.budget_bytes,
    }


_KEY_SCHEMA = {
    "type": "string",
    "description": "Key: segments of letters, digits and . _ @ + - separated by ':'",
}

WORKING_MEMORY_TOOL_SET: tuple[Tool, ...] = (
    Tool(
        name="working_memory_get",
        description="Read a value from this agent instance's working memory (1 h TTL).",
        parameters={"type": "object", "properties": {"key": _KEY_SCHEMA}, "required": ["key"]},
        function=_wm_get,
    ),
    Tool(
        name="working_memory_set",
        description=(
            "Store a small JSON value in this agent instance's working memory for the next "
            "hour (128 KB per instance in total)."
        ),
        parameters={
            "type": "object",
            "properties": {"key": _KEY_SCHEMA, "value": {"description": "any JSON value"}},
            "required": ["key", "value"],
        },
        function=_wm_set,
    ),
    Tool(
        name="working_memory_delete",
        description="Delete a key from this agent instance's working memory.",
        parameters={"type": "object", "properties": {"key": _KEY_SCHEMA}, "required": ["key"]},
        function=_wm_delete,
    ),
    Tool(
        name="working_memory_list",
        description="List the keys in this agent instance's working memory and the bytes used.",
        parameters={"type": "object", "properties": {}},
        function=_wm_list,
    ),
)


# --- long-term memory -----------------------------------------------------------------


def _memory_tool(name: str) -> Tool:
    tool = MEMORY_TOOLS[name]

    async def call(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        try:
            result, logged = await run_memory_tool(
                context.memory,
                name,
                arguments,
                agent_type=context.agent_type.name,
                run_id=context.run_id,
            )
        except MemoryInputError as exc:
            raise ToolError(json.dumps(exc.to_dict(), ensure_ascii=False)) from None
        context.log_step("memory_read" if logged["op"] == "recall" else "memory_write", logged)
        return result

    return Tool(tool.name, tool.description, tool.input_schema(), call)


def platform_tools(agent_type: AgentType, context: ToolContext) -> list[Tool]:
    """Every tool the agent may call this turn."""
    tools: list[Tool] = []
    if agent_type.memory.working_memory and context.working is not None:
        tools.extend(t for t in WORKING_MEMORY_TOOL_SET if t.name in agent_type.tools)
    if agent_type.memory.long_term_enabled and context.memory.has_semantic:
        tools.extend(_memory_tool(name) for name in MEMORY_TOOLS)
    return tools
