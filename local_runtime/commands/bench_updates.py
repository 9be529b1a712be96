"""`agent-memory bench updates` (and `benchmarks/updates.py`): the knowledge-update
benchmark over `benchmarks/data/update_cases.json`; its cases, halves, method and results
are in docs/semantic-memory.md, "Benchmark", and each figure's definition in `figures()`.

The adjudicator here is a scripted oracle (`OracleLLM`: it answers from the cases' ground
truth): its figures bound what a perfect model could add; they are not any real model's.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
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
HALVES = ("tune", "report")


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return cases


def half(case: dict[str, Any]) -> str:
    """The case's half, fixed by a hash of its statements: `tune` or `report`."""
    digest = hashlib.sha256("\n".join(case["statements"]).encode()).digest()
    return HALVES[digest[0] % 2]


def written(case: dict[str, Any]) -> list[str]:
    """The case's statements in the order they are written: look-alikes after the first."""
    first, *rest = case["statements"]
    return [first, *case.get("lookalikes", []), *rest]


class OracleLLM:
    """The scripted adjudicator's model: `update` when both statements belong to one
    `update` case's chain, the newer later in it; `duplicate` within a `merge` case; else
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
        answers = []
        for number, older_text, newer_text in re.findall(
            r"^(\d+)\. Entity: .*\nOLDER: (.*)\nNEWER: (.*)$", messages[-1].content, re.MULTILINE
        ):
            older, newer = self._where.get(older_text), self._where.get(newer_text)
            word = "compatible"
            if older and newer and older[0] == newer[0]:
                word = {"update": "update", "merge": "duplicate"}.get(older[2], "compatible")
                word = word if newer[1] > older[1] or word == "duplicate" else "compatible"
            answers.append(f"{number}: {word}")
        reply = ChatMessage(role="assistant", content="\n".join(answers))
        return ChatResult(message=reply, model=self.model)


async def run_updates_bench(
    embedder: Embedder,
    root: Path,
    cases: Sequence[dict[str, Any]],
    *,
    llm: bool,
    seed: int = 25,
    per_tenant: int = 10,
    misses: list[str] | None = None,
) -> dict[str, dict[str, float]]:
    """The figures (see the module docstring) for `all` cases and each half; `misses`
    collects what went wrong."""
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
    n: dict[str, defaultdict[str, int]] = {h: defaultdict(int) for h in ("all", *HALVES)}

    def count(case: dict[str, Any], name: str, value: int | bool = 1) -> None:
        for key in ("all", half(case)):
            n[key][name] += int(value)

    def missed(case: dict[str, Any], what: str) -> None:
        if misses is not None:
            misses.append(f"[{half(case)}] {what}")

    try:
        for start in range(0, len(order), per_tenant):
            tenant = f"bench-updates-{start // per_tenant:03d}"
            group = [cases[i] for i in order[start : start + per_tenant]]
            dispatcher = McpMemoryTools(runtime.bindings())
            for position in range(max(len(written(c)) for c in group)):
                for case in group:
                    if position < len(written(case)):
                        text = written(case)[position]
                        await dispatcher.call(tenant, "store_memory", {"content": text})
                        clock.advance(60)

            async def ranked(
                question: str, dispatcher: Any = dispatcher, tenant: str = tenant
            ) -> list[str]:
                result = await dispatcher.call(
                    tenant, "recall_memory", {"query": question, "top_k": 5}
                )
                return [str(r["content"]) for r in result["results"]]

            updates = [c for c in group if c["expect"] == "update"]
            for case in updates:
                top = await ranked(case["question"])
                count(case, "before", top[:1] == case["statements"][-1:])
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
            for decision in report.decisions:
                unsure = decision.decision == "unsure" or decision.adjudicator.startswith("llm")
                n["all"]["pairs"] += 1
                n["all"]["unsure"] += unsure

            def above(top: list[str], asked: Sequence[str], others: Sequence[str]) -> bool:
                """Whether one of `others` ranks above every statement in `asked` (about the
                asked entity; absent: below everything)."""
                at = min((top.index(t) for t in asked if t in top), default=len(top))
                return any(o in top[:at] for o in others)

            for case in group:
                latest = case["statements"][-1]
                if case["expect"] == "update":
                    top = await ranked(case["question"])
                    count(case, "updates")
                    count(case, "after", top[:1] == [latest])
                    if top[:1] != [latest]:
                        missed(case, f"latest not first: {case['question']} -> {top[:1]}")
                    if case.get("lookalikes"):
                        count(case, "lookalike_questions")
                        wrong = above(top, case["statements"], case["lookalikes"])
                        count(case, "lookalike_above", wrong)
                        if wrong:
                            missed(case, f"look-alike above: {case['question']} -> {top[:2]}")
                for question, i in case.get("asks", []):
                    top = await ranked(question)
                    answer = case["statements"][i]
                    first = top[:1] == [answer]
                    count(case, "asks")
                    count(case, "asks_first", first)
                    if case["kind"] == "sibling":
                        count(case, "sibling_asks")
                        count(case, "siblings_found", first)
                    if case["kind"] == "lookalike":
                        others = [t for t in case["statements"] if t != answer]
                        wrong = above(top, [answer], others)
                        count(case, "lookalike_questions")
                        count(case, "lookalike_above", wrong)
                    if not first:
                        missed(case, f"{case['kind']} ask not first: {question} -> {top[:1]}")
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
                lost_lookalike = any(
                    state.get(t, ("",))[0] == "superseded" for t in case.get("lookalikes", [])
                )
                wrong = (
                    crossed
                    or lost_lookalike
                    or {
                        "keep": bool(gone),
                        "update": texts[-1] in gone,
                        "merge": len(gone) == len({t for t in texts if t in state}),
                    }[case["expect"]]
                )
                count(case, "cases")
                count(case, "false", wrong)
                if wrong:
                    lost = gone + [t for t in case.get("lookalikes", []) if t in state]
                    winners = [(t, state[t][1]) for t in lost if state[t][0] == "superseded"]
                    missed(case, f"false supersession ({case['kind']}): {winners}")
                if case["kind"] == "sibling":
                    count(case, "siblings")
                    count(case, "siblings_kept", not gone)
                if case["expect"] == "merge":
                    count(case, "merges")
                    live = {t for t in texts if t in state and state[t][0] == "active"}
                    count(case, "merged", len(live) == 1 and not crossed)
    finally:
        await runtime.close()

    def figures(c: defaultdict[str, int]) -> dict[str, float]:
        """Shares of: update cases whose top result is the latest statement (before and
        after the reconcile); questions with look-alikes where a statement about the other
        entity ranks above the answer; asks answered first (of siblings' asks); cases where
        a statement that must stay was superseded or merged; sibling cases intact; merge
        cases left with one row; candidate pairs the rules leave `unsure`."""

        def share(a: str, b: str) -> float:
            return round(c[a] / max(c[b], 1), 4)

        return {
            "cases": c["cases"],
            "update_cases": c["updates"],
            "latest_first_before_reconcile": share("before", "updates"),
            "latest_first": share("after", "updates"),
            "lookalike_above": share("lookalike_above", "lookalike_questions"),
            "lookalike_questions": c["lookalike_questions"],
            "asks_first": share("asks_first", "asks"),
            "asks": c["asks"],
            "siblings_found": share("siblings_found", "sibling_asks"),
            "false_supersession": share("false", "cases"),
            "siblings_kept": share("siblings_kept", "siblings"),
            "duplicates_merged": share("merged", "merges"),
            "to_adjudicator": share("unsure", "pairs"),
            "candidate_pairs": c["pairs"],
        }

    return {name: figures(counts) for name, counts in n.items()}


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
    out: dict[str, dict[str, dict[str, float]]] = {}
    misses: list[str] = []
    for name, llm in (("rules", False), ("scripted_llm", True)):
        folder = Path(tempfile.mkdtemp(prefix="agent-memory-bench-updates-"))
        try:
            out[name] = asyncio.run(
                run_updates_bench(
                    embedder,
                    folder,
                    cases,
                    llm=llm,
                    seed=args.seed,
                    misses=misses if name == "rules" else None,
                )
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        for part in ("tune", "report"):
            f = out[name][part]
            print(
                f"{name:13s} {part:6s} {f['cases']:.0f} cases ({f['update_cases']:.0f} updates): "
                f"latest first {f['latest_first']:.1%} (before reconcile "
                f"{f['latest_first_before_reconcile']:.1%}), look-alike above "
                f"{f['lookalike_above']:.1%} of {f['lookalike_questions']:.0f}, asks first "
                f"{f['asks_first']:.1%} of {f['asks']:.0f} (siblings found "
                f"{f['siblings_found']:.1%}), false supersession {f['false_supersession']:.1%}, "
                f"siblings kept {f['siblings_kept']:.1%}, duplicates merged "
                f"{f['duplicates_merged']:.1%}"
            )
        f = out[name]["all"]
        print(
            f"{name:13s} to adjudicator {f['to_adjudicator']:.1%} of "
            f"{f['candidate_pairs']:.0f} candidate pairs"
        )
    if args.misses:
        print("\n".join(misses))
    print(
        f"embedder: {embedder.config.key}; seed {args.seed}; {time.perf_counter() - started:.1f}s"
    )
    print(json.dumps(out, separators=(", ", ": ")))
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=25, help="shuffle seed (default 25)")
    parser.add_argument("--cases", type=int, default=0, help="a spread subset of N cases")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--misses", action="store_true", help="list what the rules got wrong")


def register(bench_sub: Any) -> None:
    updates = bench_sub.add_parser(
        "updates", help="knowledge updates: latest-first recall and false supersession"
    )
    add_arguments(updates)
    updates.set_defaults(func=cmd_bench_updates)
