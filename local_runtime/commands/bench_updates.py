"""`agent-memory bench updates` (and `benchmarks/updates.py`): the knowledge-update
benchmark (issues 16 and 25) over hand-written cases, `benchmarks/data/update_cases.json`.

Each case is a few statements written as people write them, oldest first, and what must
become of them (`expect`):

* `update` (moves, renames, versions, schedules, reversals, partial changes, role and
  quantity changes, negations, multi-step chains): the latest statement must come first
  for the case's `question`; the earlier ones may be superseded;
* `keep` (additive facts, identifier-distinct siblings — invoices, tickets, orders, hosts,
  people with the same first name —, look-alikes about related entities, negations,
  time-bounded statements): nothing may be superseded or merged;
* `merge` (paraphrased and exact duplicates): one row is left; merging is allowed.

Cases are shuffled (seeded) into tenants of `per_tenant`; a tenant's cases are written
step by step (every first statement, then every second, …) through the MCP
`store_memory` path, a minute apart, then one `reconcile`, then each question through
`recall_memory`. Reported for the rules alone and with an adjudicator:

* `latest_first`: share of `update` cases whose top result is the latest statement
  (`latest_first_before_reconcile`: the recall guard alone);
* `false_supersession`: share of all cases where a statement that must stay was superseded
  or merged (any `keep` statement, an `update` case's latest statement, or a statement
  superseded by another case's fact); `siblings_kept`: share of sibling cases intact;
* `duplicates_merged`: share of `merge` cases left with one row;
* `to_adjudicator`: share of candidate pairs the rules cannot settle (`unsure`): the ones
  that go to the adjudicator.

The adjudicator here is a scripted oracle (`OracleLLM`: it answers from the cases' ground
truth): its figures bound what a perfect model could add; they are not any real model's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bindings.ports.embedder import Embedder
from bindings.ports.llm import ChatMessage, ChatResult, ToolSpec

CASES = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "update_cases.json"


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return cases


class OracleLLM:
    """The scripted adjudicator's model: `update` when both statements belong to one
    `update` case, the newer later in it; `duplicate` within a `merge` case; else
    `compatible`."""

    def __init__(self, cases: Sequence[dict[str, Any]]) -> None:
        self._where = {
            text: (n, position, case["expect"])
            for n, case in enumerate(cases)
            for position, text in enumerate(case["statements"])
        }

    @property
    def model(self) -> str:
        return "scripted-oracle"

    async def chat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> ChatResult:
        lines = dict(
            line.split(": ", 1) for line in messages[-1].content.splitlines() if ": " in line
        )
        older, newer = (
            self._where.get(lines.get("OLDER", "")),
            self._where.get(lines.get("NEWER", "")),
        )
        word = "compatible"
        if older and newer and older[0] == newer[0]:
            word = {"update": "update", "merge": "duplicate"}.get(older[2], "compatible")
            word = word if newer[1] > older[1] or word == "duplicate" else "compatible"
        return ChatResult(message=ChatMessage(role="assistant", content=word), model=self.model)


async def run_updates_bench(
    embedder: Embedder,
    root: Path,
    cases: Sequence[dict[str, Any]],
    *,
    llm: bool,
    seed: int = 25,
    per_tenant: int = 10,
    misses: list[str] | None = None,
) -> dict[str, float]:
    """The figures (see the module docstring); `misses` collects what went wrong."""
    from agent_memory.agent.memory_tools import McpMemoryTools
    from agent_memory.lifecycle.reconciler import LlmAdjudicator, Reconciler, RulesAdjudicator
    from agent_memory.tiers.semantic.memory import SemanticMemory
    from bindings.ports.clock import FixedClock
    from local_runtime.runtime import LocalRuntime

    order = list(range(len(cases)))
    random.Random(seed).shuffle(order)
    clock = FixedClock(1_750_000_000.0)
    # No reconcile on the write cadence: the one run below is the measured one.
    runtime = LocalRuntime.open(
        root, embedder=embedder, clock=clock, vars={"MEMORY_RECONCILE_EVERY_WRITES": "0"}
    )
    await runtime.migrate()
    n: defaultdict[str, int] = defaultdict(int)
    try:
        for start in range(0, len(order), per_tenant):
            tenant = f"bench-updates-{start // per_tenant:03d}"
            group = [cases[i] for i in order[start : start + per_tenant]]
            dispatcher = McpMemoryTools(runtime.bindings())
            for position in range(max(len(c["statements"]) for c in group)):
                for case in group:
                    if position < len(case["statements"]):
                        text = case["statements"][position]
                        await dispatcher.call(tenant, "store_memory", {"content": text})
                        clock.advance(60)

            async def top(question: str, dispatcher: Any = dispatcher, tenant: str = tenant) -> str:
                result = await dispatcher.call(
                    tenant, "recall_memory", {"query": question, "top_k": 3}
                )
                return str(result["results"][0]["content"]) if result["results"] else ""

            updates = [c for c in group if c["expect"] == "update"]
            for case in updates:
                n["before"] += await top(case["question"]) == case["statements"][-1]
            memory = SemanticMemory(
                tenant, db=runtime.db, vectors=runtime.vectors, embedder=embedder, clock=clock
            )
            report = await Reconciler(
                tenant,
                db=runtime.db,
                vectors=runtime.vectors,
                memory=memory,
                embedding_key=embedder.config.key,
                clock=clock,
                adjudicator=LlmAdjudicator(OracleLLM(cases)) if llm else RulesAdjudicator(),
            ).run()
            n["pairs"] += len(report.decisions)
            n["unsure"] += sum(
                d.decision == "unsure" or d.adjudicator.startswith("llm") for d in report.decisions
            )
            for case in updates:
                n["updates"] += 1
                first = await top(case["question"])
                n["after"] += first == case["statements"][-1]
                if first != case["statements"][-1] and misses is not None:
                    misses.append(f"latest not first: {case['question']} -> {first}")
            rows = (
                await runtime.db.prepare(
                    "SELECT f.content, f.status, w.content AS winner FROM semantic_facts f "
                    "LEFT JOIN semantic_facts w ON w.tenant_id = f.tenant_id "
                    "AND w.fact_id = f.superseded_by WHERE f.tenant_id = ?"
                )
                .bind(tenant)
                .all()
            )
            state = {str(r["content"]): (str(r["status"]), r["winner"]) for r in rows.results}
            for case in group:
                texts = case["statements"]
                gone = [t for t in texts if t in state and state[t][0] == "superseded"]
                crossed = any(state[t][1] not in texts for t in gone)
                wrong = (
                    crossed
                    or {
                        "keep": bool(gone),
                        "update": texts[-1] in gone,
                        "merge": len(gone) == len({t for t in texts if t in state}),
                    }[case["expect"]]
                )
                n["cases"] += 1
                n["false"] += wrong
                if wrong and misses is not None:
                    misses.append(f"false supersession ({case['kind']}): {gone}")
                if case["kind"] == "sibling":
                    n["siblings"] += 1
                    n["siblings_kept"] += not gone
                if case["expect"] == "merge":
                    n["merges"] += 1
                    live = {t for t in texts if t in state and state[t][0] == "active"}
                    n["merged"] += len(live) == 1 and not crossed
    finally:
        await runtime.close()

    def share(a: str, b: str) -> float:
        return round(n[a] / max(n[b], 1), 4)

    return {
        "cases": n["cases"],
        "update_cases": n["updates"],
        "latest_first_before_reconcile": share("before", "updates"),
        "latest_first": share("after", "updates"),
        "false_supersession": share("false", "cases"),
        "siblings_kept": share("siblings_kept", "siblings"),
        "duplicates_merged": share("merged", "merges"),
        "to_adjudicator": share("unsure", "pairs"),
        "candidate_pairs": n["pairs"],
    }


def cmd_bench_updates(args: argparse.Namespace) -> int:
    embedder: Embedder
    if args.embedder == "hashing":
        from tests.fakes.embedder import HashingEmbedder

        embedder = HashingEmbedder()
    else:
        from local_runtime.embedder import LocalMiniLMEmbedder

        embedder = LocalMiniLMEmbedder()
    cases = load_cases()
    if args.cases:
        cases = cases[:: max(1, len(cases) // args.cases)][: args.cases]
    started = time.perf_counter()
    out: dict[str, dict[str, float]] = {}
    for name, llm in (("rules", False), ("scripted_llm", True)):
        folder = Path(tempfile.mkdtemp(prefix="agent-memory-bench-updates-"))
        try:
            out[name] = asyncio.run(
                run_updates_bench(embedder, folder, cases, llm=llm, seed=args.seed)
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        f = out[name]
        print(
            f"{name:13s} {f['cases']:.0f} cases ({f['update_cases']:.0f} updates): latest first "
            f"{f['latest_first']:.1%} (before reconcile {f['latest_first_before_reconcile']:.1%}), "
            f"false supersession {f['false_supersession']:.1%}, siblings kept "
            f"{f['siblings_kept']:.1%}, duplicates merged {f['duplicates_merged']:.1%}, "
            f"to adjudicator {f['to_adjudicator']:.1%} of {f['candidate_pairs']:.0f} pairs"
        )
    print(
        f"embedder: {embedder.config.key}; seed {args.seed}; {time.perf_counter() - started:.1f}s"
    )
    print(json.dumps(out, separators=(", ", ": ")))
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=25, help="shuffle seed (default 25)")
    parser.add_argument("--cases", type=int, default=0, help="a spread subset of N cases")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")


def register(bench_sub: Any) -> None:
    updates = bench_sub.add_parser(
        "updates", help="knowledge updates: latest-first recall and false supersession"
    )
    add_arguments(updates)
    updates.set_defaults(func=cmd_bench_updates)
