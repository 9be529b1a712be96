"""The per-tenant keyword index (migration 0009): isolation of statistics, consistency on
deletes, bounded cost for common words, contextual indexing, dates and the time filter."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_memory.tiers.semantic import keyword_index as keyword_module
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import MemoryInputError
from local_runtime.background import LocalBackgroundTasks
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import MemoryFactory

ACME: list[dict[str, Any]] = [
    {"content": "Dana booked a pottery workshop for the spring", "subject": "dana"},
    {"content": "Lee prefers pottery over painting", "subject": "lee"},
    {"content": "The workshop budget was approved in March", "subject": "finance"},
    {"content": "Sam is training for a marathon", "subject": "sam"},
]


def _epoch(year: int, month: int, day: int = 1) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


async def _keyword_view(memory: SemanticMemory, query: str) -> list[tuple[str, float]]:
    ranked = await memory.rank(query, 50)
    return [
        (r.fact.fact_id, round(r.channels["keyword"].raw, 9))
        for r in ranked.results
        if "keyword" in r.channels
    ]


async def test_a_tenants_keyword_ranking_ignores_other_tenants_data(
    make_memory: MemoryFactory,
) -> None:
    acme = make_memory("acme")
    await acme.learn_many(ACME)
    before = await _keyword_view(acme, "pottery workshop")
    assert before, "the query matches acme's facts"
    # Another tenant writes many facts holding the same words (changing every global
    # document frequency and average length), then deletes some of them.
    globex = make_memory("globex")
    learned = await globex.learn_many(
        [{"content": f"pottery workshop number {i} " + "filler " * (i % 7)} for i in range(60)]
    )
    for result in learned[:20]:
        await globex.delete(result.fact_id)
    assert await _keyword_view(acme, "pottery workshop") == before


async def test_deleting_a_fact_takes_it_out_of_the_statistics(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory()
    learned = await memory.learn_many(ACME)
    await memory.delete(learned[1].fact_id)
    stats = await rt.db.prepare(
        "SELECT docs, total_length FROM semantic_index_stats WHERE tenant_id = 'acme'"
    ).first()
    rows = (
        await rt.db.prepare(
            "SELECT index_length FROM semantic_facts WHERE tenant_id = 'acme'"
        ).all()
    ).results
    assert stats == {"docs": 3, "total_length": sum(r["index_length"] for r in rows)}
    df = await rt.db.prepare(
        "SELECT df FROM semantic_term_stats WHERE tenant_id = "
        "(SELECT code FROM keyword_tenants WHERE tenant_id = 'acme') AND term = 'potteri'"
    ).first_value("df")
    assert df == 1  # "pottery" (stemmed) is left in Dana's fact only
    postings = await rt.db.prepare(
        "SELECT COUNT(*) AS n FROM semantic_terms WHERE tenant_id = "
        "(SELECT code FROM keyword_tenants WHERE tenant_id = 'acme') AND fts_rowid = "
        "(SELECT MAX(fts_rowid) FROM semantic_terms) + 1000"
    ).first_value("n")
    assert postings == 0
    assert [fid for fid, _ in await _keyword_view(memory, "painting")] == []


async def test_a_very_common_word_drives_no_scan_but_still_scores(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make_memory()
    facts = [{"content": f"status report {i} for the team", "subject": f"s{i}"} for i in range(30)]
    facts.append({"content": "status report about the zeppelin launch", "subject": "z"})
    learned = await memory.learn_many(facts)
    full = dict(await _keyword_view(memory, "zeppelin status report"))
    # With a budget below the common words' postings, only "zeppelin" drives candidates...
    monkeypatch.setattr(keyword_module, "POSTINGS_BUDGET", 5)
    bounded = await _keyword_view(memory, "zeppelin status report")
    target = learned[-1].fact_id
    assert bounded[0][0] == target
    # ...and its score still counts the common words (same BM25F as without a budget).
    assert dict(bounded)[target] == pytest.approx(full[target])


async def test_a_reply_is_found_through_the_turns_before_it_in_its_session(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    turns = [
        "Mel: Are you still going to the pottery workshop in Lisbon?",
        "Caroline: Yes, next month, I booked it yesterday",
        "Mel: Nice, send me pictures",
    ]
    with_session = await memory.learn_many(
        [{"content": t, "session": "chat-1", "subject": "chat"} for t in turns]
    )
    alone = await memory.learn(
        {"content": "Caroline: Yes, next month, I booked it yesterday", "subject": "other"}
    )
    hits = dict(await _keyword_view(memory, "pottery workshop Lisbon"))
    reply = with_session[1].fact_id
    assert reply in hits and alone.fact_id not in hits
    # The context field weighs less than the memory's own words.
    assert hits[reply] < hits[with_session[0].fact_id]


async def test_later_turns_are_added_to_earlier_memories_in_the_background(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    background = LocalBackgroundTasks()
    memory = make_memory(background=background)
    first = await memory.learn({"content": "Which city was that conference in?", "session": "s"})
    await background.drain()
    assert first.fact_id not in dict(await _keyword_view(memory, "Reykjavik"))
    await memory.learn({"content": "It was Reykjavik, in the winter", "session": "s"})
    await background.drain()
    assert first.fact_id in dict(await _keyword_view(memory, "Reykjavik"))
    stored = await memory.get(first.fact_id)
    assert stored is not None and stored.session_key == "s"


async def test_the_date_is_searchable_and_recall_filters_by_time(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    may = await memory.learn(
        {"content": "Went hiking with the kids", "valid_from": _epoch(2023, 5, 8)}
    )
    june = await memory.learn(
        {"content": "Went hiking near the lake", "valid_from": _epoch(2023, 6, 20)}
    )
    hits = dict(await _keyword_view(memory, "hiking in May 2023"))
    assert hits[may.fact_id] > hits[june.fact_id]
    window = {"valid_from_after": _epoch(2023, 6, 1), "valid_from_before": _epoch(2023, 7, 1)}
    found = await memory.recall("hiking", 5, window)
    assert found.fact_ids == [june.fact_id]
    # An empty window is a clear input error.
    with pytest.raises(MemoryInputError) as caught:
        await memory.recall(
            "hiking", 5, {"valid_from_after": _epoch(2023, 7, 1), "valid_from_before": 1.0}
        )
    assert caught.value.code == "validation_error"


async def test_the_sql_keyword_score_is_the_bm25f_formula(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    # The channel scores in SQL (candidates and the rows of every channel's candidates);
    # `retrieval.bm25.bm25f` states the formula. They must agree on every scored fact.
    from agent_memory.retrieval import Bm25Params, TenantStats, bm25f, idf, query_terms

    memory = make_memory()
    turns = [
        "Mel: Are you still going to the pottery workshop in Lisbon?",
        "Caroline: Yes, next month, I booked the pottery class yesterday",
        "Mel: Nice, send me pictures of the workshop",
        "Caroline: The Lisbon trip is in May, pottery every morning",
    ]
    await memory.learn_many([{"content": t, "session": "chat"} for t in turns])
    await memory.learn_many([{"content": f"workshop notes {i}"} for i in range(6)])
    query = "pottery workshop in Lisbon"
    view = dict(await _keyword_view(memory, query))
    stats_row = await rt.db.prepare(
        "SELECT docs, total_length, total_context_length FROM semantic_index_stats "
        "WHERE tenant_id = 'acme'"
    ).first()
    assert stats_row is not None
    stats = TenantStats(**stats_row)
    params = Bm25Params()
    terms = query_terms(query)
    df = {
        str(r["term"]): int(r["df"])
        for r in (
            await rt.db.prepare(
                "SELECT term, df FROM semantic_term_stats WHERE tenant_id = "
                "(SELECT code FROM keyword_tenants WHERE tenant_id = 'acme')"
            ).all()
        ).results
    }
    idfs = {t: idf(df.get(t, 0), stats.docs) for t in terms}
    facts = (
        await rt.db.prepare(
            "SELECT fact_id, index_terms, index_length, context_length FROM semantic_facts "
            "WHERE tenant_id = 'acme'"
        ).all()
    ).results
    expected = {}
    for fact in facts:
        postings = [
            (term, tf, ctx)
            for term, (tf, ctx) in keyword_module.stored_terms(fact["index_terms"]).items()
            if term in idfs
        ]
        score = bm25f(
            postings,
            fact["index_length"],
            fact["context_length"],
            idfs,
            stats.average_length(params),
            params,
        )
        if score > 0:
            expected[fact["fact_id"]] = score
    assert view.keys() == expected.keys()
    for fact_id, score in expected.items():
        assert view[fact_id] == pytest.approx(score, abs=1e-9)  # the view rounds to 9 places


async def test_own_text_terms_are_stored_short_and_both_entry_forms_index_alike(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory()
    await memory.learn_many([{"content": "Dana paints doors", "valid_from": _epoch(2024, 5)}])
    entry = await rt.db.prepare(
        "SELECT index_terms FROM semantic_facts WHERE tenant_id = 'acme'"
    ).first_value("index_terms")
    # Own-text terms (tf 1) joined in one string (migration 0020); the date's terms are
    # context: [t, 0, 1].
    assert json.loads(entry) == ["dana paint door", ["may", 0, 1], ["2024", 0, 1]]

    async def postings() -> dict[str, tuple[int, int]]:
        rows = await rt.db.prepare(
            "SELECT term, tf, context_tf FROM semantic_terms WHERE tenant_id = "
            "(SELECT code FROM keyword_tenants WHERE tenant_id = 'acme')"
        ).all()
        return {str(r["term"]): (int(r["tf"]), int(r["context_tf"])) for r in rows.results}

    expected = {"dana": (1, 0), "paint": (1, 0), "door": (1, 0), "may": (0, 1), "2024": (0, 1)}
    assert await postings() == expected
    # The entry forms written before (0009's, 0015's, 0018's) index and unindex alike.
    update = rt.db.prepare("UPDATE semantic_facts SET index_terms = ? WHERE tenant_id = 'acme'")
    await update.bind('{"dana":[1,0],"paint":[2,0],"door":[1,3]}').run()
    assert await postings() == {"dana": (1, 0), "paint": (2, 0), "door": (1, 3)}
    await update.bind('{"dana":1,"paint":2,"may":[0,1]}').run()
    assert await postings() == {"dana": (1, 0), "paint": (2, 0), "may": (0, 1)}
    await update.bind('["dana",["door",2,1]]').run()
    assert await postings() == {"dana": (1, 0), "door": (2, 1)}
    await update.bind('["dana","paint",["door",2,1],"may"]').run()  # 0018's: a term a string
    assert await postings() == {"dana": (1, 0), "paint": (1, 0), "door": (2, 1), "may": (1, 0)}
    await update.bind('["paint door"]').run()
    assert await postings() == {"paint": (1, 0), "door": (1, 0)}
    await update.bind('{"dana":1,"paint":[2,0]}').run()
    await rt.db.prepare("DELETE FROM semantic_facts WHERE tenant_id = 'acme'").run()
    assert await postings() == {}
    df = await rt.db.prepare("SELECT SUM(df) AS n FROM semantic_term_stats").first_value("n")
    assert df == 0


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("My favourite colour is teal", "what is her favorite color"),
        ("The car broke down on the highway", "what was broken"),
        ("We planned two roadtrips this summer", "did they go on a road trip"),
        ("Our road trip ended in Denver", "which roadtrips"),
    ],
)
async def test_spelling_irregular_forms_and_compounds_meet_in_the_keyword_index(
    make_memory: MemoryFactory, stored: str, query: str
) -> None:
    memory = make_memory()
    [fact] = await memory.learn_many([{"content": stored}])
    await memory.learn_many([{"content": "Something else entirely about lunch"}])
    assert [fid for fid, _ in await _keyword_view(memory, query)] == [fact.fact_id]


async def test_facts_indexed_before_a_variant_was_listed_are_renormalised(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    memory = make_memory()
    facts = await memory.learn_many([{"content": f"my favourite tea number {i}"} for i in range(5)])
    # As the index held them before the vocabulary mapped "favourit" to "favorit".
    await rt.db.prepare(
        "UPDATE semantic_facts SET index_terms = replace(index_terms, 'favorit', 'favourit') "
        "WHERE tenant_id = 'acme'"
    ).run()
    assert await _keyword_view(memory, "favorite") == []
    done, cursor = await keyword_module.renormalise(rt.db, "acme", 3)
    assert (done, cursor is not None) == (3, True)
    assert (await keyword_module.renormalise(rt.db, "acme", 10, cursor or 0)) == (2, None)
    found = {fid for fid, _ in await _keyword_view(memory, "favorite")}
    assert found == {f.fact_id for f in facts}
    assert await keyword_module.renormalise(rt.db, "acme", 10) == (0, None)  # idempotent


async def test_postings_name_each_tenant_by_a_short_code_of_its_database(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    """Migration 0020: a tenant's postings carry a code of one or two capitals, not its id;
    two tenants' codes differ, a tenant indexed before the migration keeps its id as its
    code, and each recalls only its own facts."""
    await rt.db.prepare(  # as 0020 leaves a tenant indexed before it
        "INSERT INTO keyword_tenants (tenant_id, code) VALUES ('legacy-co', 'legacy-co')"
    ).run()
    long_id = "org-4f9c2a7e-6b1d-4e8a-9c3f-2d5e7a1b0c6d"
    ids = {}
    for tenant in ("acme", long_id, "legacy-co"):
        [fact] = await make_memory(tenant).learn_many([{"content": f"{tenant} rents kayaks"}])
        ids[tenant] = fact.fact_id
    codes = {
        r["tenant_id"]: r["code"]
        for r in (await rt.db.prepare("SELECT tenant_id, code FROM keyword_tenants").all()).results
    }
    assert codes == {"legacy-co": "legacy-co", "acme": "B", long_id: "C"}
    stored = await rt.db.prepare("SELECT DISTINCT tenant_id FROM semantic_terms").all()
    assert {r["tenant_id"] for r in stored.results} == {"B", "C", "legacy-co"}
    for tenant, fact_id in ids.items():
        assert [fid for fid, _ in await _keyword_view(make_memory(tenant), "kayaks")] == [fact_id]
