"""The LLM adjudicator (issue 41): same-entity pairs the rules cannot settle reach the model in
batches, bounded per tenant per day, through the real adapters answering in their documented
shapes (OpenAI-compatible over httpx, Workers AI over the fake JS runtime): well-formed,
malformed, refusing, timing out. Each verdict is an event; a supersession can be undone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_memory.agent.memory_tools import McpMemoryTools
from agent_memory.lifecycle.reconciler import LlmAdjudicator, ReconcileConfig, Reconciler
from agent_memory.tiers.semantic.memory import SemanticMemory
from bindings.openai_llm import OpenAICompatibleLLM
from bindings.ports.clock import FixedClock
from bindings.ports.llm import LLM
from local_runtime.runtime import LocalRuntime
from tests.agents.test_llm_adapters import FakeChatAi
from tests.cloudflare.conftest import bind, js_runtime, mode  # noqa: F401  (fixtures)
from tests.fakes.embedder import HashingEmbedder
from tests.lifecycle.conftest import NOW

PLANNED = "The release is planned for June 3."
SLIPPED = "The release slipped to June 17."
ALICE = "Alice drinks tea."
ALICE_TOO = "Alice also drinks coffee."  # additive: the rules settle it, the model is not asked


def chat_completion(content: str | None, refusal: str | None = None) -> dict[str, Any]:
    """An OpenAI chat completion as the API documents it."""
    message = {"role": "assistant", "content": content, "refusal": refusal}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_750_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 90, "completion_tokens": 6, "total_tokens": 96},
    }


class Recorded:
    """An OpenAI-compatible endpoint replaying one recorded answer (or timing out)."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.prompts.append(json.loads(request.content)["messages"][-1]["content"])
        if self.answer is None:
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(200, json=self.answer)

    def llm(self) -> OpenAICompatibleLLM:
        return OpenAICompatibleLLM(
            base_url="https://llm.example/v1",
            api_key="sk-test",
            model="gpt-4o-mini",
            transport=httpx.MockTransport(self.handler),
        )


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    runtime = LocalRuntime.open(
        tmp_path / "state",
        embedder=HashingEmbedder(),
        clock=FixedClock(NOW),
        vars={"MEMORY_RECONCILE_EVERY_WRITES": "0"},
    )
    await runtime.migrate()
    try:
        yield runtime
    finally:
        await runtime.close()


async def store(rt: LocalRuntime, *texts: str) -> None:
    for text in texts:
        await McpMemoryTools(rt.bindings()).call("acme", "store_memory", {"content": text})
        rt.clock.advance(3600)  # type: ignore[attr-defined]


async def reconcile(rt: LocalRuntime, llm: LLM, **config: Any) -> Reconciler:
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    settings = ReconcileConfig(slot_similarity=0.3, **config)  # the hashing embedder's scale
    reconciler = Reconciler(
        "acme",
        db=rt.db,
        vectors=rt.vectors,
        memory=memory,
        embedding_key=rt.embedder.config.key,
        clock=rt.clock,
        config=settings,
        adjudicator=LlmAdjudicator(llm, settings),
    )
    reconciler.report = await reconciler.run()  # type: ignore[attr-defined]
    return reconciler


async def status(rt: LocalRuntime) -> dict[str, str]:
    rows = await rt.db.prepare(
        "SELECT content, status FROM semantic_facts WHERE tenant_id = 'acme'"
    ).all()
    return {str(r["content"]): str(r["status"]) for r in rows.results}


async def decisions(rt: LocalRuntime) -> list[dict[str, Any]]:
    rows = await rt.db.prepare(
        "SELECT payload FROM memory_events WHERE tenant_id = 'acme' "
        "AND payload LIKE '%adjudicator%' ORDER BY created_at"
    ).all()
    return [json.loads(r["payload"]) for r in rows.results]


