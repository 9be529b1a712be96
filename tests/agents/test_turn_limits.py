"""A turn's limits and failures: step limit, timeout, model errors, tool errors, budget.

Every failed turn is still a recorded run: `turn_state.failed_count`, an `error` row in the
run log, `agent_runs.status = 'failed'` with the reason, and an episode saying so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_memory.governance.agent_types import (
    AgentType,
)
from bindings.ports.llm import LLM, ChatMessage, ChatResult, LLMError, ToolSpec
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.scripted_llm import Answer, CallTool, ScriptedLLM
from tests.agents.conftest import build_request
from tests.fakes.embedder import HashingEmbedder
from worker.app import handle

TENANT = "acme"


TIGHT = AgentType(
    name="tight",
    description="an agent with small limits, for tests",
    system_prompt="Be brief.",
    step_limit=3,
    timeout_seconds=0.2,
)


@pytest.fixture
def tight_agent() -> AgentType:
    return TIGHT


class Harness:
    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self.token = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now())

    async def run(self, text: str, agent: str = "tight") -> dict[str, Any]:
        request = build_request(
            "POST", f"/v1/agents/{TENANT}/{agent}/run", {"input": text}, token=self.token
        )
        response = await handle(request, self.runtime.bindings())
        assert response.status == 200, response.json()
        await self.runtime.background.drain()
        result: dict[str, Any] = response.json()
        return result

    async def view(self, run_id: str) -> dict[str, Any]:
        request = build_request("GET", f"/admin/agents/{TENANT}/runs/{run_id}", token=self.token)
        response = await handle(request, self.runtime.bindings())
        assert response.status == 200, response.json()
        result: dict[str, Any] = response.json()
        return result


@pytest.fixture
async def harness_for(tmp_path: Path) -> AsyncIterator[Any]:
    runtimes: list[LocalRuntime] = []

    async def make(llm: LLM) -> Harness:
        runtime = LocalRuntime.open(
            tmp_path / f"state{len(runtimes)}",
            embedder=HashingEmbedder(),
            llm=llm,
            # The deployment defines its own agent type (AGENT_TYPES), with small limits.
            vars={"AGENT_TYPES": json.dumps([TIGHT.model_dump(mode="json")])},
        )
        await runtime.migrate()
        runtimes.append(runtime)
        return Harness(runtime)

    yield make
    for runtime in runtimes:
        await runtime.close()


def kinds(view: dict[str, Any]) -> list[str]:
    return [row["kind"] for row in view["run_log"]]


async def test_the_step_limit_stops_a_model_that_never_answers(
    harness_for: Any, tight_agent: AgentType
) -> None:
    looping = ScriptedLLM([CallTool("working_memory_list")], repeat_last=True)
    harness = await harness_for(looping)
    result = await harness.run("list forever")
    assert result["status"] == "failed"
    assert result["failure"]["code"] == "step_limit_exceeded"
    assert result["steps"] == 3 and looping.calls == 3
    view = await harness.view(result["run_id"])
    assert kinds(view).count("llm_call") == 3
    assert kinds(view).count("tool_call") == 3
    assert kinds(view)[-2:] == ["error", "turn_end"]
    assert view["run"]["status"] == "failed"
    assert view["run"]["error"].startswith("step_limit_exceeded")
    assert view["run"]["steps"] == 3
    assert view["episodes"][0]["content"].startswith("Input: list forever\nResult: Failed")


class HangingLLM:
    model = "hangs"

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        await asyncio.Event().wait()  # never set: the provider never answers
        raise AssertionError("unreachable")


async def test_the_timeout_ends_a_turn_whose_model_hangs(
    harness_for: Any, tight_agent: AgentType
) -> None:
    harness = await harness_for(HangingLLM())
    result = await harness.run("hello?")
    assert result["status"] == "failed"
    assert result["failure"]["code"] == "timeout"
    view = await harness.view(result["run_id"])
    assert view["run"]["status"] == "failed" and "timeout" in view["run"]["error"]
    stub = harness.runtime.agents.get_by_name(f"{TENANT}:tight:default")
    state = await stub.call(
        "state", {"tenant": TENANT, "agent_type": "tight", "instance_id": "default"}
    )
    assert state["turn_state"]["failed_count"] == 1
    assert state["turn_state"]["last_status"] == "failed"


class BrokenLLM:
    model = "broken"

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        raise LLMError("HTTP 500 from the provider")


async def test_a_model_error_fails_the_turn_with_its_message(
    harness_for: Any, tight_agent: AgentType
) -> None:
    harness = await harness_for(BrokenLLM())
    result = await harness.run("hello")
    assert result["failure"] == {"code": "llm_error", "message": "HTTP 500 from the provider"}
    view = await harness.view(result["run_id"])
    call = next(row for row in view["run_log"] if row["kind"] == "llm_call")
    assert call["detail"]["error"] == "HTTP 500 from the provider"


class OfferEverythingLLM(ScriptedLLM):
    """Plays CallTool steps even when the tool is not offered (to call unknown tools)."""

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        names = [
            ToolSpec(name=s.name, description="", parameters={})
            for s in self._steps
            if isinstance(s, CallTool)
        ]
        return await super().chat(messages, [*tools, *names])


async def test_an_unknown_tool_is_reported_to_the_model_and_the_turn_goes_on(
    harness_for: Any, tight_agent: AgentType
) -> None:
    llm = OfferEverythingLLM([CallTool("launch_rockets"), Answer("ok: {last_tool_result}")])
    harness = await harness_for(llm)
    result = await harness.run("go")
    assert result["status"] == "completed"
    assert "no tool named 'launch_rockets'" in result["output"]
    view = await harness.view(result["run_id"])
    call = next(row for row in view["run_log"] if row["kind"] == "tool_call")
    assert call["detail"]["ok"] is False


async def test_working_memory_over_budget_is_an_error_the_model_sees(
    harness_for: Any, tight_agent: AgentType
) -> None:
    big = "x" * 100_000
    llm = ScriptedLLM(
        [
            CallTool("working_memory_set", {"key": "a", "value": big}),
            CallTool("working_memory_set", {"key": "b", "value": big}),
            Answer("result: {last_tool_result}"),
        ]
    )
    harness = await harness_for(llm)
    result = await harness.run("store two big things")
    assert result["status"] == "completed"
    assert "working memory budget exceeded" in result["output"]
    keys = [k.name for k in (await harness.runtime.kv.list(prefix="agent_working:")).keys]
    assert keys == ["agent_working:acme:tight.default:a"]
    view = await harness.view(result["run_id"])
    assert "error" in kinds(view)
    writes = [r for r in view["run_log"] if r["kind"] == "memory_write"]
    assert [w["detail"]["key"] for w in writes] == ["a"]


async def test_a_crashing_tool_fails_the_turn_but_the_run_is_closed(
    harness_for: Any, tight_agent: AgentType
) -> None:
    harness = await harness_for(
        ScriptedLLM([CallTool("working_memory_get", {"key": "k"}), Answer("done")])
    )

    async def explode(key: str) -> Any:
        raise RuntimeError("KV is on fire")

    # working_memory_get reads the value with its metadata (the write time it is scored by).
    harness.runtime.kv.get_with_metadata = explode  # type: ignore[method-assign]
    result = await harness.run("read it")
    assert result["status"] == "failed"
    assert result["failure"]["code"] == "tool_failed"
    assert "KV is on fire" in result["failure"]["message"]
    view = await harness.view(result["run_id"])
    assert view["run"]["status"] == "failed"
    assert kinds(view)[-1] == "turn_end"


async def test_a_failure_before_the_model_is_called_still_closes_the_run(
    harness_for: Any, tight_agent: AgentType
) -> None:
    harness = await harness_for(ScriptedLLM())

    async def unavailable(**kwargs: Any) -> Any:
        raise RuntimeError("KV list unavailable")

    harness.runtime.kv.list = unavailable  # type: ignore[method-assign]
    result = await harness.run("hi")
    assert result["failure"]["code"] == "internal_error"
    assert result["steps"] == 0
    view = await harness.view(result["run_id"])
    assert view["run"]["status"] == "failed"
    assert view["run"]["input"]["text"] == "hi"
    assert kinds(view) == ["turn_start", "error", "turn_end"]
