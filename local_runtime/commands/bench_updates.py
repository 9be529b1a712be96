"""`agent-memory bench updates`: the knowledge-update benchmark (issue 16).

A generated, seeded data set (`generate`): update chains — preferences, locations, roles,
plans, quantities; 2-4 statements each, some with a temporal marker ("now", "moved to"),
some implicit (the same attribute with a new value) — mixed with look-alikes that are not
updates (two people, two projects, additive facts "also likes"). Templates and word pools
are general English; the rules (`agent_memory.tiers.semantic.keys`) know nothing of them.

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
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bindings.ports.embedder import Embedder
from bindings.ports.llm import ChatMessage, ChatResult, ToolSpec


def _split(text: str, sep: str | None = None) -> list[str]:
    return text.split(sep)


NAMES = _split(
    "Alice Bruno Chloe Dmitri Elena Farah Goran Hana Ivan Julia Kenji Lena Marco Nadia Omar "
    "Priya Quinn Rosa Samir Tara Umar Vera Wanda Xavier Yusuf Zoe Aaron Bianca Carlos Daria "
    "Emil Fiona Gustav Helga Igor Jonas Karin Luca Maya Nils Olga Pavel Rita Sven Tomas"
)
CITIES = _split(
    "Berlin Lisbon Oslo Madrid Dublin Vienna Prague Warsaw Athens Helsinki Zurich Porto"
)
ROLES = _split(
    "designer;data analyst;product manager;staff engineer;team lead;sales director;"
    "support engineer;researcher;architect;consultant",
    ";",
)
ORGS = _split("Acme Globex Initech Umbrella Hooli Stark Wayne Tyrell")
TOPICS = (
    ("dark mode", "light mode", "high contrast mode", "every editor"),
    ("tea", "coffee", "hot chocolate", "the morning"),
    ("window seats", "aisle seats", "exit row seats", "long flights"),
    ("email", "phone calls", "chat messages", "urgent questions"),
)
MONTHS = _split("January February March April May June July August September October")
PETS = ("cats", "dogs", "rabbits", "parrots")
PROJECTS = _split("Apollo Zeus Hermes Atlas Orion Vega Nova Titan Lyra Draco")
HOBBIES = _split("jazz;chess;hiking;painting;sailing;pottery;tennis;baking", ";")
LANGUAGES = _split("French Spanish German Italian Japanese Polish")


@dataclass
class Chain:
    kind: str
    statements: list[str]
    question: str


@dataclass
class LookAlike:
    kind: str
    statements: list[str]


@dataclass
class Household:
    chains: list[Chain] = field(default_factory=list)
    lookalikes: list[LookAlike] = field(default_factory=list)


def _pick(rng: random.Random, marked: bool, with_marker: list[str], plain: list[str]) -> str:
    return rng.choice(with_marker if marked else plain)


def _chain(kind: str, name: str, rng: random.Random) -> Chain:
    """One update chain of 2-4 statements; each later statement is phrased with a marker
    ("now", "moved to", "switched to", ...) or implicitly (a new value), at random."""
    length = rng.choice((2, 2, 3, 4))
    statements: list[str] = []
    if kind == "preference":
        *options, context = rng.choice(TOPICS)
        values = rng.sample(options, min(length, len(options)))
        statements.append(f"{name} prefers {values[0]} for {context}")
        for v in values[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [
                        f"{name} now prefers {v} for {context}",
                        f"{name} switched to {v} for {context}",
                        f"{name} prefers {v} for {context} these days",
                    ],
                    [f"{name} prefers {v} for {context}", f"{name} likes {v} best for {context}"],
                )
            )
        return Chain(kind, statements, f"What does {name} prefer for {context}?")
    if kind == "location":
        cities = rng.sample(CITIES, length)
        statements.append(f"{name} lives in {cities[0]}")
        for c in cities[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [
                        f"{name} moved to {c}",
                        f"{name} relocated to {c} last month",
                        f"{name} is now based in {c}",
                    ],
                    [f"{name} lives in {c}", f"{name} lives in {c} with two flatmates"],
                )
            )
        return Chain(kind, statements, f"Where does {name} live?")
    if kind == "role":
        roles, org = rng.sample(ROLES, length), rng.choice(ORGS)
        statements.append(f"{name} works as a {roles[0]} at {org}")
        for r in roles[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [f"{name} now works as a {r} at {org}", f"{name} was promoted to {r} at {org}"],
                    [f"{name} works as a {r} at {org}", f"{name}'s job is {r} at {org}"],
                )
            )
        return Chain(kind, statements, f"What is {name}'s job?")
    if kind == "plan":
        cities, month = rng.sample(CITIES, length), rng.choice(MONTHS)
        statements.append(f"{name} plans to visit {cities[0]} in {month}")
        for c in cities[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [
                        f"{name} changed plans and will visit {c} in {month}",
                        f"{name} now plans to visit {c} in {month} instead",
                    ],
                    [f"{name} plans to visit {c} in {month}"],
                )
            )
        return Chain(kind, statements, f"Which city will {name} visit in {month}?")
    pet = rng.choice(PETS)
    counts = rng.sample(range(1, 9), length)
    statements.append(f"{name} has {counts[0]} {pet}")
    for n in counts[1:]:
        statements.append(
            _pick(
                rng,
                rng.random() < 0.6,
                [f"{name} now has {n} {pet}", f"{name} has {n} {pet} now"],
                [f"{name} has {n} {pet}"],
            )
        )
    return Chain(kind, statements, f"How many {pet} does {name} have?")


LOOKALIKE_KINDS = (
    "two_people",
    "two_people",
    "two_projects",
    "additive",
    "additive",
    "same_person_other_topic",
    "same_person_other_attribute",
)


def _lookalike(kind: str, names: list[str], rng: random.Random) -> LookAlike:
    """Two statements that look like an update and are not one."""
    if kind == "two_people":
        a, b = names.pop(), names.pop()
        shape = rng.randrange(3)
        if shape == 0:
            c1, c2 = rng.sample(CITIES, 2)
            return LookAlike(kind, [f"{a} lives in {c1}", f"{b} lives in {c2}"])
        if shape == 1:
            *options, context = rng.choice(TOPICS)
            v1, v2 = rng.sample(options, 2)
            return LookAlike(
                kind, [f"{a} prefers {v1} for {context}", f"{b} prefers {v2} for {context}"]
            )
        r1, r2 = rng.sample(ROLES, 2)
        org = rng.choice(ORGS)
        return LookAlike(kind, [f"{a} works as a {r1} at {org}", f"{b} works as a {r2} at {org}"])
    if kind == "two_projects":
        p1, p2 = rng.sample(PROJECTS, 2)
        m1, m2 = rng.sample(MONTHS, 2)
        return LookAlike(
            kind,
            [f"Project {p1}'s deadline is in {m1}", f"Project {p2}'s deadline is in {m2}"],
        )
    name = names.pop()
    if kind == "same_person_other_topic":
        (v1, *_, c1), (v2, *_, c2) = rng.sample(TOPICS, 2)
        return LookAlike(kind, [f"{name} prefers {v1} for {c1}", f"{name} prefers {v2} for {c2}"])
    if kind == "same_person_other_attribute":
        shape = rng.randrange(3)
        if shape == 0:
            c1, c2 = rng.sample(CITIES, 2)
            return LookAlike(kind, [f"{name} lives in {c1}", f"{name}'s sister lives in {c2}"])
        if shape == 1:
            p1, p2 = rng.sample(PETS, 2)
            n1, n2 = rng.sample(range(1, 9), 2)
            return LookAlike(kind, [f"{name} has {n1} {p1}", f"{name} has {n2} {p2}"])
        role, org = rng.choice(ROLES), rng.choice(ORGS)
        return LookAlike(
            kind,
            [f"{name} works as a {role} at {org}", f"{name} volunteers at the animal shelter"],
        )
    if rng.random() < 0.5:
        h1, h2 = rng.sample(HOBBIES, 2)
        return LookAlike(kind, [f"{name} likes {h1}", f"{name} also likes {h2}"])
    l1, l2 = rng.sample(LANGUAGES, 2)
    return LookAlike(kind, [f"{name} speaks {l1}", f"{name} speaks {l2} too"])


def generate(seed: int = 16, households: int = 20) -> list[Household]:
    """The data set: `households` tenants of 5 chains and 7 look-alikes each."""
    rng = random.Random(seed)
    out: list[Household] = []
    kinds = ("preference", "location", "role", "plan", "quantity")
    for _ in range(households):
        names = rng.sample(NAMES, 24)
        house = Household()
        for kind in kinds:
            house.chains.append(_chain(kind, names.pop(), rng))
        for kind in LOOKALIKE_KINDS:
            house.lookalikes.append(_lookalike(kind, names, rng))
        out.append(house)
    return out


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
    from agent_memory.lifecycle.adjudicator import LlmAdjudicator, RulesAdjudicator
    from agent_memory.lifecycle.reconciler import Reconciler
    from agent_memory.tiers.semantic import SemanticMemory
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


def dump(households: Sequence[Household]) -> list[dict[str, Any]]:
    """The data set as JSON (for reading it, not needed to run it)."""
    return [
        {
            "chains": [c.__dict__ for c in h.chains],
            "lookalikes": [x.__dict__ for x in h.lookalikes],
        }
        for h in households
    ]
