"""The reconciler: each step as a pure function over rows, then one end-to-end run over a
tenant's real memory (D1 + the local vector index), through the admin route too."""

from __future__ import annotations

import json
from typing import Any

from agent_memory.governance.writes import EventLog
from agent_memory.lifecycle.reconciler import (
    ReconcileConfig,
    Reconciler,
    find_decay,
    find_duplicates,
    find_links,
    find_promotions,
    resolve_conflicts,
)
from agent_memory.tiers.semantic.memory import FactHistory, SemanticMemory
from agent_memory.tiers.semantic.reconcile import EpisodeRow, FactRow
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from tests.lifecycle.conftest import DAY_MS, NOW_MS, count, seed_episodes, ulid_at
from worker.app import handle

CONFIG = ReconcileConfig()


def fact(fact_id: str, **fields: Any) -> FactRow:
    base: dict[str, Any] = {
        "fact_id": fact_id,
        "subject": "acme",
        "predicate": "states",
        "object": "",
        "content": f"content of {fact_id}",
        "content_hash": "h",
        "confidence": 0.7,
        "source": "learn",
        "created_at": NOW_MS,
        "updated_at": NOW_MS,
        "valid_from": NOW_MS,
    }
    base.update(fields)
    return FactRow(**base)


def episode(episode_id: str, **fields: Any) -> EpisodeRow:
    base: dict[str, Any] = {
        "episode_id": episode_id,
        "subject": "contact:1",
        "kind": "observation",
        "content": f"episode {episode_id}",
        "importance": 0.5,
        "created_at": NOW_MS,
    }
    base.update(fields)
    return EpisodeRow(**base)


# --- dedup -------------------------------------------------------------------------------


def test_exact_duplicates_keep_the_higher_confidence_entry() -> None:
    a = fact("A", content="Acme prefers email", confidence=0.6)
    b = fact("B", content="acme  prefers EMAIL", confidence=0.9)  # same normalised hash
    merges = find_duplicates([a, b], {}, CONFIG)
    assert [(m.keep, m.drop, m.reason) for m in merges] == [("B", "A", "exact")]


def test_exact_duplicates_across_the_catch_all_subject_keep_the_specific_one() -> None:
    general = fact("G", subject="general", content="Acme prefers email", created_at=1)
    specific = fact("S", subject="acme", content="Acme prefers email", created_at=2)
    merges = find_duplicates([general, specific], {}, CONFIG)
    assert [(m.keep, m.drop) for m in merges] == [("S", "G")]


def test_the_same_text_about_two_subjects_is_not_a_duplicate() -> None:
    merges = find_duplicates(
        [
            fact("A", subject="acme", content="prefers email"),
            fact("B", subject="globex", content="prefers email"),
        ],
        {},
        CONFIG,
    )
    assert merges == []


def test_near_duplicates_by_embedding_similarity_within_a_subject() -> None:
    facts = [
        fact("A", content="Acme prefers email", confidence=0.9),
        fact("B", content="Acme likes email best", confidence=0.5),
        fact("C", content="Acme is in Berlin", confidence=0.5),
        fact("D", subject="globex", content="Globex prefers email", confidence=0.5),
    ]
    vectors = {
        "A": [1.0, 0.0, 0.0],
        "B": [0.99, 0.1, 0.0],  # cosine ≈ 0.995 with A
        "C": [0.0, 1.0, 0.0],
        "D": [1.0, 0.0, 0.0],  # identical vector, other subject
    }
    merges = find_duplicates(facts, vectors, CONFIG)
    assert [(m.keep, m.drop, m.reason) for m in merges] == [("A", "B", "similar")]
    assert merges[0].similarity >= CONFIG.similarity_threshold
    looser = ReconcileConfig(similarity_threshold=0.999)
    assert find_duplicates(facts, vectors, looser) == []


def test_a_chain_of_duplicates_collapses_into_one_survivor() -> None:
    texts = {"A": "pays quarterly", "B": "pays every quarter", "C": "pays each quarter"}
    facts = [
        fact(x, content=texts[x], confidence=c) for x, c in (("A", 0.9), ("B", 0.8), ("C", 0.7))
    ]
    vectors = {"A": [1.0, 0.0], "B": [1.0, 0.01], "C": [1.0, 0.02]}
    merges = find_duplicates(facts, vectors, CONFIG)
    assert {(m.keep, m.drop) for m in merges} == {("A", "B"), ("A", "C")}


