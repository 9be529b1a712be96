"""One agent turn over a tenant's `Memory`: the context it starts from, its tools, the loop
(docs/agent-runtime.md, "What a turn does" and "Agent types and tools").

* Context (`TurnContext`, `render_context`: one system message): working memory and the newest
  `EPISODE_POOL_FACTOR` times `recent_episodes` episodes, scored like semantic recall with their
  tier's weights (ADR-0051); each read emits `memory_retrieved` in the background. Semantic
  prefetch is best effort: a failure gives no facts.
* Tools: `ToolError` is for a problem the model should see (it gets `{"error": …}` and the turn
  goes on); any other exception fails the turn (`tool_failed`).
* The loop (`run_agent_loop`, never raises for these; returns a `LoopOutcome`): at most
  `step_limit` model calls (`step_limit_exceeded`), within `timeout_seconds` (`timeout`);
  `LLMError` fails it (`llm_error`). Each model and tool call is logged as it happens, so the
  run log is complete even for a turn that fails half-way.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.agent.memory_tools import MEMORY_TOOLS, run_memory_tool
from agent_memory.governance.agent_types import AgentType, WorkflowSpec
from agent_memory.memory import Memory
from agent_memory.retrieval import RankItem
from agent_memory.tiers.episodic import Episode
from agent_memory.tiers.semantic.models import MAX_QUERY_CHARS, MAX_TOP_K, MemoryInputError
from agent_memory.tiers.working import WorkingMemory, WorkingMemoryError
from bindings.ports.llm import LLM, ChatMessage, LLMError, ToolSpec

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


EPISODE_PREVIEW_CHARS = 400

WORKING_PREVIEW_CHARS = 2_000

CONTEXT_HEADER = "# Context for this turn"

EPISODES_HEADER = "## Recent episodes (newest first)"

EPISODE_LINE_PREFIX = "- [episode "

# Episodes scored at turn start: this many times the agent type's `recent_episodes`.
EPISODE_POOL_FACTOR = 4

MAX_EPISODE_POOL = 100


log = logging.getLogger(__name__)


class TurnContext(BaseModel):
    turn_state: dict[str, Any] = Field(default_factory=dict)
    working_memory: dict[str, Any] = Field(default_factory=dict)
    episodes: list[Episode] = Field(default_factory=list)
    facts: list[dict[str, Any]] = Field(default_factory=list)
    workflow: WorkflowSpec | None = None

    @property
    def episode_ids(self) -> list[str]:
        return [episode.episode_id for episode in self.episodes]


async def assemble_context(
    memory: Memory,
    *,
    agent_type: AgentType,
    turn_state: dict[str, Any],
    working: WorkingMemory | None,
    input_text: str = "",
) -> TurnContext:
    """Read working memory, recent episodes (and prefetched facts) concurrently; score the
    first two with their tier's weights and record what was retrieved."""
    config = agent_type.memory

    async def working_snapshot() -> dict[str, Any]:
        if working is None or not config.working_memory:
            return {}
        entries = await working.entries()
        values = await working.snapshot(entries)
        items = [
            RankItem(
                id=entry.key,
                text=f"{entry.key} {json.dumps(values[entry.key], ensure_ascii=False)}",
                # KV keeps the expiry, not the write time: written = expiry - TTL.
                written_at=float(entry.expiration - working.ttl_seconds)
                if entry.expiration
                else 0.0,
                confidence=1.0,
            )
            for entry in entries
            if entry.key in values
        ]
        ranked = memory.rank(
            "working", input_text, items, pool=len(items), agent_type=agent_type.name
        )
        return {r.item.id: values[r.item.id] for r in ranked}

    async def recent() -> list[Episode]:
        if config.recent_episodes == 0:
            return []
        wanted = config.recent_episodes
        pool = await memory.episodic.recent_episodes(
            agent_type.name, min(MAX_EPISODE_POOL, max(wanted, wanted * EPISODE_POOL_FACTOR))
        )
        by_id = {e.episode_id: e for e in pool}
        items = [
            RankItem(
                id=e.episode_id,
                text=e.content,
                written_at=e.created_at / 1000.0,
                confidence=e.importance,
            )
            for e in pool
        ]
        ranked = memory.rank(
            "episodic", input_text, items, pool=len(items), top_k=wanted, agent_type=agent_type.name
        )
        chosen = (by_id[r.item.id] for r in ranked)
        return sorted(chosen, key=lambda e: (e.created_at, e.episode_id), reverse=True)

    async def facts() -> list[dict[str, Any]]:
        query = input_text.strip()[:MAX_QUERY_CHARS]
        if not (config.semantic_prefetch and query and memory.has_semantic):
            return []
        try:
            semantic = memory.semantic(agent_type=agent_type.name)
            result = await semantic.recall(query, max(1, min(config.semantic_top_k, MAX_TOP_K)))
        except Exception as exc:
            log.warning("semantic prefetch failed for tenant %s: %s", memory.tenant, exc)
            return []
        return [r.summary() for r in result.results]

    snapshot, episodes, found = await asyncio.gather(working_snapshot(), recent(), facts())
    return TurnContext(
        turn_state=turn_state, working_memory=snapshot, episodes=episodes, facts=found
    )


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())  # one line per item keeps the sections readable
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_context(context: TurnContext) -> str:
    """The context as one message: stable headings a model (or a test double) can read."""
    lines = [CONTEXT_HEADER]
    state = context.turn_state
    if state:
        lines.append(
            f"Instance turn {state.get('turn_count', 0)}; previous run "
            f"{state.get('last_run_id') or 'none'} ({state.get('last_status') or 'n/a'})."
        )
    if context.workflow is not None:
        lines += ["## Workflow for this task", context.workflow.instructions]
    lines.append("## Working memory")
    if context.working_memory:
        for key, value in context.working_memory.items():
            encoded = json.dumps(value, ensure_ascii=False)
            lines.append(f"- {key} = {_preview(encoded, WORKING_PREVIEW_CHARS)}")
    else:
        lines.append("(empty)")
    lines.append(EPISODES_HEADER)
    if context.episodes:
        for episode in context.episodes:
            lines.append(
                f"{EPISODE_LINE_PREFIX}{episode.episode_id} run {episode.run_id} "
                f"{episode.kind}] {_preview(episode.content, EPISODE_PREVIEW_CHARS)}"
            )
    else:
        lines.append("(none)")
    if context.facts:
        lines.append("## Known facts")
        for fact in context.facts:
            lines.append(f"- {_preview(str(fact.get('content', fact)), EPISODE_PREVIEW_CHARS)}")
    return "\n".join(lines)


