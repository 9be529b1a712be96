"""`agent-memory bench updates`: the knowledge-update benchmark (issue 16).

A generated, seeded data set (`bench_updates_data.generate`): update chains —
preferences, locations, roles, plans, quantities; 2-4 statements each, some with a
temporal marker ("now", "moved to"), some implicit (the same attribute with a new value) —
mixed with look-alikes that are not updates (two people, two projects, additive facts,
the same person on another topic or attribute). Templates and word pools are general
English; the rules (`agent_memory.tiers.semantic.update_rules`) know nothing of them.

Each household (a few chains and look-alikes, distinct names) is one tenant. Every
statement is stored as free text through the MCP `store_memory` path, a minute apart; the
reconciler runs once; each chain's question is asked through `recall_memory`.

Printed, for the rules adjudicator alone and for a scripted LLM adjudicator:

* `latest_first`: share of chains whose top recall result is the chain's latest statement
  (before the reconcile — recall's stale-statement guard alone — and after it);
* `false_supersession`: share of look-alike pairs with a statement wrongly superseded.

The scripted LLM is an oracle: it answers each pair it is shown from the generator's
ground truth. Its figures bound what candidate generation allows (a perfect model); they
are not the quality of any real model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bindings.ports.embedder import Embedder
from bindings.ports.llm import ChatMessage, ChatResult, ToolSpec
from local_runtime.commands.bench_updates_data import Household, generate


class OracleLLM:
    """The scripted LLM adjudicator's model: answers from the generator's ground truth
    (`update` when both statements belong to one chain, the newer later in it)."""

    def __init__(self, households: Sequence[Household]) -> None:
        self._order: dict[str, tuple[int, int]] = {}
        for h, house in enumerate(households):
            for c, chain in enumerate(house.chains):
                for position, text in enumerate(chain.statements):
                    self._order[text] = (h * 100 + c, position)

    @property
    def model(self) -> str:
        return "scripted-oracle"

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        lines = {
            line.split(": ", 1)[0]: line.split(": ", 1)[1]
            for line in messages[-1].content.splitlines()
            if ": " in line
        }
        older, newer = (
            self._order.get(lines.get("OLDER", "")),
            self._order.get(lines.get("NEWER", "")),
        )
        same = older is not None and newer is not None and older[0] == newer[0]
        word = (
            "update"
            if same and older is not None and newer is not None and newer[1] > older[1]
            else "compatible"
        )
        return ChatResult(message=ChatMessage(role="assistant", content=word), model=self.model)


async def run_updates_bench(
    embedder: Embedder, root: Path, households: Sequence[Household], *, llm: bool
) -> dict[str, float]:
    from agent_memory.agent.memory_tools import SemanticMemoryDispatcher
    from agent_memory.lifecycle.reconciler import LlmAdjudicator, Reconciler, RulesAdjudicator
    from agent_memory.tiers.semantic.memory import SemanticMemory
    from bindings.ports.clock import FixedClock
    from local_runtime.runtime import LocalRuntime

    clock = FixedClock(1_750_000_000.0)
    runtime = LocalRuntime.open(root, embedder=embedder, clock=clock)
    await runtime.migrate()
    latest_before = latest_after = chains = wrong = pairs = 0
    try:
        for index, house in enumerate(households):
            tenant = f"bench-updates-{index:03d}"
            dispatcher = SemanticMemoryDispatcher(runtime.bindings())
            # Interleave: chains advance step by step, look-alikes in between.
            steps: list[str] = [s for pair in house.lookalikes for s in pair.statements[:1]]
            for position in range(4):
                steps += [
                    c.statements[position] for c in house.chains if position < len(c.statements)
                ]
            steps += [s for pair in house.lookalikes for s in pair.statements[1:]]
            for text in steps:
                await dispatcher.call(tenant, "store_memory", {"content": text})
                clock.advance(60)

            async def top(question: str, dispatcher: Any = dispatcher, tenant: str = tenant) -> str:
                result = await dispatcher.call(
                    tenant, "recall_memory", {"query": question, "top_k": 3}
                )
                return str(result["results"][0]["content"]) if result["results"] else ""

            for chain in house.chains:
                latest_before += await top(chain.question) == chain.statements[-1]
            memory = SemanticMemory(
                tenant, db=runtime.db, vectors=runtime.vectors, embedder=embedder, clock=clock
            )
            reconciler = Reconciler(
                tenant,
                db=runtime.db,
                vectors=runtime.vectors,
                memory=memory,
                embedding_key=embedder.config.key,
                clock=clock,
                adjudicator=LlmAdjudicator(OracleLLM(households)) if llm else RulesAdjudicator(),
            )
            await reconciler.run()
            for chain in house.chains:
                chains += 1
                latest_after += await top(chain.question) == chain.statements[-1]
            superseded = (
                await runtime.db.prepare(
                    "SELECT content FROM semantic_facts "
                    "WHERE tenant_id = ? AND status = 'superseded'"
                )
                .bind(tenant)
                .all()
            )
            gone = {str(row["content"]) for row in superseded.results}
            for look in house.lookalikes:
                pairs += 1
                wrong += any(text in gone for text in look.statements)
    finally:
        await runtime.close()
    return {
        "chains": chains,
        "lookalike_pairs": pairs,
        "latest_first_before_reconcile": round(latest_before / max(chains, 1), 4),
        "latest_first": round(latest_after / max(chains, 1), 4),
        "false_supersession": round(wrong / max(pairs, 1), 4),
    }


def cmd_bench_updates(args: argparse.Namespace) -> int:
    from local_runtime.embedder import LocalMiniLMEmbedder

    embedder: Embedder = LocalMiniLMEmbedder()
    households = generate(args.seed, args.households)
    started = time.perf_counter()
    out: dict[str, dict[str, float]] = {}
    for name, llm in (("rules", False), ("scripted_llm", True)):
        folder = Path(tempfile.mkdtemp(prefix="agent-memory-bench-updates-"))
        try:
            out[name] = asyncio.run(run_updates_bench(embedder, folder, households, llm=llm))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        figures = out[name]
        print(
            f"{name:13s} chains {figures['chains']:.0f}, look-alike pairs "
            f"{figures['lookalike_pairs']:.0f}: latest first {figures['latest_first']:.1%} "
            f"(before reconcile {figures['latest_first_before_reconcile']:.1%}), "
            f"false supersession {figures['false_supersession']:.1%}"
        )
    print(
        f"embedder: {embedder.config.key}; seed {args.seed}; {time.perf_counter() - started:.1f}s"
    )
    print(json.dumps(out, separators=(", ", ": ")))
    return 0


def register(bench_sub: Any) -> None:
    updates = bench_sub.add_parser(
        "updates", help="knowledge updates: latest-first recall and false supersession"
    )
    updates.add_argument("--seed", type=int, default=16, help="data set seed (default 16)")
    updates.add_argument(
        "--households", type=int, default=20, help="tenants of 5 chains + 7 look-alikes each"
    )
    updates.set_defaults(func=cmd_bench_updates)
