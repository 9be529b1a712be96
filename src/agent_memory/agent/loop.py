"""The agent loop: model call → tool calls → model call … until an answer or a limit.

`run_agent_loop` never raises for these outcomes; it returns a `LoopOutcome`:
* one step is one model call, at most `step_limit`; still asking for tools after the last
  fails with `step_limit_exceeded`; the whole loop runs under `timeout_seconds`
  (`timeout`);
* each model call and tool call is logged (`log_step`) as it happens, so the run log is
  complete even for a turn that fails half-way;
* a `ToolError` (or a tool the agent does not have) goes back to the model as the tool's
  result `{"error": …}`; `LLMError` fails the turn (`llm_error`), any other tool exception
  too (`tool_failed`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.agent.tools import StepLogger, Tool, ToolContext, ToolError
from bindings.ports.llm import LLM, ChatMessage, LLMError

log = logging.getLogger(__name__)

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


def _preview(value: Any) -> str:
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
            return progress.end(
                status="failed",
                failure_code="step_limit_exceeded",
                failure_message=(
                    f"the model was still calling tools after {step_limit} steps (the limit)"
                ),
            )
        progress.steps += 1
        step = progress.steps
        try:
            result = await llm.chat(messages, specs)
        except LLMError as exc:
            log_step("llm_call", {"llm_step": step, "model": llm.model, "error": str(exc)})
            return progress.end(status="failed", failure_code="llm_error", failure_message=str(exc))
        reply = result.message
        log_step(
            "llm_call",
            {
                "llm_step": step,
                "model": result.model,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "tool_calls": [call.name for call in reply.tool_calls],
                "content": _preview(reply.content),
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
                "arguments": _preview(call.arguments),
            }
            try:
                if tool is None:
                    raise ToolError(f"no tool named {call.name!r} is available to this agent")
                output = await tool.call(dict(call.arguments), context)
                detail.update(ok=True, result=_preview(output))
            except ToolError as exc:
                output = {"error": str(exc)}
                detail.update(ok=False, error=str(exc))
            except Exception as exc:
                log.exception("tool %s failed", call.name)
                detail.update(ok=False, error=f"{type(exc).__name__}: {exc}")
                log_step("tool_call", detail)
                return progress.end(
                    status="failed",
                    failure_code="tool_failed",
                    failure_message=f"tool {call.name} failed: {type(exc).__name__}: {exc}",
                )
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
        return progress.end(
            status="failed",
            failure_code="timeout",
            failure_message=f"the turn did not finish within {timeout_seconds:g} s",
        )
