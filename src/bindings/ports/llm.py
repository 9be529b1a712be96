"""LLM port: chat completions with tool calls (OpenAI-compatible shape). Dataclasses: the
Workers AI adapter must load in bare Pyodide, which has no pydantic-core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(kw_only=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class ChatMessage:
    # `role` is checked statically: every construction site names a literal (adapters build
    # `assistant` replies themselves), so nothing is re-checked per message.
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    refusal: str | None = None  # the model declined to answer (OpenAI's `message.refusal`)


@dataclass(kw_only=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(kw_only=True)
class ChatResult:
    message: ChatMessage
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMError(Exception):
    """The model call failed."""


class LLMRateLimitedError(LLMError):
    """The provider refused for quota (HTTP 429, Workers AI 3036)."""


class LLMUnavailableError(LLMError):
    """The provider failed, was out of capacity, timed out or could not be reached."""


class LLM(Protocol):
    @property
    def model(self) -> str: ...

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult: ...
