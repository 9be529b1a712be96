"""The long-term memory tools (ADR-0030), defined once: `recall_memory` and `store_memory`.

Each tool's arguments are one pydantic model (`RecallRequest`, `StoreMemory`): its JSON
schema is both the MCP `inputSchema` and what an agent's model is offered, and every call is
validated with it. `run_memory_tool` runs one against a tenant's `Memory` for agents and
for MCP clients (`McpMemoryTools`, the gateway's `MemoryToolDispatcher`). `store_memory`'s
metadata (≤ 10 KiB of JSON) is kept with the fact; its `subject`, `predicate`, `object` and
`confidence` keys also set the fact's triple. Bad arguments raise `MemoryInputError` (a
stable `code` and the failing fields); nothing is written then.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_memory.directory import note_fenced
from agent_memory.tiers.semantic.models import (
    MAX_CONTENT_CHARS,
    FactInput,
    MemoryInputError,
    RecallRequest,
    check_metadata,
)
from bindings.ports.d1 import D1Error, met_fence

if TYPE_CHECKING:
    from agent_memory.memory import Memory
    from bindings.environment import Bindings

RECALL_MEMORY = "recall_memory"
STORE_MEMORY = "store_memory"
MCP_AGENT_TYPE = "mcp"  # agent_type recorded for facts stored by MCP clients
_TRIPLE_KEYS = ("subject", "predicate", "object", "confidence")


class StoreMemory(BaseModel):
    """`store_memory`'s arguments."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_metadata(value)


@dataclass(frozen=True)
class MemoryTool:
    name: str
    title: str
    description: str
    arguments: type[BaseModel]
    # MCP tool annotations: recall only reads; a store adds (a superseded fact can be restored).
    read_only: bool

    def input_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema, self-contained (definitions inlined, no titles):
        what MCP clients and models are given."""
        return _inline(self.arguments.model_json_schema())

    def mcp_tool(self) -> dict[str, Any]:
        """This tool as an MCP `Tool` object (tools/list), with its title and annotations."""
        hints = {"readOnlyHint": self.read_only, "destructiveHint": False}
        hints |= {"idempotentHint": self.read_only, "openWorldHint": False}
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema(),
            "annotations": hints,
        }


MEMORY_TOOLS: dict[str, MemoryTool] = {
    RECALL_MEMORY: MemoryTool(
        RECALL_MEMORY,
        "Recall memory",
        "Search the agent's long-term memory for entries matching a query. Returns the most "
        "semantically similar entries. Use this when you need to remember context from a "
        "previous interaction or session.",
        RecallRequest,
        read_only=True,
    ),
    STORE_MEMORY: MemoryTool(
        STORE_MEMORY,
        "Store memory",
        "Save a piece of information to long-term memory so it can be recalled in future "
        "turns or sessions. Use sparingly — only for facts, decisions, or context that is "
        "genuinely worth remembering.",
        StoreMemory,
        read_only=False,
    ),
}


def parse_arguments(name: str, arguments: Any) -> BaseModel:
    """The validated arguments of tool `name`, or `MemoryInputError` (nothing ran)."""
    tool = MEMORY_TOOLS.get(name)
    if tool is None:
        raise MemoryInputError(f"unknown memory tool {name!r}", code="unknown_tool")
    if not isinstance(arguments, Mapping):
        raise MemoryInputError(
            f"{name} arguments must be a JSON object",
            [{"field": "(arguments)", "problem": "not an object"}],
        )
    try:
        return tool.arguments.model_validate(arguments)
    except ValidationError as exc:
        raise MemoryInputError.from_validation(exc, f"{name} arguments") from None


async def run_memory_tool(
    memory: Memory,
    name: str,
    arguments: Any,
    *,
    agent_type: str,
    run_id: str | None = None,
    source: str = STORE_MEMORY,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run a memory tool as `agent_type`; returns (the tool's result, what the run log
    records of it: fact ids and scores, never content)."""
    args = parse_arguments(name, arguments)
    semantic = memory.semantic(agent_type=agent_type, run_id=run_id)
    if isinstance(args, RecallRequest):
        recalled = await semantic.recall(args.query, args.top_k, args.filters)
        results = [r.summary() for r in recalled.results]
        logged = {
            "tier": "semantic",
            "op": "recall",
            "fact_ids": [r["id"] for r in results],
            "scores": [r["score"] for r in results],
        }
        return {"results": results, "count": len(results)}, logged
    assert isinstance(args, StoreMemory)
    learned = await semantic.learn(_fact(args, source))
    result: dict[str, Any] = {"stored": True}
    if learned.status == "pending_vector":
        result["pending"] = True
    if learned.created:
        await memory.note_new_facts()
    logged = {
        "tier": "semantic",
        "op": "store",
        "fact_id": learned.fact_id,
        "status": learned.status,
    }
    return result, logged


class McpMemoryTools:
    """The memory tools as the gateway's MCP server offers them (its `MemoryToolDispatcher`):
    a `Memory` is built for the call's tenant on every call, so one instance can never read
    across tenants."""

    def __init__(self, bindings: Bindings) -> None:
        self._bindings = bindings

    def specs(self) -> list[dict[str, Any]]:
        return [t.mcp_tool() for t in MEMORY_TOOLS.values()]

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from agent_memory.memory import Memory

        try:
            result, _ = await run_memory_tool(
                await Memory.open(self._bindings, tenant),
                tool_name,
                arguments,
                agent_type=MCP_AGENT_TYPE,
                source="mcp",
            )
        except D1Error as exc:
            if not met_fence(exc):
                raise
            moving = note_fenced(self._bindings.clock.now())  # nothing was written
            raise MemoryInputError(moving.message, code=moving.code) from None
        return result


def _fact(args: StoreMemory, source: str) -> FactInput:
    fields: dict[str, Any] = {"content": args.content, "metadata": args.metadata, "source": source}
    for key in _TRIPLE_KEYS:
        if key in args.metadata:
            fields[key] = args.metadata[key]
    try:
        return FactInput.model_validate(fields)
    except ValidationError as exc:
        problems = MemoryInputError.from_validation(exc, STORE_MEMORY).problems
        for problem in problems:
            if problem["field"] in _TRIPLE_KEYS:
                problem["field"] = "metadata." + problem["field"]
        raise MemoryInputError("store_memory arguments failed validation", problems) from None


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` references replaced by the definitions and `title`s
    dropped (models and older clients read a self-contained schema more reliably)."""
    definitions = schema.get("$defs", {})

    def walk(node: Any, names: bool = False) -> Any:
        # `names`: the keys of this object are property names, not schema keywords.
        if isinstance(node, dict):
            ref = node.get("$ref")
            if not names and isinstance(ref, str) and ref.startswith("#/$defs/"):
                merged = {**copy.deepcopy(definitions[ref.removeprefix("#/$defs/")]), **node}
                merged.pop("$ref")
                return walk(merged)
            return {
                k: walk(v, names=not names and k == "properties")
                for k, v in node.items()
                if names or k not in {"$defs", "title"}
            }
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    inlined: dict[str, Any] = walk(schema)
    return inlined
