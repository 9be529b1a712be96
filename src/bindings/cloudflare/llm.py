"""`bindings.ports.llm.LLM` over the Workers AI binding (`env.AI.run`).

Docs: workers-ai/features/function-calling/traditional.mdx and the model schemas in
cloudflare-docs `src/content/workers-ai-models/*.json` (e.g. llama-3.3-70b-instruct-fp8-
fast): input `{"messages": [{role, content}], "tools": [{name, description, parameters}]}`;
output `{"response": str, "tool_calls": [{"name", "arguments": object}], "usage":
{prompt_tokens, completion_tokens}}`. Some newer models answer in the OpenAI shape
(`{"choices": [{"message": …}]}`); both are accepted.

The message schema has only `role` and `content` (string), so an assistant turn that
called tools is sent as its JSON-encoded calls, and each tool result as a `tool` message
naming the tool. Tool calls get ids here (`call_<step>_<i>`) since Workers AI sends none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from bindings.cloudflare import ffi
from bindings.openai_llm import decode_arguments, parse_openai_message
from bindings.ports.llm import LLM, ChatMessage, ChatResult, LLMError, ToolCall, ToolSpec
from bindings.settings import Settings

DEFAULT_MAX_TOKENS = 1024


def message_to_workers_ai(message: ChatMessage) -> dict[str, Any]:
    if message.role == "assistant" and message.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        return {"role": "assistant", "content": message.content or json.dumps(calls)}
    if message.role == "tool":
        return {"role": "tool", "name": message.name or "", "content": message.content}
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
            inputs["tools"] = [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in tools
            ]
        try:
            reply = ffi.to_py(await self._ai.run(self._model, ffi.to_js_arg(inputs, self._raw)))
        except ffi.JsException as exc:
            raise LLMError(f"Workers AI {self._model}: {ffi.error_message(exc)}") from None
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