# --- conflicts ---------------------------------------------------------------------------


def test_conflicts_never_go_backwards_in_time_nor_past_a_more_trusted_source() -> None:
    old_sure = fact(
        "OLD",
        predicate="hq_city",
        object="Berlin",
        confidence=0.9,
        updated_at=NOW_MS - 60 * DAY_MS,
        created_at=NOW_MS - 60 * DAY_MS,
        valid_from=NOW_MS - 60 * DAY_MS,
    )
    new_unsure = fact("NEW", predicate="hq_city", object="Paris", confidence=0.6)
    # The newer statement wins even when the older one was stated more confidently.
    [loss] = resolve_conflicts([new_unsure, old_sure], CONFIG)
    assert (loss.winner, loss.loser) == ("NEW", "OLD")
    # A less trusted newer statement does not supersede a trusted one, nor is it
    # superseded by it (backwards in time): both stay active.
    admin = fact(
        "ADM",
        predicate="hq_city",
        object="Berlin",
        confidence=0.9,
        source="admin",
        updated_at=NOW_MS - DAY_MS,
        created_at=NOW_MS - DAY_MS,
        valid_from=NOW_MS - DAY_MS,
    )
    mcp = fact("MCP", predicate="hq_city", object="Paris", confidence=0.9, source="anonymous")
    assert resolve_conflicts([admin, mcp], CONFIG) == []


def test_no_conflict_for_one_object_or_a_multi_valued_predicate() -> None:
    same = [
        fact("A", predicate="hq_city", object="Berlin"),
        fact("B", predicate="hq_city", object="berlin"),
    ]
    assert resolve_conflicts(same, CONFIG) == []
    many = [fact("A", predicate="states", object="x"), fact("B", predicate="states", object="y")]
    assert resolve_conflicts(many, CONFIG) == []
    custom = ReconcileConfig(multi_valued_predicates=frozenset({"likes"}))
    likes = [
        fact("A", predicate="likes", object="tea"),
        fact("B", predicate="likes", object="jazz"),
    ]
    assert resolve_conflicts(likes, custom) == []


# --- promotion -----------------------------------------------------------------------------


def observing(episode_id: str, obj: str, confidence: float = 0.9, **fields: Any) -> EpisodeRow:
    data = {
        "observations": [{"predicate": "prefers_channel", "object": obj, "confidence": confidence}]
    }
    return episode(episode_id, data=data, **fields)


def test_a_recurring_consistent_confident_observation_is_promoted() -> None:
    episodes = [observing(f"E{i}", "email") for i in range(3)]
    [promotion] = find_promotions(episodes, CONFIG)
    assert (promotion.subject, promotion.predicate, promotion.object) == (
        "contact:1",
        "prefers_channel",
        "email",
    )
    assert promotion.episode_ids == ("E0", "E1", "E2")
    assert promotion.content == "contact:1 prefers channel email"
    assert promotion.confidence == 0.9


def test_promotion_needs_enough_episodes_consistency_and_confidence() -> None:
    assert find_promotions([observing("E0", "email"), observing("E1", "email")], CONFIG) == []
    inconsistent = [observing("E0", "email"), observing("E1", "email"), observing("E2", "phone")]
    assert find_promotions(inconsistent, CONFIG) == []
    unsure = [observing(f"E{i}", "email", confidence=0.5) for i in range(3)]
    assert find_promotions(unsure, CONFIG) == []
    known = {("contact:1", "prefers_channel", "email")}
    assert find_promotions([observing(f"E{i}", "email") for i in range(3)], CONFIG, known) == []


def test_plain_observation_episodes_recurring_verbatim_are_promoted() -> None:
    episodes = [
        episode(f"E{i}", content="Prefers calls after 5pm", importance=0.9) for i in range(3)
    ]
    [promotion] = find_promotions(episodes, CONFIG)
    assert promotion.predicate == "observed" and promotion.content == "Prefers calls after 5pm"


# --- decay ---------------------------------------------------------------------------------


