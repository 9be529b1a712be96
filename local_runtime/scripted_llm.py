"""`ScriptedLLM`: a deterministic stand-in for a chat model (local default, test double).

A script is a list of `CallTool(name, arguments)` / `Answer(text)` steps. The model is
stateless: it plays the step numbered by the assistant messages already in the conversation
(so one instance serves concurrent turns), skipping calls of tools the agent was not offered;
past the end it answers `DEFAULT_FALLBACK` (with `repeat_last`, it plays the last step forever).
Strings are `str.format` templates over `conversation_variables` (the turn's input, the
episodes the context lists, the latest tool result, the turn). The default script, which
`agent-memory dev` runs, notes the input in working memory and says what it remembered.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_memory.agent.turn import EPISODE_LINE_PREFIX, EPISODES_HEADER
from bindings.ports.llm import ChatMessage, ChatResult, ToolCall, ToolSpec

_TURN = re.compile(r"Instance turn (\d+)")
_EPISODE = re.compile(r"^- \[episode (\S+) run \S+ \w+\] (.*)$")
_EPISODE_INPUT = re.compile(r"^Input: (.*?) Result: ")


@dataclass(frozen=True)
class CallTool:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    text: str


ScriptStep = CallTool | Answer

DEFAULT_SCRIPT: tuple[ScriptStep, ...] = (
    CallTool("working_memory_set", {"key": "last_input", "value": "{input}"}),
    Answer(
        "Turn {turn}. I remember {episode_count} earlier episode(s); the latest "
        "({latest_episode_id}) was about: {latest_episode_input}. "
        "I noted your input in working memory."
    ),
)
DEFAULT_FALLBACK = "Done: {input}"


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fill(value: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return value.format_map(_Blank(variables))
    if isinstance(value, dict):
        return {k: _fill(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, variables) for v in value]
    return value


def conversation_variables(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """What the templates can refer to, read from the conversation so far."""
    user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    tool = next((m.content for m in reversed(messages) if m.role == "tool"), "")
    episodes: list[tuple[str, str]] = []
    turn = "1"
    for message in messages:
        if message.role != "system" or EPISODES_HEADER not in message.content:
            continue
        found = _TURN.search(message.content)
        if found:
            turn = found.group(1)
        for line in message.content.splitlines():
            if line.startswith(EPISODE_LINE_PREFIX):
                match = _EPISODE.match(line)
                if match:
                    episodes.append((match.group(1), match.group(2)))
    latest_input = "nothing"
    if episodes:
        found_input = _EPISODE_INPUT.match(episodes[0][1])
        latest_input = found_input.group(1) if found_input else episodes[0][1]
    return {
        "input": user,
        "episode_count": str(len(episodes)),
        "latest_episode_id": episodes[0][0] if episodes else "none",
        "latest_episode_input": latest_input,
        "last_tool_result": tool,
        "turn": turn,
    }


class ScriptedLLM:
    """Implements the `LLM` port by playing a script."""

    def __init__(
        self,
        steps: Sequence[ScriptStep] | None = None,
        *,
        repeat_last: bool = False,
    ) -> None:
        self._steps = tuple(DEFAULT_SCRIPT if steps is None else steps)
        self._repeat_last = repeat_last
        self.calls = 0

    model = "scripted"

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        # A real model is I/O: give other tasks (and other events of the same Durable
        # Object) the chance to run here, as they would on Cloudflare.
        await asyncio.sleep(0)
        self.calls += 1
        offered = {tool.name for tool in tools}
        playable = [s for s in self._steps if not isinstance(s, CallTool) or s.name in offered]
        position = sum(1 for m in messages if m.role == "assistant")
        variables = conversation_variables(messages)
        if position < len(playable):
            step: ScriptStep = playable[position]
        elif self._repeat_last and playable:
            step = playable[-1]
        else:
            step = Answer(DEFAULT_FALLBACK)
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        if isinstance(step, Answer):
            text = _fill(step.text, variables)
            reply = ChatMessage(role="assistant", content=text)
        else:
            call = ToolCall(
                id=f"call_{position}_{step.name}",
                name=step.name,
                arguments=_fill(step.arguments, variables),
            )
            reply = ChatMessage(role="assistant", content="", tool_calls=[call])
        return ChatResult(
            message=reply,
            model=self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(reply.content.split()) + len(reply.tool_calls),
        )
