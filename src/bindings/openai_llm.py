"""An `LLM` for any OpenAI-compatible `/chat/completions` endpoint, over httpx.

Runs on Cloudflare (httpx works in Python Workers) and under CPython; a fresh
`httpx.AsyncClient` is made per call because Workers require clients to be created
inside a handler. Contract:

* `POST {base_url}/chat/completions` with `{"model", "messages", "tools"?}`; tools are sent
  as `{"type": "function", "function": {name, description, parameters}}`; an assistant
  message with tool calls is sent with `tool_calls` (arguments JSON-encoded) and each
  tool result as `{"role": "tool", "tool_call_id", "content"}`.
* The reply is `choices[0].message`: `content` (null → ""), `tool_calls` (arguments are
  a JSON string, decoded to a dict; a tool call whose arguments are not a JSON object
  gets `{}` plus `_invalid_arguments` with the raw text so the tool can refuse it).
  `usage.prompt_tokens` / `completion_tokens` are reported when present.
* Every failure is an `LLMError` (subclasses: `LLMRateLimitedError` for 429,
  `LLMUnavailableError` for 5xx/timeouts/connection errors); messages never contain the
  API key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from bindings.openai_messages import (
    MAX_DETAIL_CHARS,
    decode_arguments,
    message_to_openai,
    parse_openai_message,
    tool_to_openai,
)
from bindings.ports.llm import (
    ChatMessage,
    ChatResult,
    LLMError,
    LLMRateLimitedError,
    LLMUnavailableError,
    ToolSpec,
)

__all__ = [
    "LLMRateLimitedError",
    "LLMUnavailableError",
    "OpenAICompatibleLLM",
    "decode_arguments",
    "message_to_openai",
    "parse_openai_message",
    "tool_to_openai",
]

DEFAULT_TIMEOUT_SECONDS = 60.0


class OpenAICompatibleLLM:
    """Implements the `LLM` port over `POST {base_url}/chat/completions`."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._model = model
        self._transport = transport
        self._timeout = timeout
        self._extra = dict(extra_body or {})

    @property
    def model(self) -> str:
        return self._model

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        body: dict[str, Any] = {
            **self._extra,
            "model": self._model,
            "messages": [message_to_openai(m) for m in messages],
        }
        if tools:
            body["tools"] = [tool_to_openai(t) for t in tools]
        headers = {"authorization": f"Bearer {self._api_key}", "content-type": "application/json"}
        try:
            async with httpx.AsyncClient(transport=self._transport, timeout=self._timeout) as c:
                response = await c.post(self._url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise LLMUnavailableError(f"{self._model}: the provider timed out") from None
        except httpx.HTTPError as exc:
            raise LLMUnavailableError(
                f"{self._model}: could not reach the provider ({type(exc).__name__})"
            ) from None
        if response.status_code >= 400:
            detail = response.text[:MAX_DETAIL_CHARS].replace(self._api_key or "\0", "***")
            message = f"{self._model}: HTTP {response.status_code}: {detail}"
            if response.status_code == 429:
                raise LLMRateLimitedError(message)
            if response.status_code >= 500:
                raise LLMUnavailableError(message)
            raise LLMError(message)
        try:
            data = response.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"{self._model}: the reply is not a chat completion") from None
        reply = parse_openai_message(choice.get("message") if isinstance(choice, dict) else None)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ChatResult(
            message=reply,
            model=str(data.get("model") or self._model),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