def test_salient_episodes_past_ttl_are_summarised_per_subject() -> None:
    old = NOW_MS - 40 * DAY_MS
    episodes = [
        episode("E1", content="Signed the contract", importance=0.9, created_at=old),
        episode("E2", content="Asked for a discount", importance=0.8, created_at=old + 1),
        episode("E3", content="said hi", importance=0.2, created_at=old),  # not salient
        episode("E4", content="Renewed", importance=0.9, created_at=NOW_MS),  # not expired
        episode("E5", subject="contact:2", content="Churned", importance=0.95, created_at=old),
    ]
    summaries = find_decay(episodes, NOW_MS, CONFIG)
    assert [(s.subject, s.episode_ids) for s in summaries] == [
        ("contact:1", ("E1", "E2")),
        ("contact:2", ("E5",)),
    ]
    assert "Signed the contract" in summaries[0].content
    assert "said hi" not in summaries[0].content
    assert summaries[0].confidence == 0.85
    assert find_decay(episodes, NOW_MS, CONFIG, summarised={"E1", "E2", "E5"}) == []


# --- links ---------------------------------------------------------------------------------


def test_links_connect_close_neighbours_both_ways() -> None:
    neighbours = {
        "A": [("A", 1.0), ("B", 0.91), ("C", 0.5), ("GONE", 0.99)],
        "B": [("B", 1.0), ("A", 0.91)],
    }
    links = find_links(["A", "B"], neighbours, live={"A", "B", "C"}, config=CONFIG)
    assert [(link.from_fact_id, link.to_fact_id, link.score) for link in links] == [
        ("A", "B", 0.91),
        ("B", "A", 0.91),
    ]


# --- end to end ---------------------------------------------------------------------------


async def facts_by_id(rt: LocalRuntime) -> dict[str, dict[str, Any]]:
    result = await rt.db.prepare("SELECT * FROM semantic_facts WHERE tenant_id = 'acme'").all()
    return {r["fact_id"]: r for r in result.results}


def reconciler(rt: LocalRuntime, memory: SemanticMemory) -> Reconciler:
    return Reconciler(
        "acme",
        db=rt.db,
        vectors=rt.vectors,
        memory=memory,
        embedding_key=rt.embedder.config.key,
        clock=rt.clock,
    )


async def test_end_to_end_reconcile_over_a_tenants_memory(rt: LocalRuntime) -> None:
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    # Exact duplicate across the catch-all subject; near duplicate (same words, reordered:
    # identical under the hashing embedder) within a subject.
    general = await memory.learn({"content": "Acme pays invoices quarterly", "confidence": 0.6})
    specific = await memory.learn(
        {"content": "Acme pays invoices quarterly", "subject": "acme", "confidence": 0.8}
    )
    near_a = await memory.learn(
        {"content": "acme renewal owner is dana", "subject": "acme", "confidence": 0.9}
    )
    near_b = await memory.learn(
        {"content": "dana is acme renewal owner", "subject": "acme", "confidence": 0.5}
    )
    # A conflict: the newer, equally confident statement wins.
    rt.clock.advance(-10 * 86_400)
    old_city = await memory.learn(
        {
            "content": "Acme HQ is in Berlin",
            "subject": "acme",
            "predicate": "hq_city",
            "object": "Berlin",
            "confidence": 0.8,
        }
    )
    rt.clock.advance(10 * 86_400)
    new_city = await memory.learn(
        {
            "content": "Acme HQ moved to Paris",
            "subject": "acme",
            "predicate": "hq_city",
            "object": "Paris",
            "confidence": 0.8,
        }
    )
    # Episodes: a consistent observation in three runs; salient episodes past the TTL.
    obs = {"observations": [{"predicate": "prefers_channel", "object": "email", "confidence": 0.9}]}
    observed = await seed_episodes(
        rt.db, "acme", [NOW_MS - 3, NOW_MS - 2, NOW_MS - 1], subject="contact:7", data=obs
    )
    old_ids = []
    for i, text in enumerate(["Signed a three year deal", "Asked for SSO"]):
        old_ids += await seed_episodes(
            rt.db,
            "acme",
            [NOW_MS - 40 * DAY_MS + i],
            subject="contact:9",
            content=text,
            data={"n": i},
        )
    await rt.db.prepare(
        "UPDATE memory_episodes SET importance = 0.9 WHERE tenant_id = 'acme' "
        "AND subject = 'contact:9'"
    ).run()
    vectors_before = (await rt.vectors.describe()).vector_count

    report = await reconciler(rt, memory).run()

    assert (report.merged_exact, report.merged_similar) == (1, 1)
    assert report.superseded_conflicts == 1
    assert (report.promoted, report.summarised) == (1, 1)
    rows = await facts_by_id(rt)
    # Losers are kept, superseded by the winner, with a validity end; never deleted.
    for loser, winner in (
        (general.fact_id, specific.fact_id),
        (near_b.fact_id, near_a.fact_id),
        (old_city.fact_id, new_city.fact_id),
    ):
        assert rows[loser]["status"] == "superseded"
        assert rows[loser]["superseded_by"] == winner
        assert rows[loser]["valid_to"] is not None
        assert rows[winner]["status"] == "active"
    # Their vectors are gone, so recall's candidate pool is not spent on them.
    assert (await rt.vectors.get_by_ids([general.fact_id, near_b.fact_id, old_city.fact_id])) == []
    promoted = next(r for r in rows.values() if r["predicate"] == "prefers_channel")
    assert (promoted["subject"], promoted["object"], promoted["source"]) == (
        "contact:7",
        "email",
        "reconciler",
    )
    provenance = await rt.db.prepare(
        "SELECT fact_id, source_kind, source_id, relation FROM fact_provenance "
        "WHERE tenant_id = 'acme' ORDER BY relation, source_id"
    ).all()
    links = {(r["fact_id"], r["source_id"], r["relation"]) for r in provenance.results}
    assert {(promoted["fact_id"], e, "promoted_from") for e in observed} <= links
    assert (specific.fact_id, general.fact_id, "merged_from") in links
    summary = next(r for r in rows.values() if r["predicate"] == "summary_of_episodes")
    assert summary["subject"] == "contact:9" and "Signed a three year deal" in summary["content"]
    assert {(summary["fact_id"], e, "summarised_from") for e in old_ids} <= links
    # Every write went through the policy and left an event (a created fact is its own:
    # its id is the fact's, whose row says the source).
    written = await EventLog("acme", rt.db).rows(
        "kind = 'memory_written' AND (json_extract(payload, '$.source') = 'reconciler' "
        "OR event_id IN (SELECT fact_id FROM semantic_facts WHERE source = 'reconciler'))",
        limit=100,
    )
    assert len(written) == 3 + 2  # three supersessions, one promotion, one summary
    assert (await rt.vectors.describe()).vector_count == vectors_before - 3 + 2

    # Running it again finds nothing new to do.
    again = await reconciler(rt, memory).run()
    assert (again.merged_exact, again.merged_similar, again.superseded_conflicts) == (0, 0, 0)
    assert (again.promoted, again.summarised, again.links_added) == (0, 0, 0)


