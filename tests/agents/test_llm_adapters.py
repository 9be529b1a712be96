"""LLM adapters: OpenAI-compatible chat completions over httpx (MockTransport), Workers AI
over the fake JS runtime (raw and wrapped mode), and the scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bindings.openai_llm import OpenAICompatibleLLM
from bindings.ports.llm import (
    ChatMessage,
    LLMError,
    LLMRateLimitedError,
    LLMUnavailableError,
    ToolCall,
    ToolSpec,
)
from local_runtime.scripted_llm import Answer, CallTool, ScriptedLLM
from tests.cloudflare.conftest import bind, js_runtime, mode  # noqa: F401  (fixtures)
from tests.fakes.js_runtime import JSError, JSHost, JSValue, data_to_js, js_async, js_to_data

TOOLS = [
    ToolSpec(
        name="working_memory_set",
        description="store",
        parameters={"type": "object", "properties": {"key": {"type": "string"}}},
    )
]
CONVERSATION = [
    ChatMessage(role="system", content="Be brief."),
    ChatMessage(role="user", content="remember x"),
    ChatMessage(
        role="assistant",
        tool_calls=[ToolCall(id="c1", name="working_memory_set", arguments={"key": "x"})],
    ),
    ChatMessage(role="tool", tool_call_id="c1", name="working_memory_set", content='{"ok":1}'),
]


def openai_llm(handler: Callable[[httpx.Request], httpx.Response]) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        base_url="https://llm.example/v1/",
        api_key="sk-secret",
        model="gpt-test",
        transport=httpx.MockTransport(handler),
    )


async def test_openai_request_shape_and_tool_call_reply() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == "https://llm.example/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-secret"
        seen.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "model": "gpt-test-2026",
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_9",
                                    "type": "function",
                                    "function": {
                                        "name": "working_memory_set",
                                        "arguments": '{"key": "y", "value": 2}',
                                    },
                                }
                            ],
                        }
                    }
                ],
                "usage": {"prompt_tokens": 31, "completion_tokens": 7},
            },
        )

    result = await openai_llm(handler).chat(CONVERSATION, TOOLS)
    body = seen[0]
    assert body["model"] == "gpt-test"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "working_memory_set",
                "description": "store",
                "parameters": TOOLS[0].parameters,
            },
        }
    ]
    assert body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "working_memory_set", "arguments": '{"key": "x"}'},
            }
        ],
    }
    assert body["messages"][3] == {"role": "tool", "content": '{"ok":1}', "tool_call_id": "c1"}
    assert result.message.tool_calls == [
        ToolCall(id="call_9", name="working_memory_set", arguments={"key": "y", "value": 2})
    ]
    assert result.message.content == ""
    assert (result.model, result.prompt_tokens, result.completion_tokens) == (
        "gpt-test-2026",
        31,
        7,
    )


async def test_openai_plain_answer_without_tools() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "tools" not in json.loads(request.content)
        return httpx.Response(200, json={"choices": [{"message": {"content": "Hi!"}}]})

    result = await openai_llm(handler).chat([ChatMessage(role="user", content="hello")])
    assert result.message.content == "Hi!" and result.message.tool_calls == []


async def test_openai_malformed_arguments_reach_the_tool_as_a_refusable_marker() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        call = {"id": "c", "function": {"name": "working_memory_set", "arguments": "{oops"}}
        return httpx.Response(200, json={"choices": [{"message": {"tool_calls": [call]}}]})

    result = await openai_llm(handler).chat(CONVERSATION, TOOLS)
    assert result.message.tool_calls[0].arguments == {"_invalid_arguments": "{oops"}


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, LLMRateLimitedError), (503, LLMUnavailableError), (400, LLMError)],
)
async def test_openai_http_errors_are_typed_and_hide_the_key(
    status: int, error: type[LLMError]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, text="bad key sk-secret")

    with pytest.raises(error) as caught:
        await openai_llm(handler).chat(CONVERSATION)
    assert "sk-secret" not in str(caught.value)
    assert f"HTTP {status}" in str(caught.value)


async def test_openai_timeouts_and_garbage_are_llm_errors() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(LLMUnavailableError):
        await openai_llm(timeout).chat(CONVERSATION)

    def garbage(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>")

    with pytest.raises(LLMError):
        await openai_llm(garbage).chat(CONVERSATION)


# --- Workers AI -----------------------------------------------------------------------


class FakeChatAi(JSHost):
    """`env.AI` answering text-generation calls in the documented traditional shape."""

    js_class = "Ai"

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.calls: list[dict[str, Any]] = []

    @js_async
    def run(self, model: Any = None, inputs: Any = None, options: Any = None) -> Any:
        data = js_to_data(inputs, what="inputs")
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise JSError("Error", "5006: required properties at '/' are 'messages'")
        for message in data["messages"]:
            if not isinstance(message.get("content"), str):
                raise JSError("Error", "5006: content must be a string")
        self.calls.append({"model": model, **data})
        if not self.replies:
            raise JSError("Error", "3040: Capacity temporarily exceeded")
        return data_to_js(self.replies.pop(0))


@pytest.fixture
def make_ai(bind: Callable[[JSValue], Any]) -> Callable[[list[dict[str, Any]]], Any]:  # noqa: F811
    def make(replies: list[dict[str, Any]]) -> Any:
        from bindings.cloudflare.ai import WorkersAILLM

        fake = FakeChatAi(replies)
        return fake, WorkersAILLM(bind(fake), "@cf/meta/llama-3.3-70b-instruct-fp8-fast")

    return make


async def test_workers_ai_traditional_tool_calls(make_ai: Any) -> None:
    fake, llm = make_ai(
        [
            {
                "response": "",
                "tool_calls": [{"name": "working_memory_set", "arguments": {"key": "z"}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 3},
            }
        ]
    )
    result = await llm.chat(CONVERSATION, TOOLS)
    assert result.message.tool_calls == [
        ToolCall(id="call_1_0", name="working_memory_set", arguments={"key": "z"})
    ]
    assert (result.prompt_tokens, result.completion_tokens) == (12, 3)
    sent = fake.calls[0]
    # The form both documented input schemas accept (see bindings.cloudflare.ai).
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "working_memory_set",
                "description": "store",
                "parameters": TOOLS[0].parameters,
            },
        }
    ]
    assert sent["messages"][2]["role"] == "assistant"
    assert json.loads(sent["messages"][2]["content"]) == [
        {"name": "working_memory_set", "arguments": {"key": "x"}}
    ]
    assert sent["messages"][2]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "working_memory_set", "arguments": '{"key": "x"}'},
        }
    ]
    assert sent["messages"][3] == {
        "role": "tool",
        "name": "working_memory_set",
        "tool_call_id": "c1",
        "content": '{"ok":1}',
    }


async def test_workers_ai_plain_and_openai_shaped_answers(make_ai: Any) -> None:
    _, llm = make_ai(
        [
            {"response": "Hello."},
            {"choices": [{"message": {"content": "Hi again."}}]},
        ]
    )
    assert (await llm.chat([ChatMessage(role="user", content="hi")])).message.content == "Hello."
    second = await llm.chat([ChatMessage(role="user", content="hi")])
    assert second.message.content == "Hi again."


async def test_workers_ai_errors_become_llm_errors(make_ai: Any) -> None:
    _, llm = make_ai([])
    with pytest.raises(LLMError, match="3040"):
        await llm.chat([ChatMessage(role="user", content="hi")])


@pytest.mark.usefixtures("js_runtime")
def test_build_llm_follows_the_settings() -> None:
    from bindings.cloudflare.ai import WorkersAILLM
    from bindings.cloudflare.environment import build_llm
    from bindings.settings import Settings

    assert isinstance(build_llm(Settings(), object()), WorkersAILLM)
    assert build_llm(Settings(), None) is None
    openai = build_llm(Settings(llm_provider="openai", openai_api_key="k"), None)
    assert isinstance(openai, OpenAICompatibleLLM)
    assert build_llm(Settings(llm_provider="openai"), None) is None
    assert build_llm(Settings(llm_provider="scripted"), None) is None


# --- the scripted model ---------------------------------------------------------------


async def test_the_scripted_model_is_stateless_and_skips_tools_it_lacks() -> None:
    llm = ScriptedLLM(
        [
            CallTool("working_memory_set", {"key": "k", "value": "{input}"}),
            Answer("said {input}; tool said {last_tool_result}"),
        ]
    )
    start = [ChatMessage(role="user", content="ping")]
    first = await llm.chat(start, TOOLS)
    assert first.message.tool_calls[0].arguments == {"key": "k", "value": "ping"}
    # Without the tool on offer the same script answers straight away.
    assert (await llm.chat(start, [])).message.content == "said ping; tool said "
    # Concurrent conversations each get the step that matches their own history.
    later = [*start, first.message, ChatMessage(role="tool", content="stored")]
    replies = await asyncio.gather(llm.chat(start, TOOLS), llm.chat(later, TOOLS))
    assert replies[0].message.tool_calls and replies[1].message.content == (
        "said ping; tool said stored"
    )
