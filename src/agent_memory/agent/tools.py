"""Tools an agent can call during a turn, and the hook that decides which ones it gets.

A `Tool` has a name, a description, a JSON schema for its arguments and
`async call(arguments, context) -> dict`. The agent loop offers every tool's spec to the
model, runs the calls the model makes, and feeds each result back as a `tool` message. A
tool signals a problem the model should see by raising `ToolError` (its message goes
back to the model, the turn goes on); any other exception fails the turn.

`platform_tools(agent_type, context)` is the single place that decides a turn's tools:

* working-memory tools, when `agent_type.memory.working_memory` and the agent type lists
  them in `tools`;
* the long-term (semantic) memory tools, added automatically when
  `agent_type.memory.long_term_enabled` (ADR-0030), from the factories registered with
  `register_long_term_tools` — the semantic tier registers `recall_memory` /
  `store_memory` there; with none registered, the agent simply has no long-term tools.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_memory.agent.retrieval_events import record_retrieval, retrieval_config
from agent_memory.governance.agent_types import AgentType
from agent_memory.retrieval.scoring import RankItem, rank
from agent_memory.tiers.working import WorkingMemory, WorkingMemoryError, WorkingRead
from bindings.environment import Bindings
from bindings.ports.llm import ToolSpec

# kind is one of the run_log kinds: "memory_read" / "memory_write" for tier access.
StepLogger = Callable[[str, dict[str, Any]], None]


class ToolError(Exception):
    """A problem the model should be told about (bad arguments, over budget...)."""


@dataclass
class ToolContext:
    """What a tool may use: the turn's scope, the bindings, and the run log."""

    tenant: str
    agent_type: AgentType
    instance_id: str
    run_id: str
    bindings: Bindings
    working: WorkingMemory | None
    log_step: StepLogger = field(default=lambda kind, detail: None)


class Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments object."""
        ...

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]: ...


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class FunctionTool:
    """A `Tool` made of a schema and an async function."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: ToolFunction

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return await self.function(arguments, context)


def tool_spec(tool: Tool) -> ToolSpec:
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters)


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
    try:
        found = await _working(context).read(key)
    except WorkingMemoryError as exc:
        raise ToolError(str(exc)) from None
    context.log_step(
        "memory_read", {"tier": "working", "op": "get", "key": key, "found": found is not None}
    )
    if found is None:
        return {"key": key, "found": False, "value": None}
    _record_get(found, context)
    return {"key": key, "found": True, "value": found.value}


def _record_get(found: WorkingRead, context: ToolContext) -> None:
    """Score the read with working memory's weights and record it as `memory_retrieved`,
    like the turn-start snapshot (the key is the query: an exact lookup is fully relevant)."""
    now = context.bindings.clock.now()
    item = RankItem(
        id=found.key,
        text=f"{found.key} {json.dumps(found.value, ensure_ascii=False)}",
        written_at=found.written_at if found.written_at is not None else 0.0,
        confidence=1.0,
    )
    weights = retrieval_config(context.bindings).weights_for("working")
    ranked = rank(found.key, [item], weights, now)
    record_retrieval(
        context.bindings,
        context.tenant,
        "working",
        found.key,
        ranked,
        context.agent_type.name,
        now,
        1,
    )


async def _wm_set(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    key = _key(arguments)
    if "value" not in arguments:
        raise ToolError("argument 'value' is required")
    try:
        write = await _working(context).set(key, arguments["value"])
    except WorkingMemoryError as exc:
        context.log_step("error", {"tier": "working", "op": "set", "key": key, "error": str(exc)})
        raise ToolError(str(exc)) from None
    context.log_step("memory_write", {"tier": "working", "op": "set", **write.model_dump()})
    return {"stored": True, **write.model_dump()}


async def _wm_delete(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    key = _key(arguments)
    try:
        await _working(context).delete(key)
    except WorkingMemoryError as exc:
        raise ToolError(str(exc)) from None
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

WORKING_MEMORY_TOOL_SET: tuple[FunctionTool, ...] = (
    FunctionTool(
        name="working_memory_get",
        description="Read a value from this agent instance's working memory (1 h TTL).",
        parameters={"type": "object", "properties": {"key": _KEY_SCHEMA}, "required": ["key"]},
        function=_wm_get,
    ),
    FunctionTool(
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
    FunctionTool(
        name="working_memory_delete",
        description="Delete a key from this agent instance's working memory.",
        parameters={"type": "object", "properties": {"key": _KEY_SCHEMA}, "required": ["key"]},
        function=_wm_delete,
    ),
    FunctionTool(
        name="working_memory_list",
        description="List the keys in this agent instance's working memory and the bytes used.",
        parameters={"type": "object", "properties": {}},
        function=_wm_list,
    ),
)


# --- the hook ------------------------------------------------------------------------

LongTermToolFactory = Callable[[ToolContext], Sequence[Tool]]
_LONG_TERM_FACTORIES: list[LongTermToolFactory] = []


def register_long_term_tools(factory: LongTermToolFactory) -> None:
    """Register a factory of long-term memory tools (the semantic tier calls this once).

    The factory receives the turn's `ToolContext` (tenant, agent type, instance, run,
    bindings) and returns the tools to add for agents with `long_term_enabled`.
    Registering the same factory twice has no effect.
    """
    if factory not in _LONG_TERM_FACTORIES:
        _LONG_TERM_FACTORIES.append(factory)


def platform_tools(agent_type: AgentType, context: ToolContext) -> list[Tool]:
    """Every tool the agent may call this turn (names unique; first definition wins)."""
    tools: list[Tool] = []
    if agent_type.memory.working_memory and context.working is not None:
        tools.extend(t for t in WORKING_MEMORY_TOOL_SET if t.name in agent_type.tools)
    if agent_type.memory.long_term_enabled:
        for factory in _LONG_TERM_FACTORIES:
            tools.extend(factory(context))
    unique: dict[str, Tool] = {}
    for tool in tools:
        unique.setdefault(tool.name, tool)
    return list(unique.values())