async def test_linking_joins_close_facts_both_ways(rt: LocalRuntime) -> None:
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    a = await memory.learn(
        {"content": "billing data for acme lives in postgres", "subject": "acme"}
    )
    b = await memory.learn(
        {"content": "postgres lives in acme for billing data", "subject": "acme-billing"}
    )
    await memory.learn({"content": "globex prefers phone calls", "subject": "globex"})
    report = await reconciler(rt, memory).run()
    assert report.links_added == 2  # a <-> b (the same words: cosine 1 under hashing)
    history = FactHistory(rt.db, "acme")
    assert [row["other_id"] for row in await history.links_of(a.fact_id, True, 10)] == [b.fact_id]
    assert [row["other_id"] for row in await history.links_of(a.fact_id, False, 10)] == [b.fact_id]


async def test_reconcile_route_is_access_gated_and_reports(rt: LocalRuntime) -> None:
    memory = SemanticMemory(
        "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
    )
    await memory.learn({"content": "Acme pays quarterly", "confidence": 0.5})
    await memory.learn({"content": "Acme pays quarterly", "subject": "acme", "confidence": 0.9})
    anonymous = await handle(build_request("POST", "/admin/tenants/acme/reconcile"), rt.bindings())
    assert anonymous.status == 401
    assert (
        await count(rt.db, "SELECT COUNT(*) AS n FROM semantic_facts WHERE status = 'superseded'")
        == 0
    )
    token = mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())
    response = await handle(
        build_request("POST", "/admin/tenants/acme/reconcile", token=token), rt.bindings()
    )
    assert response.status == 200
    body = json.loads(response.body)
    assert body["tenant_id"] == "acme" and body["merged_exact"] == 1
    bad = await handle(
        build_request("POST", "/admin/tenants/acme/reconcile", {"steps": 1}, token=token),
        rt.bindings(),
    )
    assert bad.status == 422


def test_ulid_helper_is_time_ordered() -> None:
    assert ulid_at(1) < ulid_at(2)