FailureCode = Literal[
    "step_limit_exceeded", "timeout", "llm_error", "tool_failed", "internal_error"
]

PREVIEW_CHARS = 500


class LoopOutcome(BaseModel):
    status: Literal["completed", "failed"]
    output: str = ""
    steps: int = 0
    tool_calls: int = 0
    tools_used: list[str] = Field(default_factory=list)
    failure_code: FailureCode | None = None
    failure_message: str | None = None

    def end(self, **fields: Any) -> LoopOutcome:
        return self.model_copy(update=fields)

    def failed(self, code: FailureCode, message: str) -> LoopOutcome:
        return self.end(status="failed", failure_code=code, failure_message=message)


def _log_preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


async def _loop(
    llm: LLM,
    messages: list[ChatMessage],
    tools: Sequence[Tool],
    context: ToolContext,
    step_limit: int,
    log_step: StepLogger,
    progress: LoopOutcome,
) -> LoopOutcome:
    """Runs the loop, counting in `progress` (readable after a timeout cancels it)."""
    by_name = {tool.name: tool for tool in tools}
    specs = [tool.spec() for tool in tools]
    while True:
        if progress.steps >= step_limit:
            message = f"the model was still calling tools after {step_limit} steps (the limit)"
            return progress.failed("step_limit_exceeded", message)
        progress.steps += 1
        step = progress.steps
        try:
            result = await llm.chat(messages, specs)
        except LLMError as exc:
            log_step("llm_call", {"llm_step": step, "model": llm.model, "error": str(exc)})
            return progress.failed("llm_error", str(exc))
        reply = result.message
        log_step(
            "llm_call",
            {
                "llm_step": step,
                "model": result.model,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "tool_calls": [call.name for call in reply.tool_calls],
                "content": _log_preview(reply.content),
            },
        )
        messages.append(reply)
        if not reply.tool_calls:
            return progress.end(status="completed", output=reply.content)
        for call in reply.tool_calls:
            progress.tool_calls += 1
            if call.name not in progress.tools_used:
                progress.tools_used.append(call.name)
            tool = by_name.get(call.name)
            detail: dict[str, Any] = {
                "llm_step": step,
                "tool": call.name,
                "call_id": call.id,
                "arguments": _log_preview(call.arguments),
            }
            try:
                if tool is None:
                    raise ToolError(f"no tool named {call.name!r} is available to this agent")
                output = await tool.call(dict(call.arguments), context)
                detail.update(ok=True, result=_log_preview(output))
            except ToolError as exc:
                output = {"error": str(exc)}
                detail.update(ok=False, error=str(exc))
            except Exception as exc:
                log.exception("tool %s failed", call.name)
                detail.update(ok=False, error=f"{type(exc).__name__}: {exc}")
                log_step("tool_call", detail)
                message = f"tool {call.name} failed: {type(exc).__name__}: {exc}"
                return progress.failed("tool_failed", message)
            log_step("tool_call", detail)
            messages.append(
                ChatMessage(
                    role="tool",
                    tool_call_id=call.id,
                    name=call.name,
                    content=json.dumps(output, ensure_ascii=False, default=str),
                )
            )


async def run_agent_loop(
    llm: LLM,
    messages: Sequence[ChatMessage],
    tools: Sequence[Tool],
    context: ToolContext,
    *,
    step_limit: int,
    timeout_seconds: float,
    log_step: StepLogger,
) -> LoopOutcome:
    """Run the loop over a copy of `messages` (the contract: the module docstring)."""
    progress = LoopOutcome(status="failed")
    conversation = list(messages)
    try:
        return await asyncio.wait_for(
            _loop(llm, conversation, tools, context, step_limit, log_step, progress),
            timeout_seconds,
        )
    except TimeoutError:
        return progress.failed("timeout", f"the turn did not finish within {timeout_seconds:g} s")
