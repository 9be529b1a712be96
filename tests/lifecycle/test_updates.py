"""Knowledge updates in free text (issue 16), end to end through the MCP `store_memory` path
of the local runtime, `agent-memory reconcile`, and recall: the newer statement first
before the reconciler runs, the older one superseded and linked after it, and as-of recall
answering with what was believed at the time."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent_memory.agent.memory_tools import McpMemoryTools
from agent_memory.directory import on_shard
from agent_memory.lifecycle.reconciler import LlmAdjudicator, Reconciler, RulesAdjudicator
from agent_memory.tiers.semantic.memory import SemanticMemory
from bindings.ports.clock import FixedClock
from bindings.ports.llm import ChatMessage, ChatResult, LLMError, ToolSpec
from local_runtime.cli import main
from local_runtime.commands import lifecycle
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.lifecycle.conftest import NOW

DARK = "Alice prefers dark mode in every editor"
LIGHT = "Alice now prefers light mode in every editor"
QUESTION = "which theme does Alice like?"


def open_runtime(root: Path, clock: FixedClock) -> LocalRuntime:
    return LocalRuntime.open(root, embedder=HashingEmbedder(), clock=clock)


async def store(runtime: LocalRuntime, content: str, **metadata: Any) -> dict[str, Any]:
    dispatcher = McpMemoryTools(runtime.bindings())
    args: dict[str, Any] = {"content": content}
    if metadata:
        args["metadata"] = metadata
    return await dispatcher.call("acme", "store_memory", args)


async def recall(runtime: LocalRuntime, query: str) -> list[dict[str, Any]]:
    dispatcher = McpMemoryTools(runtime.bindings())
    result = await dispatcher.call("acme", "recall_memory", {"query": query, "top_k": 5})
    return list(result["results"])


def memory(runtime: LocalRuntime) -> SemanticMemory:
    return SemanticMemory(
        "acme",
        db=runtime.db,
        vectors=runtime.vectors,
        embedder=runtime.embedder,
        clock=runtime.clock,
    )


def test_dark_mode_then_light_mode_is_an_update_after_one_reconcile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "state"
    clock = FixedClock(NOW)

    async def write_and_read_before() -> list[dict[str, Any]]:
        runtime = open_runtime(root, clock)
        await runtime.migrate()
        await store(runtime, DARK)
        clock.advance(3600)
        await store(runtime, LIGHT)
        try:
            return await recall(runtime, QUESTION)
        finally:
            await runtime.close()

    before = asyncio.run(write_and_read_before())
    # Before any reconcile: both come back, the newer first, the older flagged.
    assert [r["content"] for r in before[:2]] == [LIGHT, DARK]
    assert before[0]["possibly_outdated"] is False
    assert before[1]["possibly_outdated"] is True
    # The first statement named Alice; the second finds her among the tenant's subjects.
    assert before[1]["key"] == {
        "entity": "alice",
        "attribute": "preference",
        "source": "named_entity",
    }
    assert before[0]["key"]["source"] == "known_subject"

    def open_for_cli(args: argparse.Namespace) -> LocalRuntime:
        runtime = open_runtime(args.state, clock)
        asyncio.run(runtime.migrate())
        return runtime

    monkeypatch.setattr(lifecycle, "_open", open_for_cli)
    assert main(["reconcile", "--state", str(root)]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    assert report["superseded_updates"] == 1
    [decision] = [d for d in report["decisions"] if d["decision"] == "update"]
    assert decision["adjudicator"] == "rules"
    assert decision["reason"] == "temporal_marker:now"

    async def read_after() -> tuple[list[dict[str, Any]], Any, Any, list[Any], list[Any]]:
        runtime = open_runtime(root, clock)
        try:
            results = await recall(runtime, QUESTION)
            facts = memory(runtime)
            light = await facts.get(results[0]["id"])
            dark = await facts.get(decision["older"])
            links = await runtime.db.prepare(
                "SELECT from_fact_id, to_fact_id FROM memory_links WHERE tenant_id = 'acme'"
            ).all()
            events = await runtime.db.prepare(
                "SELECT payload FROM memory_events WHERE tenant_id = 'acme' "
                "AND kind = 'memory_written'"
            ).all()
            return results, light, dark, links.results, events.results
        finally:
            await runtime.close()

    results, light, dark, links, events = asyncio.run(read_after())
    assert results[0]["content"] == LIGHT
    assert DARK not in [r["content"] for r in results]
    assert dark is not None and light is not None
    assert dark.status == "superseded" and dark.superseded_by == light.fact_id
    # History kept: the old fact's validity ends when the new one was stated.
    assert dark.valid_to == light.valid_from
    assert {(r["from_fact_id"], r["to_fact_id"]) for r in links} >= {
        (dark.fact_id, light.fact_id),
        (light.fact_id, dark.fact_id),
    }
    payloads = [json.loads(r["payload"]) for r in events]
    [superseded] = [p for p in payloads if "decision" in p]
    assert superseded["supersedes"] == dark.fact_id
    assert superseded["decision"] == {
        "op": "superseded",
        "decision": "update",
        "reason": "temporal_marker:now",
        "adjudicator": "rules",
    }


async def test_as_of_recall_answers_with_what_was_believed_then(tmp_path: Path) -> None:
    clock = FixedClock(NOW)
    runtime = open_runtime(tmp_path / "state", clock)
    await runtime.migrate()
    try:
        await store(runtime, "Bob lives in Berlin")
        clock.advance(86_400)
        await store(runtime, "Bob moved to Munich")
        clock.advance(60)
        reconciler = Reconciler(
            "acme",
            db=runtime.db,
            vectors=runtime.vectors,
            memory=memory(runtime),
            embedding_key=runtime.embedder.config.key,
            clock=clock,
        )
        report = await reconciler.run()
        assert report.superseded_updates == 1
        facts = memory(runtime)
        now_view = await facts.recall("where does Bob live?", 5)
        then_view = await facts.recall("where does Bob live?", 5, {"as_of": NOW + 3600})
        assert [r.fact.content for r in now_view.results] == ["Bob moved to Munich"]
        assert [r.fact.content for r in then_view.results] == ["Bob lives in Berlin"]
    finally:
        await runtime.close()


async def test_look_alikes_are_not_superseded(tmp_path: Path) -> None:
    clock = FixedClock(NOW)
    runtime = open_runtime(tmp_path / "state", clock)
    await runtime.migrate()
    try:
        for text in (
            "Carol works as a nurse in Leeds",
            "Dave works as a pilot in Leeds",  # two people
            "Project Apollo's deadline is March 3",
            "Project Zeus's deadline is April 5",  # two projects
            "Carol likes jazz",
            "Carol also likes blues",  # additive
        ):
            await store(runtime, text)
            clock.advance(600)
        reconciler = Reconciler(
            "acme",
            db=runtime.db,
            vectors=runtime.vectors,
            memory=memory(runtime),
            embedding_key=runtime.embedder.config.key,
            clock=clock,
        )
        report = await reconciler.run()
        assert report.superseded_updates == 0
        assert await memory(runtime).count("superseded") == 0
    finally:
        await runtime.close()


async def test_bad_as_of_is_a_validation_error_and_reads_nothing(tmp_path: Path) -> None:
    runtime = open_runtime(tmp_path / "state", FixedClock(NOW))
    await runtime.migrate()
    try:
        dispatcher = McpMemoryTools(runtime.bindings())
        from agent_memory.tiers.semantic.models import MemoryInputError

        with pytest.raises(MemoryInputError) as raised:
            await dispatcher.call("acme", "recall_memory", {"query": "x", "filters": {"as_of": -5}})
        assert raised.value.to_dict()["error"]["code"] == "validation_error"
    finally:
        await runtime.close()


class _ScriptedJudge:
    """A chat model that answers one fixed word (or fails)."""

    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.asked: list[str] = []

    @property
    def model(self) -> str:
        return "scripted"

    async def chat(
        self, messages: list[ChatMessage] | Any, tools: list[ToolSpec] | Any = ()
    ) -> ChatResult:
        asked = messages[-1].content
        self.asked.append(asked)
        if self.answer is None:
            raise LLMError("down")
        pairs = re.findall(r"^(\d+)\. Entity", asked, re.MULTILINE)
        answer = "\n".join(f"{n}: {self.answer}" for n in pairs)
        return ChatResult(message=ChatMessage(role="assistant", content=answer), model="scripted")


async def test_llm_adjudicator_sees_only_implicit_pairs_and_falls_back_to_rules(
    tmp_path: Path,
) -> None:
    from agent_memory.lifecycle.reconciler import ReconcileConfig, find_update_candidates
    from agent_memory.tiers.semantic.reconcile import FactRow

    def row(fact_id: str, content: str, at: int) -> FactRow:
        from agent_memory.ids import content_hash
        from agent_memory.tiers.semantic.keys import derive_key

        key = derive_key(content)
        return FactRow(
            fact_id=fact_id,
            subject="general",
            predicate="states",
            content=content,
            content_hash=content_hash(content),
            confidence=0.7,
            created_at=at,
            updated_at=at,
            valid_from=at,
            key_entity=key.entity,
            key_attribute=key.attribute,
            key_source=key.source,
        )

    facts = [
        row("A" * 26, "Alice prefers tea with milk", 1),
        row("B" * 26, "Alice prefers coffee with milk", 2),  # implicit: the model decides
        row("C" * 26, "Alice no longer prefers tea with milk", 3),  # negation: the rules
    ]
    pairs = find_update_candidates(facts, {}, ReconcileConfig())
    judge = _ScriptedJudge("compatible")
    decisions = await LlmAdjudicator(judge).decide(pairs)
    by_pair = {(d.older, d.newer): d for d in decisions}
    assert by_pair[("A" * 26, "C" * 26)].adjudicator == "rules"
    assert by_pair[("A" * 26, "B" * 26)].adjudicator == "llm:scripted"
    assert by_pair[("A" * 26, "B" * 26)].decision == "compatible"
    assert all("no longer" not in q for q in judge.asked)
    failing = await LlmAdjudicator(_ScriptedJudge(None)).decide(pairs)
    rules = await RulesAdjudicator().decide(pairs)
    assert [d.decision for d in failing] == [d.decision for d in rules]
    assert all(d.reason.startswith(("llm_error", "temporal", "negation")) for d in failing)


async def test_updates_bench_meets_its_targets_with_rules_alone(tmp_path: Path) -> None:
    """A spread subset of the hand-written cases (every seventh), with the local embedder
    (recall reads its similarities): floors a regression would cross; the whole bench's
    figures per half are in docs/semantic-memory.md."""
    from local_runtime.commands.bench_updates import load_cases, run_updates_bench
    from local_runtime.embedder import LocalMiniLMEmbedder

    cases = load_cases()
    assert len(cases) >= 500
    subset = cases[::7]
    misses: list[str] = []
    figures = await run_updates_bench(
        LocalMiniLMEmbedder(), tmp_path / "s", subset, llm=False, misses=misses
    )
    assert figures["tune"]["cases"] + figures["report"]["cases"] == len(subset)
    figures = figures["all"]
    assert figures["false_supersession"] == 0.0, misses
    assert figures["siblings_kept"] == 1.0, misses
    assert figures["latest_first"] >= 0.85, misses
    assert figures["lookalike_above"] <= 0.05, misses


async def test_unsure_pairs_show_in_the_daily_brief(tmp_path: Path) -> None:
    from agent_memory.lifecycle.brief import build_brief

    clock = FixedClock(NOW)
    runtime = open_runtime(tmp_path / "state", clock)
    await runtime.migrate()
    try:
        # The same attribute, related words, no marker: the rules cannot tell.
        await store(runtime, "Frank runs the marketing team")
        clock.advance(60)
        await store(runtime, "Frank runs the sales team")
        reconciler = Reconciler(
            "acme",
            db=runtime.db,
            vectors=runtime.vectors,
            memory=memory(runtime),
            embedding_key=runtime.embedder.config.key,
            clock=clock,
        )
        report = await reconciler.run()
        assert [d.decision for d in report.decisions] == ["unsure"]
        assert await memory(runtime).count("superseded") == 0
        brief = await build_brief(
            runtime.db, now_ms=int(clock.now() * 1000), default_retention_days=90
        )
        [tenant] = brief.tenants
        assert tenant.updates_unsure == 1
        assert any("unsure" in w for w in brief.warnings)
    finally:
        await runtime.close()


async def test_the_nth_write_reconciles_the_tenant_in_the_background(tmp_path: Path) -> None:
    clock = FixedClock(NOW)
    runtime = LocalRuntime.open(
        tmp_path / "state",
        embedder=HashingEmbedder(),
        clock=clock,
        vars={"MEMORY_RECONCILE_EVERY_WRITES": "3"},
    )
    await runtime.migrate()
    try:
        await store(runtime, "Zoe drinks tea")
        clock.advance(60)
        await store(runtime, DARK)
        clock.advance(60)
        await store(runtime, DARK)  # the same fact again: not a new write, not counted
        await runtime.background.drain()
        assert await memory(runtime).count("superseded") == 0
        await store(runtime, LIGHT)  # the third new fact: a reconcile is scheduled
        await runtime.background.drain()
        results = await recall(runtime, QUESTION)
        assert results[0]["content"] == LIGHT
        assert DARK not in [r["content"] for r in results]
        assert await memory(runtime).count("superseded") == 1
    finally:
        await runtime.close()


async def test_write_count_claims_one_run_per_n_writes(tmp_path: Path) -> None:
    from agent_memory.tiers.semantic.reconcile import note_writes
    from bindings.settings import Settings

    assert Settings().memory_reconcile_every_writes == 20
    runtime = open_runtime(tmp_path / "state", FixedClock(NOW))
    await runtime.migrate()
    try:
        claims = [await note_writes(runtime.db, "acme", 1, 2) for _ in range(5)]
        assert claims == [False, True, False, True, False]
        assert await note_writes(runtime.db, "acme", 0, 2) is False
        assert await note_writes(runtime.db, "globex", 3, 2) is True
    finally:
        await runtime.close()


def test_update_candidates_compare_only_an_entitys_newest_statements() -> None:
    from agent_memory.ids import content_hash
    from agent_memory.lifecycle.reconciler import ReconcileConfig, find_update_candidates
    from agent_memory.tiers.semantic.reconcile import FactRow

    def row(n: int) -> FactRow:
        text = f"I live in city number {n}"
        return FactRow(
            fact_id=f"{n:026d}",
            subject="general",
            predicate="states",
            content=text,
            content_hash=content_hash(text),
            confidence=0.7,
            created_at=n + 1,
            updated_at=n + 1,
            valid_from=n + 1,
            key_entity="user",
            key_attribute="location",
            key_source="speaker",
        )

    facts = [row(n) for n in range(50)]
    pairs = find_update_candidates(facts, {}, ReconcileConfig(max_entity_facts=10))
    assert len(pairs) == 45  # 10 * 9 / 2: the 40 oldest are not compared
    assert min(int(p.older.fact_id) for p in pairs) == 40
    since = find_update_candidates(facts, {}, ReconcileConfig(max_entity_facts=10), since_ms=49)
    assert {p.newer.fact_id for p in since} == {f"{49:026d}"}


async def test_a_failing_reconcile_cadence_never_fails_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_memory.memory

    async def broken(*args: Any) -> bool:
        raise RuntimeError("counter table gone")

    monkeypatch.setattr(agent_memory.memory, "note_writes", broken)
    runtime = open_runtime(tmp_path / "state", FixedClock(NOW))
    await runtime.migrate()
    try:
        assert await store(runtime, DARK) == {"stored": True}
        await runtime.background.drain()
        assert await memory(runtime).count() == 1
        assert "reconcile cadence not counted" in caplog.text
    finally:
        await runtime.close()


async def mcp_call(runtime: LocalRuntime, key: str, name: str, arguments: dict[str, Any]) -> Any:
    from http_messages import Headers, HttpRequest
    from worker.app import handle

    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    ).encode()
    headers = Headers(
        {
            "Authorization": f"Bearer {key}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
    )
    response = await handle(
        HttpRequest("POST", "https://gw.test/mcp", headers, body), runtime.bindings()
    )
    assert response.status == 200, response.body
    result = response.json()["result"]
    assert result["isError"] is False, result
    return json.loads(result["content"][0]["text"])


async def test_over_mcp_the_default_twentieth_write_resolves_the_update(tmp_path: Path) -> None:
    """The issue's example through the Worker's /mcp endpoint with the default cadence: no
    reconcile command, only writes; after the 20th new fact the tenant is reconciled."""
    from gateway import admin_ops
    from gateway.credentials import ISOLATE_CACHE

    clock = FixedClock(NOW)
    runtime = open_runtime(tmp_path / "state", clock)
    await runtime.migrate()
    ISOLATE_CACHE.clear()
    try:
        assert runtime.kv is not None
        await admin_ops.create_tenant(runtime.kv, clock, "acme", memory_enabled=True)
        key = (await admin_ops.issue_api_key(runtime.kv, clock, "acme")).api_key
        await mcp_call(runtime, key, "store_memory", {"content": DARK})
        clock.advance(60)
        await mcp_call(runtime, key, "store_memory", {"content": LIGHT})
        for n in range(17):  # writes 3..19: other people, no update among them
            clock.advance(60)
            await mcp_call(runtime, key, "store_memory", {"content": f"Person{n} owns {n} bikes"})
        await runtime.background.drain()
        assert await memory(runtime).count("superseded") == 0  # 19 writes: not yet
        before = await mcp_call(runtime, key, "recall_memory", {"query": QUESTION})
        assert before["results"][0]["content"] == LIGHT  # the recall guard meanwhile
        assert before["results"][1]["possibly_outdated"] is True
        clock.advance(60)
        await mcp_call(runtime, key, "store_memory", {"content": "Zed owns a red kayak"})
        await runtime.background.drain()
        after = await mcp_call(runtime, key, "recall_memory", {"query": QUESTION})
        assert after["results"][0]["content"] == LIGHT
        assert DARK not in [r["content"] for r in after["results"]]
        light_id = after["results"][0]["id"]
        rows = (
            await runtime.db.prepare(
                "SELECT status, superseded_by FROM semantic_facts WHERE tenant_id = 'acme' "
                "AND content = ?"
            )
            .bind(DARK)
            .all()
        )
        assert [(r["status"], r["superseded_by"]) for r in rows.results] == [
            ("superseded", light_id)
        ]
    finally:
        ISOLATE_CACHE.clear()
        await runtime.close()


async def test_the_adjudicator_setting_picks_the_llm_binding(tmp_path: Path) -> None:
    from agent_memory.memory import Memory

    judge = _ScriptedJudge("update")
    rules = LocalRuntime.open(tmp_path / "a", embedder=HashingEmbedder(), llm=judge)
    llm = LocalRuntime.open(
        tmp_path / "b",
        embedder=HashingEmbedder(),
        llm=judge,
        vars={"MEMORY_UPDATE_ADJUDICATOR": "llm"},
    )
    try:
        assert Memory(on_shard(rules.bindings(), "primary"), "acme").adjudicator().name == "rules"
        assert (
            Memory(on_shard(llm.bindings(), "primary"), "acme").adjudicator().name == "llm:scripted"
        )
    finally:
        await rules.close()
        await llm.close()
