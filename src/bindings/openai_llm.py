"""An `LLM` for an OpenAI-compatible `/chat/completions` endpoint (a fresh httpx client per
call), and the message shape the Workers AI adapter shares. Arguments that are not a JSON object
become `{}` plus `_invalid_arguments`, so the tool can refuse them. 429 → rate limited; 5xx,
timeouts and connection errors → unavailable; messages never contain the API key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from bindings.ports.llm import (
    ChatMessage,
    ChatResult,
    LLMError,
    LLMRateLimitedError,
    LLMUnavailableError,
    ToolCall,
    ToolSpec,
)

MAX_DETAIL_CHARS = 300
TIMEOUT_SECONDS = 60.0


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
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict, whether the provider sent a JSON string or an object."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {"_invalid_arguments": str(raw)[:MAX_DETAIL_CHARS]}


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
    content, refusal = message.get("content"), message.get("refusal")
    return ChatMessage(
        role="assistant",
        content=content if isinstance(content, str) else "",
        tool_calls=calls,
        refusal=refusal if isinstance(refusal, str) else None,
    )


def usage_of(reply: Any) -> dict[str, int]:
    """`ChatResult`'s token counts from a reply's `usage`, 0 when absent."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return {name: int(usage.get(name) or 0) for name in ("prompt_tokens", "completion_tokens")}


class OpenAICompatibleLLM:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self.model = model
        self._transport = transport

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [message_to_openai(m) for m in messages],
        }
        if tools:
            body["tools"] = [tool_to_openai(t) for t in tools]
        headers = {"authorization": f"Bearer {self._api_key}", "content-type": "application/json"}
        try:
            async with httpx.AsyncClient(transport=self._transport, timeout=TIMEOUT_SECONDS) as c:
                response = await c.post(self._url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise LLMUnavailableError(f"{self.model}: the provider timed out") from None
        except httpx.HTTPError as exc:
            raise LLMUnavailableError(
                f"{self.model}: could not reach the provider ({type(exc).__name__})"
            ) from None
        if response.status_code >= 400:
            detail = response.text[:MAX_DETAIL_CHARS].replace(self._api_key or "\0", "***")
            message = f"{self.model}: HTTP {response.status_code}: {detail}"
            if response.status_code == 429:
                raise LLMRateLimitedError(message)
            if response.status_code >= 500:
                raise LLMUnavailableError(message)
            raise LLMError(message)
        try:
            data = response.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"{self.model}: the reply is not a chat completion") from None
        reply = parse_openai_message(choice.get("message") if isinstance(choice, dict) else None)
        return ChatResult(
            message=reply, model=str(data.get("model") or self.model), **usage_of(data)
        )
