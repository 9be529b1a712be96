"""`bindings.ports.llm.LLM` over the Workers AI binding (`env.AI.run`).

Docs: workers-ai/features/function-calling/traditional.mdx, workers-ai/platform/errors, and
the model schemas in cloudflare-docs `src/content/workers-ai-models/*.json`:

* input (llama-3.1-8b-instruct, llama-3.3-70b-instruct-fp8-fast, ...): `{"messages": [{role,
  content}], "tools": [{name, description, parameters}], "max_tokens"}`; `content` is a
  required string;
* output, "traditional" models: `{"response": str, "tool_calls": [{"name", "arguments":
  object}], "usage": {prompt_tokens, completion_tokens}}` (`usage` is absent from older
  schemas such as llama-3.1-8b-instruct's);
* output, newer models (e.g. @cf/zai-org/glm-4.7-flash): the OpenAI chat-completion shape,
  `{"choices": [{"message": {content, tool_calls: [{id, type, function: {name, arguments:
  JSON string}}]}}], "usage"}`. Both are accepted.

Requests are written so that both documented input schemas accept them: the traditional one
requires `content` (a string) on every message and takes tools flat or as `{type:
"function", function}`; the OpenAI-shaped one takes tools only as `{type: "function",
function}`, wants an assistant's calls in `tool_calls` and a tool result's `tool_call_id`. So
tools go as `{type: "function", function}`; an assistant turn that called tools carries its
calls both as JSON text in `content` (all a traditional model reads) and in `tool_calls`; a
tool result carries `name` and `tool_call_id`. Tool calls get ids here (`call_<step>_<i>`)
when the model sends none.

Errors: the binding rejects with "<code>: <text>" (workers-ai/platform/errors); 3036 (daily
allocation used up) is `LLMRateLimitedError`, 3040 (out of capacity) and 3007/3008 (timeout,
aborted) are `LLMUnavailableError`, anything else `LLMError`.

Loads without pydantic or httpx (tests/pyodide runs it in bare Pyodide): the port's types are
dataclasses, `Settings` is only a type here and the OpenAI adapter is imported when built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bindings.cloudflare import ffi
from bindings.openai_messages import (
    decode_arguments,
    message_to_openai,
    parse_openai_message,
    tool_to_openai,
)
from bindings.ports.llm import (
    LLM,
    ChatMessage,
    ChatResult,
    LLMError,
    LLMRateLimitedError,
    LLMUnavailableError,
    ToolCall,
    ToolSpec,
)

if TYPE_CHECKING:
    import httpx

    from bindings.settings import Settings

DEFAULT_MAX_TOKENS = 1024

# Internal codes from workers-ai/platform/errors (the message reads "3040: ...").
_RATE_LIMITED = {3036}  # account limited (daily allocation used up)
_UNAVAILABLE = {3040, 3007, 3008}  # out of capacity; request timeout; aborted
_CODE = re.compile(r"(?<!\d)([35]\d{3}):")


def message_to_workers_ai(message: ChatMessage) -> dict[str, Any]:
    if message.role == "assistant" and message.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        return {
            "role": "assistant",
            "content": message.content or json.dumps(calls),
            "tool_calls": message_to_openai(message)["tool_calls"],
        }
    if message.role == "tool":
        return {
            "role": "tool",
            "name": message.name or "",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    return {"role": message.role, "content": message.content}


def parse_workers_ai_reply(reply: Any, step: int) -> ChatMessage:
    if not isinstance(reply, dict):
        raise LLMError("Workers AI returned no result object")
    if isinstance(reply.get("choices"), list) and reply["choices"]:
        first = reply["choices"][0]
        return parse_openai_message(
            first.get("message") if isinstance(first, dict) else None, f"call_{step}"
        )
    calls = []
    for index, call in enumerate(reply.get("tool_calls") or []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise LLMError("Workers AI returned a tool call without a name")
        calls.append(
            ToolCall(
                id=f"call_{step}_{index}",
                name=call["name"],
                arguments=decode_arguments(call.get("arguments")),
            )
        )
    text = reply.get("response")
    if not isinstance(text, str):
        # Some models put structured output in `response`; keep it readable.
        text = "" if text is None else json.dumps(text)
    return ChatMessage(role="assistant", content=text, tool_calls=calls)


def _error(model: str, exc: BaseException) -> LLMError:
    message = f"Workers AI {model}: {ffi.error_message(exc)}"
    found = _CODE.search(message)
    code = int(found.group(1)) if found else None
    if code in _RATE_LIMITED:
        return LLMRateLimitedError(message)
    if code in _UNAVAILABLE:
        return LLMUnavailableError(message)
    return LLMError(message)


class WorkersAILLM:
    """Implements the `LLM` port with a text-generation model on Workers AI."""

    def __init__(self, ai: Any, model: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self._ai = ai
        self._raw = ffi.is_raw(ai)
        self._model = model
        self._max_tokens = max_tokens

    @property
    def model(self) -> str:
        return self._model

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        inputs: dict[str, Any] = {
            "messages": [message_to_workers_ai(m) for m in messages],
            "max_tokens": self._max_tokens,
        }
        if tools:
            inputs["tools"] = [tool_to_openai(t) for t in tools]
        try:
            reply = ffi.to_py(await self._ai.run(self._model, ffi.to_js_arg(inputs, self._raw)))
        except ffi.JsException as exc:
            raise _error(self._model, exc) from None
        step = sum(1 for m in messages if m.role == "assistant")
        usage = reply.get("usage") if isinstance(reply, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return ChatResult(
            message=parse_workers_ai_reply(reply, step),
            model=self._model,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )


def build_llm(
    settings: Settings, ai: Any, transport: httpx.AsyncBaseTransport | None = None
) -> LLM | None:
    """The LLM `settings.llm_provider` names on Cloudflare, or None if it cannot be built.

    `workers-ai` needs the AI binding; `openai` needs `OPENAI_API_KEY` and calls out through
    `transport` (the fetch transport on Workers); `scripted` exists only locally.
    """
    if settings.llm_provider == "workers-ai":
        return None if ai is None else WorkersAILLM(ai, settings.llm_model)
    if settings.llm_provider == "openai" and settings.openai_api_key:
        from bindings.openai_llm import OpenAICompatibleLLM

        return OpenAICompatibleLLM(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.llm_model,
            transport=transport,
        )
    return None
