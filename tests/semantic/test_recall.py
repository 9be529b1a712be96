"""recall: tenant scope, namespace + tenant + embedding filters on every vector query,
`tenant_id = ?` first on every D1 query, safe FTS5, hybrid channels, scored results with
their breakdown, events and recall stats, reconciliation of stray vectors, bad input."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.retrieval import RetrievalConfig, ScoringWeights
from agent_memory.tiers.semantic.models import MemoryInputError, RecallFilters
from bindings.ports.clock import FixedClock
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import (
    MemoryFactory,
    event_count,
    fact_rows,
    retrieved_events,
    vector_count,
)
from tests.semantic.fakes import OtherModelEmbedder, SpyD1, SpyVectors

FACTS: list[dict[str, Any]] = [
    {
        "content": "Contact 123456 responded positively to direct ROI framing",
        "subject": "contact:hubspot_id:123456",
        "predicate": "responded_positively_to",
        "object": "direct_roi_framing",
        "confidence": 0.82,
    },
    {"content": "The customer prefers email over phone calls", "subject": "customer:42"},
    {"content": "Pricing page conversion doubled after the redesign", "subject": "website"},
    {"content": "Quarterly budget review happens in March", "subject": "finance"},
    {"content": "Contact 777 ignored the social proof email", "subject": "contact:777"},
]


async def learn_all(memory: Any) -> list[str]:
    return [r.fact_id for r in await memory.learn_many(FACTS)]


async def test_a_tenant_cannot_read_another_tenants_facts(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    acme_ids = await learn_all(make_memory("acme"))
    globex = make_memory("globex")
    for query in ("direct ROI framing", "contact:hubspot_id:123456", "customer email phone"):
        assert (await globex.recall(query, 20)).results == []
        assert (await globex.rank(query, 100)).results == []
    assert await globex.get(acme_ids[0]) is None
    # Deleting another tenant's fact id is a no-op for the owner: row and vector survive.
    result = await globex.delete(acme_ids[0])
    assert not result.row_deleted and not result.vector_deleted
    assert (await make_memory("acme").recall("direct ROI framing", 1)).fact_ids == [acme_ids[0]]
    assert await vector_count(rt) == len(FACTS)


async def test_every_vector_query_carries_namespace_tenant_and_embedding_filters(
    make_memory: MemoryFactory, spy_vectors: SpyVectors
) -> None:
    memory = make_memory("acme")
    await learn_all(memory)
    await memory.recall("ROI framing")
    await memory.recall("email", 3, {"agent_type": "sdr"})
    await memory.rank("pricing", 50)
    assert len(spy_vectors.queries) == 3
    for query in spy_vectors.queries:
        assert query["namespace"] == "agent_memory_semantic:acme"
        assert query["filter"]["tenant_id"] == "acme"
        assert query["filter"]["embedding"] == "test:hashing-bow:384"
        assert query["top_k"] <= 100
    assert spy_vectors.queries[1]["filter"]["agent_type"] == "sdr"


async def test_every_d1_statement_on_tenant_data_is_tenant_first(
    make_memory: MemoryFactory, spy_db: SpyD1, spy_vectors: SpyVectors
) -> None:
    memory = make_memory("acme")
    ids = await learn_all(memory)
    await memory.learn(FACTS[0])
    await memory.recall("responded positively to direct ROI framing", 5, {"min_confidence": 0.5})
    await memory.rank("contact:777", 30)
    spy_vectors.fail_upserts = True
    await memory.learn({"content": "a pending fact"})
    spy_vectors.fail_upserts = False
    await memory.complete_pending()
    await memory.get(ids[1])
    await memory.count()
    await memory.delete(ids[2])
    await retrieved_events(spy_db)
    assert spy_db.sql
    for sql in spy_db.sql:
        flat = " ".join(sql.split())
        if flat.startswith("INSERT"):
            assert re.search(r"\(\s*tenant_id,", flat), flat
        else:
            assert re.search(r"\bWHERE (\w+\.)?tenant_id = \?", flat), flat


async def test_configs_never_mix_a_new_embedding_model_does_not_see_old_vectors(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    ids = await learn_all(make_memory("acme"))
    other = make_memory("acme", embedder=OtherModelEmbedder())
    found = await other.recall("responded positively to direct ROI framing")
    assert found.candidates["vector"] == 0  # the old model's vectors are filtered out
    # D1 stays the source of truth: the keyword channel still finds the fact.
    assert found.fact_ids[0] == ids[0]
    assert "vector" not in found.results[0].channels


async def test_a_just_learned_fact_appears_in_the_next_recall(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    await learn_all(memory)
    new = await memory.learn({"content": "The CFO signs off on purchases above 50k"})
    assert new.fact_id in (await memory.recall("who signs off on purchases?")).fact_ids


async def test_results_carry_their_score_breakdown_and_are_sorted(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    ids = await learn_all(memory)
    found = await memory.recall("responded positively to direct ROI framing", 5)
    assert found.fact_ids[0] == ids[0]
    scores = [r.score for r in found.results]
    assert scores == sorted(scores, reverse=True)
    for result in found.results:
        b = result.breakdown
        assert abs(sum(b.weights.values()) - 1.0) < 1e-9
        expected = (
            b.weights["relevance"] * b.relevance
            + b.weights["recency"] * b.recency
            + b.weights["confidence"] * b.confidence
            + b.weights["density"] * b.density
        )
        assert result.score == pytest.approx(expected)
        for part in (b.relevance, b.recency, b.confidence, b.density):
            assert 0.0 <= part <= 1.0
        summary = result.summary()
        assert set(summary["score_breakdown"]) >= {
            "relevance",
            "recency",
            "confidence",
            "density",
            "weights",
            "channels",
        }
    top = found.results[0]
    # The top fact was found by all three channels (the predicate is named exactly).
    assert set(top.channels) == {"vector", "keyword", "exact"}
    assert top.breakdown.confidence == pytest.approx(0.82)


async def test_exact_subject_match_surfaces_a_fact_the_text_does_not_mention(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    fact = await memory.learn(
        {"content": "Prefers calls on Tuesday mornings", "subject": "contact:hubspot_id:5550"}
    )
    await learn_all(memory)
    # Nothing in the content matches the identifier: only the exact channel finds it...
    found = await memory.recall("what do we know about contact:hubspot_id:5550?", 3)
    assert fact.fact_id in found.fact_ids
    hit = found.results[found.fact_ids.index(fact.fact_id)]
    assert "keyword" not in hit.channels
    assert hit.channels["exact"].raw == pytest.approx(0.5)
    # ...and together with a word of the content it comes first.
    found = await memory.recall("Tuesday calls of contact:hubspot_id:5550", 3)
    assert found.fact_ids[0] == fact.fact_id
    # A subject filter is the precise lookup.
    only = await memory.recall("anything", 5, {"subject": "contact:hubspot_id:5550"})
    assert only.fact_ids == [fact.fact_id]


async def test_tier_weights_come_from_configuration(make_memory: MemoryFactory) -> None:
    only_confidence = RetrievalConfig(
        tiers={
            "semantic": ScoringWeights(
                relevance=0, recency=0, confidence=1, density=0, recency_half_life_days=30
            )
        }
    )
    memory = make_memory(config=only_confidence)
    low = await memory.learn({"content": "alpha beta gamma", "confidence": 0.2})
    high = await memory.learn({"content": "alpha beta delta", "confidence": 0.9})
    found = await memory.recall("alpha beta", 2)
    assert found.fact_ids == [high.fact_id, low.fact_id]
    assert found.results[0].score == pytest.approx(0.9)


async def test_recency_decays_with_the_configured_half_life(
    make_memory: MemoryFactory, clock: FixedClock
) -> None:
    config = RetrievalConfig(
        tiers={
            "semantic": ScoringWeights(
                relevance=0.5, recency=0.5, confidence=0, density=0, recency_half_life_days=10
            )
        }
    )
    memory = make_memory(config=config)
    old = await memory.learn({"content": "the office moved to Berlin"})
    clock.advance(10 * 86_400)
    new = await memory.learn({"content": "the office moved to Lisbon"})
    found = await memory.recall("where did the office move", 2)
    by_id = {r.fact.fact_id: r for r in found.results}
    assert by_id[old.fact_id].breakdown.recency == pytest.approx(0.5)
    assert by_id[new.fact_id].breakdown.recency == pytest.approx(1.0)
    assert found.fact_ids[0] == new.fact_id


async def test_recall_records_an_event_and_updates_recall_stats(
    rt: LocalRuntime, make_memory: MemoryFactory, clock: FixedClock
) -> None:
    memory = make_memory(agent_type="sdr", run_id="01J0000000000000000000RUN9")
    await learn_all(memory)
    clock.advance(60)
    found = await memory.recall("direct ROI framing", 2)
    [event] = await retrieved_events(rt.db)
    assert event.event_id == found.event_id
    assert event.tier == "semantic" and event.agent_type == "sdr"
    assert event.run_id == "01J0000000000000000000RUN9"
    assert [item["id"] for item in event.payload["results"]] == found.fact_ids
    assert [item["score"] for item in event.payload["results"]] == [
        round(r.score, 6) for r in found.results
    ]
    assert event.payload["query"] == "direct ROI framing" and event.payload["top_k"] == 2
    rows = {row["fact_id"]: row for row in await fact_rows(rt)}
    for fact_id, row in rows.items():
        if fact_id in found.fact_ids:
            assert row["recall_count"] == 1
            assert row["last_recalled_at"] == int(clock.now() * 1000)
        else:
            assert row["recall_count"] == 0 and row["last_recalled_at"] is None
    # rank() is for evaluation: it records nothing unless asked.
    await memory.rank("direct ROI framing", 50)
    assert await event_count(rt) == 1


async def test_a_recall_with_no_match_still_emits_its_event(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    found = await make_memory().recall("anything at all")
    assert found.results == [] and found.event_id is not None
    assert await event_count(rt) == 1


async def test_recall_never_returns_a_fact_whose_row_is_gone_and_cleans_its_vector(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory()
    ids = await learn_all(memory)
    # The row disappears behind the memory's back (e.g. a delete whose vector step failed).
    await (
        rt.db.prepare("DELETE FROM semantic_facts WHERE tenant_id = ? AND fact_id = ?")
        .bind("acme", ids[0])
        .run()
    )
    found = await memory.recall("responded positively to direct ROI framing", 20)
    assert ids[0] not in found.fact_ids
    assert ids[0] in found.dropped
    assert await rt.vectors.get_by_ids([ids[0]]) == []  # reconciled
    assert await vector_count(rt) == len(FACTS) - 1


async def test_admin_delete_with_a_failing_vector_store_is_finished_by_a_retry(
    rt: LocalRuntime, make_memory: MemoryFactory, spy_vectors: SpyVectors
) -> None:
    memory = make_memory()
    ids = await learn_all(memory)
    spy_vectors.fail_deletes = True
    first = await memory.delete(ids[0])
    assert first.row_deleted and not first.complete
    assert await vector_count(rt) == len(FACTS)  # the vector is still there...
    found = await memory.recall("responded positively to direct ROI framing", 20)
    assert ids[0] not in found.fact_ids  # ...but recall never returns it
    spy_vectors.fail_deletes = False
    second = await memory.delete(ids[0])
    assert not second.row_deleted and second.vector_deleted and second.complete
    assert await vector_count(rt) == len(FACTS) - 1
    third = await memory.delete(ids[0])
    assert (third.row_deleted, third.vector_deleted, third.complete) == (False, False, True)


async def test_superseded_and_expired_facts_are_not_recalled(
    rt: LocalRuntime, make_memory: MemoryFactory, clock: FixedClock
) -> None:
    memory = make_memory()
    old = await memory.learn({"content": "The renewal date is in June"})
    new = await memory.learn({"content": "The renewal date is in July"})
    await (
        rt.db.prepare(
            "UPDATE semantic_facts SET status = 'superseded', superseded_by = ? "
            "WHERE tenant_id = ? AND fact_id = ?"
        )
        .bind(new.fact_id, "acme", old.fact_id)
        .run()
    )
    expiring = await memory.learn(
        {"content": "The renewal discount offer", "valid_to": clock.now() + 60}
    )
    assert expiring.fact_id in (await memory.recall("renewal", 5)).fact_ids
    clock.advance(120)
    found = await memory.recall("renewal", 5)
    assert found.fact_ids == [new.fact_id]


async def test_filters_narrow_the_results(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    await memory.learn({"content": "likes ROI numbers", "subject": "a", "agent_type": "sdr"})
    await memory.learn({"content": "likes ROI stories", "subject": "b", "confidence": 0.3})
    only_sdr = await memory.recall("ROI", 5, {"agent_type": "sdr"})
    assert [r.fact.subject for r in only_sdr.results] == ["a"]
    only_b = await memory.recall("ROI", 5, RecallFilters(subject="b"))
    assert [r.fact.subject for r in only_b.results] == ["b"]
    confident = await memory.recall("ROI", 5, {"min_confidence": 0.5})
    assert [r.fact.subject for r in confident.results] == ["a"]


async def test_rank_extends_recall_beyond_twenty(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    await memory.learn_many([{"content": f"note {i} about the roadmap"} for i in range(40)])
    top = await memory.recall("roadmap notes", 20)
    ranked = await memory.rank("roadmap notes", 40)
    assert len(ranked.results) == 40
    assert ranked.fact_ids[:20] == top.fact_ids


@pytest.mark.parametrize(
    ("query", "top_k", "filters", "field"),
    [
        ("", 5, None, "query"),
        ("   \n\t", 5, None, "query"),
        ("x" * 2049, 5, None, "query"),
        ("ok", 0, None, "top_k"),
        ("ok", 21, None, "top_k"),
        ("ok", "5", None, "top_k"),
        ("ok", True, None, "top_k"),
        ("ok", 5, {"tenant_id": "globex"}, "filters.tenant_id"),
        ("ok", 5, {"min_confidence": 2}, "filters.min_confidence"),
    ],
)
async def test_bad_recall_input_is_a_clear_error_and_changes_nothing(
    rt: LocalRuntime,
    make_memory: MemoryFactory,
    spy_vectors: SpyVectors,
    query: Any,
    top_k: Any,
    filters: Any,
    field: str,
) -> None:
    memory = make_memory()
    await learn_all(memory)
    before = await fact_rows(rt)
    with pytest.raises(MemoryInputError) as caught:
        await memory.recall(query, top_k, filters)
    assert [p["field"] for p in caught.value.problems] == [field]
    assert caught.value.code == "validation_error"
    assert spy_vectors.queries == []
    assert await event_count(rt) == 0 and await fact_rows(rt) == before


NASTY_QUERIES = [
    '"',
    '""',
    "AND OR NOT",
    "NEAR(roi framing, 2)",
    "content: roi",
    "tenant_id:globex",
    "roi*",
    "^roi",
    "(roi OR",
    "'; DROP TABLE semantic_facts; --",
    "ROI? ROI! ROI...",
    "c'est la vie — déjà vu",
    "数据 ROI 🚀",
    "-roi +framing",
    "{roi}",
]


@pytest.mark.parametrize("query", NASTY_QUERIES)
async def test_punctuation_and_fts_syntax_in_queries_never_break_recall(
    rt: LocalRuntime, make_memory: MemoryFactory, query: str
) -> None:
    memory = make_memory()
    ids = await learn_all(memory)
    found = await memory.recall(query, 5)
    if "roi" in query.lower():
        assert ids[0] in found.fact_ids
    assert len(await fact_rows(rt)) == len(FACTS)  # the table is still there


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=st.text(min_size=1, max_size=80))
async def test_any_text_is_a_valid_query_or_a_clear_input_error(
    make_memory: MemoryFactory, query: str
) -> None:
    memory = make_memory()
    try:
        await memory.recall(query, 3)
    except MemoryInputError as exc:
        assert not query.strip() or exc.problems[0]["field"] == "query"


async def test_a_short_recall_ranks_its_head_exactly_as_a_full_ranking(
    make_memory: MemoryFactory,
) -> None:
    # 90 facts whose information density (distinct words) pulls against their relevance
    # (more words: a lower keyword and vector score). Recall computes density only while it
    # can still change the head, a full ranking for every candidate: the heads agree,
    # scores included. (The skip rule itself is pinned by tests/core/test_ranking.py.)
    memory = make_memory()
    fillers = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    await memory.learn_many(
        [
            {"content": f"roadmap {' '.join(fillers[: i % 9])} item{i}", "subject": f"s{i}"}
            for i in range(90)
        ]
    )
    full = await memory.rank("roadmap", 90)
    for k in (1, 5, 20):
        head = await memory.recall("roadmap", k)
        assert head.fact_ids == full.fact_ids[:k]
        assert [r.score for r in head.results] == [r.score for r in full.results[:k]]