async def test_a_pair_without_a_change_word_reaches_the_model_and_its_verdict_can_be_undone(
    rt: LocalRuntime,
) -> None:
    await store(rt, PLANNED, ALICE, SLIPPED, ALICE_TOO)
    recorded = Recorded(chat_completion("1: update"))
    reconciler = await reconcile(rt, recorded.llm())
    # One call, one numbered pair: the additive pair was settled by the rules.
    [asked] = recorded.prompts
    assert "1. Entity: release" in asked and f"OLDER: {PLANNED}" in asked
    assert ALICE_TOO not in asked
    assert (await status(rt))[PLANNED] == "superseded"
    [superseded] = [d for d in await decisions(rt) if d.get("op") != "adjudicated"]
    assert superseded["decision"]["adjudicator"] == "llm:gpt-4o-mini"
    assert superseded["decision"]["reason"] == "llm_answer"
    # Undone by an operator: both live again, and the pair is never asked again.
    rows = (
        await rt.db.prepare(
            "SELECT fact_id FROM semantic_facts WHERE tenant_id = 'acme' AND content = ?"
        )
        .bind(PLANNED)
        .all()
    )
    await reconciler.undo(str(rows.results[0]["fact_id"]), by="ops@example.com")
    assert (await status(rt))[PLANNED] == "active"
    recorded.prompts.clear()
    await reconcile(rt, recorded.llm())
    assert recorded.prompts == []


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (chat_completion("The newer statement is probably right."), "llm_unreadable"),
        (chat_completion("1: update\n1: compatible"), "llm_unreadable"),
        (chat_completion(None, refusal="I'm sorry, I can't help with that."), "llm_refused"),
        (chat_completion("I cannot judge these statements."), "llm_refused"),
        (None, "llm_error"),  # the provider times out
    ],
    ids=["malformed", "contradictory", "refusal-field", "refusal-text", "timeout"],
)
async def test_an_answer_the_adjudicator_cannot_use_leaves_the_rules_decision(
    rt: LocalRuntime, answer: dict[str, Any] | None, reason: str
) -> None:
    await store(rt, PLANNED, SLIPPED)
    await reconcile(rt, Recorded(answer).llm())
    assert set((await status(rt)).values()) == {"active"}  # nothing superseded
    [decision] = await decisions(rt)
    assert decision["adjudicator"] == "rules"
    assert decision["reason"].startswith(f"{reason};rules:")


@pytest.mark.usefixtures("js_runtime")
@pytest.mark.parametrize(
    "reply",
    [
        {"response": "1: update", "usage": {"prompt_tokens": 80, "completion_tokens": 3}},
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "1. update"}}]},
    ],
    ids=["traditional", "openai-shaped"],
)
async def test_workers_ai_answers_in_either_documented_shape(
    rt: LocalRuntime,
    bind: Callable[[Any], Any],  # noqa: F811
    reply: dict[str, Any],
) -> None:
    from bindings.cloudflare.ai import WorkersAILLM

    fake = FakeChatAi([reply])
    await store(rt, PLANNED, SLIPPED)
    await reconcile(rt, WorkersAILLM(bind(fake), "@cf/meta/llama-3.1-8b-instruct"))
    assert (await status(rt))[PLANNED] == "superseded"
    assert fake.calls[0]["messages"][0]["role"] == "system"


async def test_the_model_is_asked_about_at_most_the_days_budget_of_pairs(
    rt: LocalRuntime,
) -> None:
    await store(rt, PLANNED, "The demo is planned for May 2.", SLIPPED)
    await store(rt, "The demo slipped to May 9.")
    recorded = Recorded(chat_completion("1: compatible\n2: compatible"))
    await reconcile(rt, recorded.llm(), llm_pairs_per_day=1)
    assert recorded.prompts and all("2. Entity" not in p for p in recorded.prompts)
    # The day's budget is spent: a run an hour later asks nothing, a day later it asks again.
    await store(rt, "The launch is planned for July 1.", "The launch slipped to July 8.")
    recorded.prompts.clear()
    await reconcile(rt, recorded.llm(), llm_pairs_per_day=1)
    assert recorded.prompts == []
    rt.clock.advance(86_400)  # type: ignore[attr-defined]
    await store(rt, "The launch slipped again, to July 15.")
    await reconcile(rt, recorded.llm(), llm_pairs_per_day=1)
    assert len(recorded.prompts) == 1
