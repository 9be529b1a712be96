"""The Workers AI LLM adapter (`bindings.cloudflare.ai`) in real Pyodide, raw and through the
workers SDK's wrapper, against the JS model of Workers AI's text-generation models
(models.mjs `Ai`): each request is checked against the model's documented input schema and
each answer is written in the model's documented output shape, "traditional"
(`{response, tool_calls: [{name, arguments}]}`, llama-3.x) or OpenAI's chat completion
(glm-4.7-flash).

Before: the adapter could not load here at all (it imported pydantic through the LLM port,
`bindings.openai_llm` and `Settings`; Pyodide has no pydantic-core here), so every test below
failed; and it sent tools as `{name, description, parameters}` and tool results without
`tool_call_id`, which the OpenAI-shaped models' schema refuses.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

import harness_js
from support import MODES, env

from bindings.ports.llm import (
    ChatMessage,
    LLMError,
    LLMRateLimitedError,
    LLMUnavailableError,
    ToolCall,
    ToolSpec,
)

LLAMA_8B = "@cf/meta/llama-3.1-8b-instruct"  # the default model (bindings.settings)
LLAMA_70B = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"
GLM = "@cf/zai-org/glm-4.7-flash"

TOOLS = [
    ToolSpec(
        name="working_memory_set",
        description="Store a value under a key.",
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string", "description": "the key"}},
            "required": ["key"],
        },
    )
]


def _llm(model: str, mode: str) -> tuple[Any, Any]:
    from bindings.cloudflare.ai import WorkersAILLM

    ai = harness_js.newWorkersAI()
    return ai, WorkersAILLM(env(mode, AI=ai).AI, model)


def _sent(ai: Any) -> dict[str, Any]:
    call: dict[str, Any] = ai.calls.to_py()[-1]
    return call


def _js(value: Any) -> Any:
    """A JS value built from JSON (None -> null, dicts -> plain objects)."""
    from js import JSON

    return JSON.parse(json.dumps(value))


def test_the_adapter_loads_without_pydantic() -> None:
    assert importlib.util.find_spec("pydantic") is None  # not in this interpreter
    import bindings.cloudflare.ai

    assert "pydantic" not in sys.modules
    assert callable(bindings.cloudflare.ai.WorkersAILLM)


async def test_a_plain_answer_in_each_documented_shape() -> None:
    for mode in MODES:
        for model, tokens in ((LLAMA_8B, (0, 0)), (LLAMA_70B, (3, 2)), (GLM, (3, 2))):
            ai, llm = _llm(model, mode)
            ai.replyNext(_js({"text": "Hello there."}))
            result = await llm.chat(
                [
                    ChatMessage(role="system", content="Be brief."),
                    ChatMessage(role="user", content="hi"),
                ]
            )
            assert result.message == ChatMessage(role="assistant", content="Hello there."), (
                mode,
                model,
                result,
            )
            assert result.model == model
            # llama-3.1-8b-instruct's schema documents no `usage`: the counts stay 0.
            assert (result.prompt_tokens, result.completion_tokens) == tokens, (mode, model)
            sent = _sent(ai)
            assert sent["model"] == model
            assert sent["inputs"]["messages"] == [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ]
            assert sent["inputs"]["max_tokens"] == 1024 and "tools" not in sent["inputs"]


async def test_tool_calls_and_the_conversation_that_follows_them() -> None:
    for mode in MODES:
        for model in (LLAMA_8B, LLAMA_70B, GLM):
            ai, llm = _llm(model, mode)
            ai.replyNext(
                _js(
                    {
                        "toolCalls": [
                            {"name": "working_memory_set", "arguments": {"key": "colour"}},
                            {"name": "working_memory_set", "arguments": {"key": "size"}},
                        ]
                    }
                )
            )
            conversation = [ChatMessage(role="user", content="remember colour and size")]
            first = await llm.chat(conversation, TOOLS)
            calls = first.message.tool_calls
            assert [(c.name, c.arguments) for c in calls] == [
                ("working_memory_set", {"key": "colour"}),
                ("working_memory_set", {"key": "size"}),
            ], (mode, model, first)
            assert first.message.content == "", (mode, model)
            assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)
            if model != GLM:  # the traditional shape has no ids: the adapter numbers them
                assert [c.id for c in calls] == ["call_0_0", "call_0_1"]
            sent_tools = _sent(ai)["inputs"]["tools"]
            assert [t["function"]["name"] for t in sent_tools] == ["working_memory_set"]

            # The next turn carries the calls and their results; the schema must accept it.
            conversation += [
                first.message,
                *(
                    ChatMessage(role="tool", tool_call_id=c.id, name=c.name, content='{"ok": true}')
                    for c in calls
                ),
            ]
            ai.replyNext(_js({"text": "Stored both."}))
            second = await llm.chat(conversation, TOOLS)
            assert second.message.content == "Stored both.", (mode, model)
            messages = _sent(ai)["inputs"]["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
            assert all(isinstance(m["content"], str) for m in messages), messages
            assert [m["tool_call_id"] for m in messages[2:]] == [c.id for c in calls]
            sent_calls = messages[1]["tool_calls"]
            assert [json.loads(c["function"]["arguments"]) for c in sent_calls] == [
                {"key": "colour"},
                {"key": "size"},
            ]


async def test_arguments_that_are_not_an_object_are_kept_for_the_tool_to_refuse() -> None:
    for mode in MODES:
        ai, llm = _llm(GLM, mode)
        reply = {
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "t1",
                                "type": "function",
                                "function": {"name": "working_memory_set", "arguments": "{oops"},
                            }
                        ],
                    },
                }
            ]
        }
        ai.replyNext(_js({"raw": reply}))
        result = await llm.chat([ChatMessage(role="user", content="x")], TOOLS)
        assert result.message.tool_calls == [
            ToolCall(id="t1", name="working_memory_set", arguments={"_invalid_arguments": "{oops"})
        ], mode


async def _refused(llm: Any) -> LLMError:
    try:
        await llm.chat([ChatMessage(role="user", content="hi")])
    except LLMError as exc:
        return exc
    raise AssertionError("the call did not fail")


async def test_workers_ai_errors_become_llm_errors_by_code() -> None:
    for mode in MODES:
        ai, llm = _llm(LLAMA_8B, mode)
        ai.failNext("3036: You have used up your daily free allocation of 10,000 neurons.")
        assert type(await _refused(llm)) is LLMRateLimitedError
        ai.failNext("3040: No more data centers to forward the request to")
        assert type(await _refused(llm)) is LLMUnavailableError
        ai.failNext("3007: Request timeout")
        assert type(await _refused(llm)) is LLMUnavailableError
        _, unknown = _llm("@cf/meta/no-such-model", mode)
        error = await _refused(unknown)
        assert type(error) is LLMError and "5007" in str(error), (mode, error)
        assert "@cf/meta/no-such-model" in str(error)


async def test_malformed_answers_are_llm_errors() -> None:
    for mode in MODES:
        ai, llm = _llm(LLAMA_8B, mode)
        ai.replyNext(_js({"raw": {"tool_calls": [{"arguments": {}}]}}))
        assert "without a name" in str(await _refused(llm)), mode
        ai.replyNext(_js({"raw": "not an object"}))
        assert "no result object" in str(await _refused(llm)), mode
