"""The agent loop: model call → tool calls → model call … until an answer or a limit.

Contract of `run_agent_loop`:

* one *step* is one model call; at most `step_limit` steps. If the model still asks for
  tools after the last allowed step the turn fails with `step_limit_exceeded`;
* the whole loop runs under `timeout_seconds` (wall clock, `asyncio.wait_for`); when it
  passes the turn fails with `timeout`;
* every model call is reported through `log_step("llm_call", …)` and every tool call
  through `log_step("tool_call", …)` as it happens, so the run log is complete even for
  a turn that fails half-way;
* a `ToolError` (or a call to a tool the agent does not have) is shown to the model as the
  tool's result `{"error": …}` and the loop goes on; `LLMError` fails the turn with
  `llm_error`; any other exception from a tool fails it with `tool_failed`.

It never raises for those outcomes: it returns a `LoopOutcome`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.agent.tools import StepLogger, Tool, ToolContext, ToolError, tool_spec
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
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


class _Progress:
    """Counters the loop updates as it goes, readable after a timeout cancels it."""

    def __init__(self) -> None:
        self.steps = 0
        self.tool_calls = 0
        self.tools_used: list[str] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def outcome(self, **fields: Any) -> LoopOutcome:
        return LoopOutcome(
            steps=self.steps,
            tool_calls=self.tool_calls,
            tools_used=self.tools_used,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            **fields,
        )


async def _loop(
    llm: LLM,
    messages: list[ChatMessage],
    tools: Sequence[Tool],
    context: ToolContext,
    step_limit: int,
    log_step: StepLogger,
    progress: _Progress,
) -> LoopOutcome:
    by_name = {tool.name: tool for tool in tools}
    specs = [tool_spec(tool) for tool in tools]
    while True:
        if progress.steps >= step_limit:
            return progress.outcome(
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
            return progress.outcome(
                status="failed", failure_code="llm_error", failure_message=str(exc)
            )
        reply = result.message
        progress.prompt_tokens += result.prompt_tokens
        progress.completion_tokens += result.completion_tokens
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
            return progress.outcome(status="completed", output=reply.content)
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
                return progress.outcome(
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
    """Run the loop over a copy of `messages`; see the module docstring for the contract."""
    progress = _Progress()
    conversation = list(messages)
    try:
        return await asyncio.wait_for(
            _loop(llm, conversation, tools, context, step_limit, log_step, progress),
            timeout_seconds,
        )
    except TimeoutError:
        return progress.outcome(
            status="failed",
            failure_code="timeout",
            failure_message=f"the turn did not finish within {timeout_seconds:g} s",
        )
