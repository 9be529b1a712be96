"""ADR-043 tier-3 acceptance, through the agent-run path with the real offline embedder:

* after 10+ runs of a scripted SDR agent that stores what it learns (the platform adds
  `store_memory` because the SDR type has `long_term_enabled`),
  `recall("responded positively to direct ROI framing")` returns the relevant fact in the
  top 5;
* a fact learned in one run appears in the next recall (an agent's `recall_memory` call
  in the following run).

Plus the per-agent-type context-assembly option (`semantic_prefetch`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.governance.agent_types import (
    SDR,
    AgentType,
    MemoryConfig,
)
from agent_memory.memory import Memory
from local_runtime.access_dev import mint_token
from local_runtime.embedder import LocalMiniLMEmbedder
from local_runtime.runtime import LocalRuntime
from local_runtime.scripted_llm import Answer, CallTool, ScriptedLLM
from tests.agents.conftest import build_request
from worker.app import handle

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# MiniLM model loads once, not once per worker.
pytestmark = pytest.mark.xdist_group("adr043-minilm")

TENANT = "acme"

STORE_WHAT_YOU_LEARN = ScriptedLLM(
    [
        CallTool("store_memory", {"content": "{input}", "metadata": {"source": "sdr-run"}}),
        Answer("Noted: {input}"),
    ]
)
RECALL_FOR_INPUT = ScriptedLLM(
    [
        CallTool("recall_memory", {"query": "{input}", "top_k": 5}),
        Answer("{last_tool_result}"),
    ]
)

# What an SDR agent learns over its runs: one run per observation.
OBSERVATIONS = [
    "Contact 5501 asked us to follow up next quarter after budget approval",
    "Contact 5502 did not open any of the three cold emails",
    "Contact 5503 replied enthusiastically when the email led with a concrete ROI figure",
    "Contact 5504 prefers short messages sent on Tuesday mornings",
    "Contact 5505 forwarded the case study to their head of operations",
    "Contact 5506 unsubscribed after the second follow-up",
    "Contact 5507 said the social proof email felt generic",
    "Contact 5508 booked a demo after a question about their current process",
    "Contact 5509 is evaluating a competitor until the end of the year",
    "Contact 5510 asked for pricing in euros",
    "Contact 5511 mentioned their team grew from 10 to 40 engineers",
    "Contact 5512 wants references from companies in logistics",
]
RELEVANT = OBSERVATIONS[2]


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


@pytest.fixture
async def agent_rt(tmp_path: Path, minilm: LocalMiniLMEmbedder) -> AsyncIterator[LocalRuntime]:
    runtime = LocalRuntime.open(tmp_path / "state", embedder=minilm, llm=STORE_WHAT_YOU_LEARN)
    await runtime.migrate()
    yield runtime
    await runtime.close()


async def run_agent(
    rt: LocalRuntime, agent_type: str, text: str, instance: str = "default"
) -> dict[str, Any]:
    """One run. The model is read when an agent instance's object is created, so a test
    that swaps `rt.llm` uses a new instance for the new model."""
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    request = build_request(
        "POST",
        f"/v1/agents/{TENANT}/{agent_type}/run",
        {"input": text, "instance_id": instance},
        token=token,
    )
    response = await handle(request, rt.bindings())
    assert response.status == 200, response.json()
    await rt.background.drain()
    result: dict[str, Any] = response.json()
    assert result["status"] == "completed", result
    return result


async def test_adr043_recall_after_ten_runs_and_a_fresh_fact_in_the_next_recall(
    agent_rt: LocalRuntime,
) -> None:
    assert SDR.memory.long_term_enabled
    for observation in OBSERVATIONS:  # 12 runs of the scripted agent
        await run_agent(agent_rt, "sdr", observation)

    memory = (await Memory.open(agent_rt.bindings(), TENANT)).semantic()
    assert await memory.count() == len(OBSERVATIONS)
    found = await memory.recall("responded positively to direct ROI framing", 5)
    top5 = [r.fact.content for r in found.results]
    assert RELEVANT in top5, top5
    # Stored through the tool by the SDR agent, with its run as provenance.
    relevant = found.results[top5.index(RELEVANT)].fact
    assert relevant.agent_type == "sdr" and relevant.source == "store_memory"
    assert relevant.learned_from_run_id

    # A fact learned in one run appears in the next recall (the agent's own tool call).
    await run_agent(agent_rt, "sdr", "Contact 5513 loved the one-page ROI calculator we sent")
    agent_rt.llm = RECALL_FOR_INPUT
    answer = await run_agent(
        agent_rt, "sdr", "ROI calculator feedback from contact 5513", instance="reader"
    )
    recalled = json.loads(answer["output"])
    contents = [r["content"] for r in recalled["results"]]
    assert contents[0] == "Contact 5513 loved the one-page ROI calculator we sent"


async def test_semantic_prefetch_puts_recalled_facts_into_the_turn_context(
    agent_rt: LocalRuntime,
) -> None:
    for observation in OBSERVATIONS[:4]:
        await run_agent(agent_rt, "sdr", observation)
    prefetching = AgentType(
        name="sdr_prefetch",
        description="SDR that gets relevant facts before its first model call",
        system_prompt="You are an SDR.",
        memory=MemoryConfig(long_term_enabled=True, semantic_prefetch=True, semantic_top_k=2),
    )
    # The deployment defines it (AGENT_TYPES); the next objects are built with it.
    agent_rt.settings = agent_rt.settings.model_copy(
        update={"agent_types": json.dumps([prefetching.model_dump(mode="json")])}
    )
    seen: list[str] = []

    class ContextSpy(ScriptedLLM):
        async def chat(self, messages: Any, tools: Any = ()) -> Any:
            seen.extend(m.content for m in messages if m.role == "system")
            return await super().chat(messages, tools)

    agent_rt.llm = ContextSpy([Answer("ok")])
    await run_agent(agent_rt, "sdr_prefetch", "what made contact 5503 reply?")
    context = "\n".join(seen)
    assert "## Known facts" in context
    assert RELEVANT in context
