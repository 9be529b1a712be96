"""The OpenAI chat-completions message shape, to and from the LLM port's types.

Shared by the OpenAI-compatible adapter (`bindings.openai_llm`, over httpx) and the Workers AI
adapter (`bindings.cloudflare.llm`, whose newer models answer in this shape): plain Python,
no httpx and no pydantic, so the Workers AI adapter loads on its own (tests/pyodide). Contract:

* an assistant message with tool calls is sent with `tool_calls` (arguments JSON-encoded),
  each tool result as `{"role": "tool", "tool_call_id", "content"}`; tools as
  `{"type": "function", "function": {name, description, parameters}}`;
* a reply's `message` gives `content` (null -> "") and `tool_calls`, whose arguments may be a
  JSON string or an object; arguments that are not a JSON object become `{}` plus
  `_invalid_arguments` with the raw text, so the tool can refuse them.
"""

from __future__ import annotations

import json
from typing import Any

from bindings.ports.llm import ChatMessage, LLMError, ToolCall, ToolSpec

MAX_DETAIL_CHARS = 300


def message_to_openai(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out


def tool_to_openai(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict, whether the provider sent a JSON string or an object."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {"_invalid_arguments": raw[:MAX_DETAIL_CHARS]}
        if isinstance(value, dict):
            return value
    return {"_invalid_arguments": str(raw)[:MAX_DETAIL_CHARS]}


def parse_openai_message(message: Any, fallback_id: str = "call") -> ChatMessage:
    """`choices[0].message` of an OpenAI-style reply as a `ChatMessage`."""
    if not isinstance(message, dict):
        raise LLMError("the model reply has no message object")
    calls = []
    for index, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise LLMError("the model asked for a tool call without a name")
        arguments = decode_arguments(function.get("arguments") if function else None)
        raw_id = call.get("id")
        call_id = raw_id if isinstance(raw_id, str) else f"{fallback_id}_{index}"
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    content = message.get("content")
    return ChatMessage(
        role="assistant", content=content if isinstance(content, str) else "", tool_calls=calls
    )
