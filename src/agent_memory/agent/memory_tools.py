"""The long-term memory tools (ADR-0030) over semantic memory, for agents and MCP clients.

* `recall_memory` — `{query, top_k (1-20, default 5), filters?}` → `{"results": [...],
  "count": n}`; each result is a fact with its score and score breakdown.
* `store_memory` — `{content, metadata?}` → `{"stored": true}`. The metadata object (≤ 10
  KiB of JSON) is kept with the fact; its `subject`, `predicate`, `object` and
  `confidence` keys, when present, also set the fact's ADR-043 triple and confidence.
  If the vector write fails the fact is kept (pending) and the result adds
  `"pending": true`: it becomes recallable when the retry path completes it.

Three ways in, one implementation:

* agents: `long_term_tools(context)` gives the two tools to agents whose type has
  `long_term_enabled` (registered with the agent loop's `register_long_term_tools`);
  `semantic_prefetch` is the per-agent-type context-assembly option
  (`MemoryConfig.semantic_prefetch`, registered with `register_semantic_prefetch`);
* MCP / the tool gateway: `SemanticMemoryDispatcher` implements the gateway's
  `MemoryToolDispatcher` protocol (`call(tenant, tool_name, arguments)`).

`install()` registers the agent hooks; the edge calls it (worker.memory_wiring).
Bad arguments raise `MemoryInputError` (a `ValueError` with a stable `code` and the failing
fields) for the dispatcher, and `ToolError` carrying that JSON for agents; nothing is
written in either case.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_memory.agent.context import register_semantic_prefetch
from agent_memory.agent.retrieval_events import retrieval_config
from agent_memory.agent.tools import (
    FunctionTool,
    Tool,
    ToolContext,
    ToolError,
    register_long_term_tools,
)
from agent_memory.governance.agent_types import AgentType
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import (
    DEFAULT_TOP_K,
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    FactInput,
    MemoryInputError,
    RecallRequest,
    SemanticTierUnavailable,
    check_metadata,
)
from bindings.environment import Bindings

log = logging.getLogger(__name__)

RECALL_MEMORY = "recall_memory"
STORE_MEMORY = "store_memory"
MCP_AGENT_TYPE = "mcp"  # agent_type recorded for facts stored by MCP clients

RECALL_MEMORY_DESCRIPTION = (
    "Search the agent's long-term memory for entries matching a query. Returns the most "
    "semantically similar entries. Use this when you need to remember context from a "
    "previous interaction or session."
)
STORE_MEMORY_DESCRIPTION = (
    "Save a piece of information to long-term memory so it can be recalled in future turns "
    "or sessions. Use sparingly — only for facts, decisions, or context that is genuinely "
    "worth remembering."
)

# ADR-0030's input schemas; recall adds the optional `filters` of its MemoryQuery.
RECALL_MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "The search query. Specific, well-formed queries return better results.",
        },
        "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": DEFAULT_TOP_K},
        "filters": {
            "type": "object",
            "properties": {
                "agent_type": {"type": "string"},
                "subject": {"type": "string"},
                "predicate": {"type": "string"},
                "min_confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "as_of": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Epoch seconds: what was believed at that time.",
                },
                "valid_from_after": {
                    "type": "number",
                    "minimum": 0,
                    "description": "Epoch seconds: only memories dated at or after it.",
                },
                "valid_from_before": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Epoch seconds: only memories dated before it.",
                },
            },
            "additionalProperties": False,
        },
    },
    "required": ["query"],
}
STORE_MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT_CHARS},
        "metadata": {"type": "object", "additionalProperties": True},
    },
    "required": ["content"],
}

_TRIPLE_KEYS = ("subject", "predicate", "object", "confidence")

# Called after a store that created a fact: `fn(bindings, tenant)`. The edge installs the
# reconciler's write cadence here (`worker.lifecycle_jobs`); the agent room cannot import
# the lifecycle room, so the dependency is a hook, like the semantic prefetch.
WriteObserver = Callable[[Bindings, str], Awaitable[None]]
_WRITE_OBSERVERS: list[WriteObserver] = []


def register_write_observer(fn: WriteObserver | None) -> None:
    """Install (or with None, remove) the function told about every new fact."""
    _WRITE_OBSERVERS[:] = [fn] if fn is not None else []


def _observe_write(bindings: Bindings, tenant: str) -> None:
    """Tell the observers after the response (`waitUntil`): the write adds no latency, and
    a failing observer never fails it (the fact is stored)."""
    observers = list(_WRITE_OBSERVERS)
    if not observers:
        return

    async def run() -> None:
        for fn in observers:
            try:
                await fn(bindings, tenant)
            except Exception as exc:
                log.warning("write observer failed for tenant %s: %s", tenant, exc)

    bindings.background.wait_until(run())


class StoreMemoryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_metadata(value)


def _parse(model: type[BaseModel], arguments: Any, what: str) -> Any:
    if not isinstance(arguments, dict):
        raise MemoryInputError(
            f"{what} arguments must be a JSON object",
            [{"field": "(arguments)", "problem": "not an object"}],
        )
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        raise MemoryInputError.from_validation(exc, f"{what} arguments") from None


def _fact_from_store(args: StoreMemoryArgs, source: str) -> FactInput:
    fields: dict[str, Any] = {"content": args.content, "metadata": args.metadata, "source": source}
    for key in _TRIPLE_KEYS:
        if key in args.metadata:
            fields[key] = args.metadata[key]
    try:
        return FactInput.model_validate(fields)
    except ValidationError as exc:
        problems = MemoryInputError.from_validation(exc, "store_memory").problems
        for problem in problems:
            if problem["field"] in _TRIPLE_KEYS:
                problem["field"] = "metadata." + problem["field"]
        raise MemoryInputError("store_memory arguments failed validation", problems) from None


async def recall_memory(memory: SemanticMemory, arguments: Any) -> dict[str, Any]:
    """Run `recall_memory` against a tenant-bound memory."""
    request: RecallRequest = _parse(RecallRequest, arguments, RECALL_MEMORY)
    result = await memory.recall(request.query, request.top_k, request.filters)
    return {"results": [r.summary() for r in result.results], "count": len(result.results)}


async def store_memory(
    memory: SemanticMemory,
    arguments: Any,
    *,
    source: str = STORE_MEMORY,
    bindings: Bindings | None = None,
) -> tuple[dict[str, Any], str, str]:
    """Run `store_memory`; returns (tool result, fact id, status). With `bindings`, a new
    fact is reported to the write observer (the reconciler's write cadence)."""
    args: StoreMemoryArgs = _parse(StoreMemoryArgs, arguments, STORE_MEMORY)
    learned = await memory.learn(_fact_from_store(args, source))
    result: dict[str, Any] = {"stored": True}
    if learned.status == "pending_vector":
        result["pending"] = True
    if learned.created and bindings is not None:
        _observe_write(bindings, memory.tenant_id)
    return result, learned.fact_id, learned.status


# --------------------------------------------------------------------------- MCP gateway


class SemanticMemoryDispatcher:
    """The gateway's `MemoryToolDispatcher` backed by semantic memory.

    A fresh `SemanticMemory` is bound to the call's tenant for every call, so one
    dispatcher (per request) can never read across tenants.
    """

    def __init__(self, bindings: Bindings) -> None:
        self._bindings = bindings

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        memory = SemanticMemory.from_bindings(
            self._bindings,
            tenant,
            agent_type=MCP_AGENT_TYPE,
            config=retrieval_config(self._bindings),
        )
        if tool_name == RECALL_MEMORY:
            return await recall_memory(memory, arguments)
        if tool_name == STORE_MEMORY:
            result, _, _ = await store_memory(
                memory, arguments, source="mcp", bindings=self._bindings
            )
            return result
        raise MemoryInputError(f"unknown memory tool {tool_name!r}", code="unknown_tool")


# --------------------------------------------------------------------------- agents


def _memory_for(context: ToolContext) -> SemanticMemory:
    try:
        return SemanticMemory.from_bindings(
            context.bindings,
            context.tenant,
            agent_type=context.agent_type.name,
            run_id=context.run_id,
            config=retrieval_config(context.bindings),
        )
    except SemanticTierUnavailable as exc:
        raise ToolError(f"long-term memory is not available: {exc}") from None


def _tool_error(exc: MemoryInputError) -> ToolError:
    return ToolError(json.dumps(exc.to_dict(), ensure_ascii=False))


async def _recall_tool(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    memory = _memory_for(context)
    try:
        result = await recall_memory(memory, arguments)
    except MemoryInputError as exc:
        raise _tool_error(exc) from None
    context.log_step(
        "memory_read",
        {
            "tier": "semantic",
            "op": "recall",
            "fact_ids": [r["id"] for r in result["results"]],
            "scores": [r["score"] for r in result["results"]],
        },
    )
    return result


async def _store_tool(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    memory = _memory_for(context)
    try:
        result, fact_id, status = await store_memory(memory, arguments, bindings=context.bindings)
    except MemoryInputError as exc:
        raise _tool_error(exc) from None
    context.log_step(
        "memory_write",
        {"tier": "semantic", "op": "store", "fact_id": fact_id, "status": status},
    )
    return result


LONG_TERM_TOOLS: tuple[FunctionTool, ...] = (
    FunctionTool(
        name=RECALL_MEMORY,
        description=RECALL_MEMORY_DESCRIPTION,
        parameters=RECALL_MEMORY_SCHEMA,
        function=_recall_tool,
    ),
    FunctionTool(
        name=STORE_MEMORY,
        description=STORE_MEMORY_DESCRIPTION,
        parameters=STORE_MEMORY_SCHEMA,
        function=_store_tool,
    ),
)


def long_term_tools(context: ToolContext) -> list[Tool]:
    """The tools the platform adds for `long_term_enabled` agents (ADR-0030)."""
    if context.bindings.db is None or context.bindings.vectors is None:
        return []
    return list(LONG_TERM_TOOLS)


async def semantic_prefetch(
    bindings: Bindings, tenant: str, agent_type: AgentType, text: str, top_k: int
) -> list[dict[str, Any]]:
    """Context assembly: the top facts for the turn input (agent types with
    `semantic_prefetch`). Best effort: a failure is logged and gives no facts, since the
    agent can still call `recall_memory` itself."""
    query = text.strip()[:MAX_QUERY_CHARS]
    if not query or bindings.db is None or bindings.vectors is None or bindings.embedder is None:
        return []
    try:
        memory = SemanticMemory.from_bindings(
            bindings, tenant, agent_type=agent_type.name, config=retrieval_config(bindings)
        )
        result = await memory.recall(query, max(1, min(top_k, MAX_TOP_K)))
    except Exception as exc:
        log.warning("semantic prefetch failed for tenant %s: %s", tenant, exc)
        return []
    return [r.summary() for r in result.results]


def install() -> None:
    """Register the agent tools and the prefetch with the agent loop (idempotent)."""
    register_long_term_tools(long_term_tools)
    register_semantic_prefetch(semantic_prefetch)
