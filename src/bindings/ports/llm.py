"""LLM port: chat completions with tool calls (OpenAI-compatible shape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class ChatResult(BaseModel):
    message: ChatMessage
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMError(Exception):
    """The model call failed."""


class LLM(Protocol):
    @property
    def model(self) -> str: ...

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult: ...
