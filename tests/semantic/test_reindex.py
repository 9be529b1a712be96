"""The reindex job (`tiers.semantic.reindex`): facts written before migration 0009 have no
keyword-index entry; the job gives them the one the write path would, a bounded amount per
run, without overwriting a concurrent writer and without touching other tenants."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_memory.tiers.semantic import keyword_index as reindex_module
from agent_memory.tiers.semantic.keyword_index import ReindexBudget, reindex_pending
from agent_memory.tiers.semantic.memory import SemanticMemory
from bindings.ports.clock import FixedClock
from bindings.ports.d1 import D1Database, D1Result
from local_runtime.migrations import apply_migrations
from local_runtime.runtime import MIGRATIONS_DIR, LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.semantic.conftest import NOW_MS, MemoryFactory, index_state, insert_unindexed

OLD_FACTS = [
    "Dana booked a pottery workshop for the spring",
    "Lee prefers pottery over painting",
    "The workshop budget was approved in March",
    "Sam is training for a marathon",
]


async def keyword_hits(memory: SemanticMemory, query: str) -> set[str]:
    ranked = await memory.rank(query, 50)
    return {r.fact.content for r in ranked.results if "keyword" in r.channels}


async def test_facts_written_before_0009_are_found_by_keyword_once_reindexed(
    tmp_path: Path, real_migrations: None
) -> None:
    # A database as it was before 0009, with facts in it; then 0009 and later applied.
    before = tmp_path / "before-0009"
    before.mkdir()
    for path in MIGRATIONS_DIR.glob("*.sql"):
        if path.name < "0009":
            shutil.copy(path, before / path.name)
    rt = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), clock=FixedClock(NOW_MS / 1000)
    )
    try:
        await apply_migrations(rt.db, before)
        await insert_unindexed(rt.db, "acme", OLD_FACTS)
        await rt.migrate()
        memory = SemanticMemory(
            "acme", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
        )
        assert await keyword_hits(memory, "pottery workshop") == set()

        report = await reindex_pending(rt.db)

        assert (report.reindexed, report.stopped_by) == (4, None)
        assert [(t.tenant_id, t.reindexed, t.remaining) for t in report.tenants] == [("acme", 4, 0)]
        assert await keyword_hits(memory, "pottery workshop") == {
            OLD_FACTS[0],
            OLD_FACTS[1],
            OLD_FACTS[2],
        }
        # Exactly the entries the write path gives the same facts without a session.
        fresh = SemanticMemory(
            "fresh", db=rt.db, vectors=rt.vectors, embedder=rt.embedder, clock=rt.clock
        )
        await fresh.learn_many(
            [
                {
                    "content": c,
                    "subject": f"old-{n}",
                    "valid_from": (NOW_MS / 1000) - 86_400 * (n + 1),
                }
                for n, c in enumerate(OLD_FACTS)
            ]
        )
        assert await index_state(rt.db, "acme") == await index_state(rt.db, "fresh")
        # Nothing left: a second run finds no tenant and does nothing.
        assert (await reindex_pending(rt.db)).tenants == []
    finally:
        await rt.close()


async def test_a_run_stops_at_its_budget_and_the_next_run_continues(
    rt: LocalRuntime, make_memory: MemoryFactory, monkeypatch: Any
) -> None:
    monkeypatch.setattr(reindex_module, "FACTS_PER_STATEMENT", 2)  # several pages per tenant
    await insert_unindexed(rt.db, "acme", [f"note {n} about lanterns" for n in range(7)])
    await insert_unindexed(rt.db, "globex", [f"globex lantern memo {n}" for n in range(3)])
    budget = ReindexBudget(facts_per_tenant=5, facts_total=6)

    first = await reindex_pending(rt.db, budget)

    assert [(t.tenant_id, t.reindexed, t.remaining) for t in first.tenants] == [
        ("acme", 5, 2),
        ("globex", 1, 2),
    ]
    assert (first.reindexed, first.stopped_by) == (6, "tenant_budget")
    assert len(await keyword_hits(make_memory("acme"), "lanterns")) == 5
    second = await reindex_pending(rt.db, budget)
    assert [(t.tenant_id, t.reindexed, t.remaining) for t in second.tenants] == [
        ("acme", 2, 0),
        ("globex", 2, 0),
    ]
    assert second.stopped_by is None
    assert len(await keyword_hits(make_memory("acme"), "lanterns")) == 7
    assert len(await keyword_hits(make_memory("globex"), "lantern")) == 3


class IndexFirst:
    """A D1 where another writer indexes one fact between the job's read and its UPDATE."""

    def __init__(self, inner: D1Database, fact_content: str) -> None:
        self.inner = inner
        self.content = fact_content
        self.done = False

    def prepare(self, sql: str) -> Any:
        statement = self.inner.prepare(sql)
        if sql.startswith("UPDATE semantic_facts SET (index_terms") and not self.done:
            outer = self

            class Racing:
                def __init__(self, inner: Any) -> None:
                    self.inner = inner

                def bind(self, *params: Any) -> Racing:
                    return Racing(self.inner.bind(*params))

                async def run(self) -> D1Result:
                    outer.done = True
                    await (
                        outer.inner.prepare(
                            "UPDATE semantic_facts SET index_terms = '{\"concurrent\":[1,0]}', "
                            "index_length = 1 WHERE tenant_id = 'acme' AND content = ?"
                        )
                        .bind(outer.content)
                        .run()
                    )
                    result: D1Result = await self.inner.run()
                    return result

            return Racing(statement)
        return statement

    async def batch(self, statements: Sequence[Any]) -> list[D1Result]:
        return await self.inner.batch(statements)


async def test_a_fact_indexed_concurrently_keeps_the_other_writers_entry(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    await insert_unindexed(rt.db, "acme", OLD_FACTS[:2])
    racing = IndexFirst(rt.db, OLD_FACTS[1])

    await reindex_pending(racing)  # type: ignore[arg-type]

    assert racing.done
    kept = (
        await rt.db.prepare(
            "SELECT index_terms, index_length FROM semantic_facts WHERE content = ?"
        )
        .bind(OLD_FACTS[1])
        .first()
    )
    assert kept == {"index_terms": '{"concurrent":[1,0]}', "index_length": 1}
    # Its postings are the other writer's, once (the job's UPDATE did not apply to it).
    terms = (
        await rt.db.prepare(
            "SELECT term, df FROM semantic_term_stats WHERE tenant_id = "
            "(SELECT code FROM keyword_tenants WHERE tenant_id = 'acme') "
            "AND term IN ('concurrent', 'lee')"
        ).all()
    ).results
    assert {r["term"]: r["df"] for r in terms} == {"concurrent": 1}
    assert await keyword_hits(make_memory("acme"), "pottery") == {OLD_FACTS[0]}


async def test_one_tenants_run_leaves_other_tenants_index_alone(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    globex = make_memory("globex")
    await globex.learn_many([{"content": "pottery kiln schedule"}, {"content": "marathon"}])
    await insert_unindexed(rt.db, "globex", ["globex pottery archive"])
    await insert_unindexed(rt.db, "acme", OLD_FACTS)
    globex_before = await index_state(rt.db, "globex")

    report = await reindex_pending(rt.db, tenants=["acme"])

    assert [t.tenant_id for t in report.tenants] == ["acme"]
    assert await index_state(rt.db, "globex") == globex_before
    assert await keyword_hits(globex, "pottery") == {"pottery kiln schedule"}
