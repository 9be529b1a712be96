"""The reranking stage over the fused head (`tiers/semantic/recall.py`): the embedder's
sentence rescoring by default, the bound reranker when configured for the tenant; only for
a head holding a memory of several sentences; each memory read with its session
neighbours; a failing reranker leaves the fused order."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from agent_memory.memory import Memory
from agent_memory.retrieval import RerankConfig, RetrievalConfig, sentences
from agent_memory.tiers.semantic.recall import EmbedderReranker
from bindings.ports.reranker import RerankError
from bindings.settings import Settings
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.semantic.conftest import MemoryFactory

SESSION = [
    "Ana: I finally went on the coastal road trip last weekend",
    "Ben: How was it?",
    "Ana: Amazing, we stopped at every lighthouse on the way",
    "Ben: Did you camp?",
    "Ana: Yes, two nights in the dunes. The stars were unreal.",
]


class ScriptedReranker:
    """Scores 1.0 a passage whose middle line (the memory itself) names `favourite`."""

    def __init__(self, favourite: str, fail: bool = False) -> None:
        self.favourite, self.fail = favourite, fail
        self.calls: list[tuple[str, list[str]]] = []

    @property
    def model(self) -> str:
        return "scripted"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        if self.fail:
            raise RerankError("3040: Capacity temporarily exceeded")
        return [
            1.0 if self.favourite in text.split("\n")[len(text.split("\n")) // 2] else 0.0
            for text in texts
        ]


def _config(**rerank: object) -> RetrievalConfig:
    return RetrievalConfig(
        rerank=RerankConfig.model_validate({"depth": 10, "scorer": "bound", **rerank})
    )


async def _learn(memory: object) -> None:
    await memory.learn_many(  # type: ignore[attr-defined]
        [{"content": text, "session": "trip-1"} for text in SESSION]
    )


async def test_the_reranker_decides_the_head_order(make_memory: MemoryFactory) -> None:
    plain = make_memory()
    await _learn(plain)
    query = "what did Ana do on the road trip"
    fused = [r.fact.content for r in (await plain.rank(query, 5)).results]
    reranker = ScriptedReranker("dunes")
    memory = make_memory(config=_config(weight=10.0, neighbours=0), reranker=reranker)
    reranked = (await memory.rank(query, 5)).results
    assert reranked[0].fact.content == SESSION[4] != fused[0]
    assert [r.score for r in reranked] == sorted((r.score for r in reranked), reverse=True)
    assert sorted(r.fact.content for r in reranked) == sorted(fused)
    [(asked, passages)] = reranker.calls
    assert asked == query and sorted(passages) == sorted(SESSION)


async def test_passages_carry_the_session_neighbours_in_order(make_memory: MemoryFactory) -> None:
    reranker = ScriptedReranker("lighthouse")
    memory = make_memory(config=_config(neighbours=1), reranker=reranker)
    await _learn(memory)
    await memory.rank("lighthouse road trip", 5)
    [(_, passages)] = reranker.calls
    assert "\n".join(SESSION[1:4]) in passages
    assert "\n".join(SESSION[0:2]) in passages  # the first turn has no turn before it


async def test_the_bound_reranker_only_when_asked_for_the_tenant_and_a_long_memory(
    make_memory: MemoryFactory,
) -> None:
    short = [{"content": text.split(".")[0], "session": "trip-1"} for text in SESSION]
    unasked, other, one_sentence = (ScriptedReranker("dunes") for _ in range(3))
    for memory in (
        make_memory(reranker=unasked),  # by default the embedder rescores
        make_memory("other", config=_config(tenants=["acme"]), reranker=other),
    ):
        await _learn(memory)
        await memory.rank("road trip", 5)
    memory = make_memory("short", config=_config(), reranker=one_sentence)
    await memory.learn_many(short)  # each scored whole by the vector channel already
    await memory.rank("road trip", 5)
    assert unasked.calls == other.calls == one_sentence.calls == []


async def test_a_failing_reranker_leaves_the_fused_order(make_memory: MemoryFactory) -> None:
    plain = make_memory()
    await _learn(plain)
    expected = [r.fact.fact_id for r in (await plain.rank("road trip dunes", 5)).results]
    failing = ScriptedReranker("dunes", fail=True)
    memory = make_memory(config=_config(weight=10.0), reranker=failing)
    assert [r.fact.fact_id for r in (await memory.rank("road trip dunes", 5)).results] == expected
    assert len(failing.calls) == 1


async def test_without_a_bound_reranker_the_embedder_rescores() -> None:
    reranker = EmbedderReranker(HashingEmbedder())
    scores = await reranker.rerank("camping in the dunes", ["camping in the dunes", "a lighthouse"])
    assert scores[0] > scores[1] and abs(scores[0] - 1.0) < 1e-6


async def test_the_embedder_scores_a_long_memory_by_its_answering_sentence() -> None:
    """The answer is one sentence of a long memory: embedded whole, the rest dilutes it
    below a short memory that shares one word; scored by its best sentence, it wins."""
    long = (
        "Ana: We visited the old harbour museum, ate a late lunch downtown, watched a film "
        "about whales and talked for hours about work and moving house. Then we went "
        "camping in the dunes."
    )
    short = "Ana: the camping gear"
    embedder = HashingEmbedder()
    question = "where did Ana go camping"
    whole = embedder.embed_sync([question, long, short])
    assert whole[1] @ whole[0] < whole[2] @ whole[0]  # a whole-passage cosine loses it
    scores = await EmbedderReranker(embedder).rerank(question, [long, short])
    assert scores[0] > scores[1]


def test_sentences_keep_the_label_of_their_line() -> None:
    text = "Ana: We drove north. Did we camp? Yes!\nBen: Nice\nno label here. Second one"
    assert sentences(text) == [
        "Ana: We drove north.",
        "Ana: Did we camp?",
        "Ana: Yes!",
        "Ben: Nice",
        "no label here.",
        "Second one",
    ]
    assert sentences("") == [""]  # never empty: the passage itself stands
    # A colon after more than 40 characters ends no label: the sentences stand alone.
    lead = "after a long week of planning and packing the car"
    assert sentences(f"{lead}: we drove. Then we camped.") == [
        f"{lead}: we drove.",
        "Then we camped.",
    ]


async def test_recall_through_the_front_door_uses_the_bound_reranker(tmp_path: Path) -> None:
    """`Memory.semantic` (what MCP, the agent and the memory API recall through) hands the
    tier the deployment's reranker (Workers AI on Cloudflare), not the embedder fallback."""
    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    try:
        await runtime.migrate()
        reranker = ScriptedReranker("dunes")
        rerank = {"rerank": {"depth": 10, "weight": 10.0, "scorer": "bound"}}
        settings = Settings.from_vars({"MEMORY_RETRIEVAL_CONFIG": json.dumps(rerank)})
        bindings = dataclasses.replace(runtime.bindings(), settings=settings, reranker=reranker)
        memory = (await Memory.open(bindings, "acme")).semantic()
        await _learn(memory)
        ranked = await memory.rank("what did Ana do on the road trip", 3)
        assert reranker.calls and "dunes" in ranked.results[0].fact.content
    finally:
        await runtime.close()


def test_the_gate_counts_sentences_as_the_scorer_reads_them() -> None:
    # Two unpunctuated lines are two sentences to the scorer (`sentences`), so to the gate too.
    two_lines = "Ana: we moved to Lisbon\nAna: the flat has a garden"
    assert RerankConfig().applies("acme", [two_lines])
    assert not RerankConfig().applies("acme", ["Ana: we moved to Lisbon"])
