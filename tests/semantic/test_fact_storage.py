"""How a fact is stored (migrations/0001_baseline.sql, docs/placement.md "Bytes per memory"):
the first 24 characters of its content hash, keyword postings by term number with the
fact's lengths once, and nothing of it left in the keyword index once it is gone.
"""

from __future__ import annotations

from typing import Any

from agent_memory.ids import content_hash
from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.tiers.semantic.memory import SemanticMemory
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.runtime import LocalRuntime

FACTS = [
    {
        "content": f"{name} asked about the {thing} renewal on {day} (ticket {n})",
        "subject": f"contact:{name.lower()}",
        "predicate": "asked_about",
        "confidence": 0.8,
        "source": "mcp",
    }
    for n, (name, thing, day) in enumerate(
        [
            ("Ada", "annual contract", "Monday"),
            ("Bo", "freight discount", "Tuesday"),
            ("Cy", "annual contract", "Friday"),
            ("Di", "warehouse lease", "Monday"),
            ("Ed", "freight insurance", "Sunday"),
            ("Fay", "contract discount", "Tuesday"),
        ]
    )
]


def _memory(rt: LocalRuntime, shard: str) -> SemanticMemory:
    return SemanticMemory(
        "acme",
        db=rt.shard_db(shard),
        vectors=rt.shard_vectors(shard),
        embedder=rt.embedder,
        clock=rt.clock,
    )


async def _postings(db: SqliteD1) -> list[dict[str, Any]]:
    """The tenant's postings as every statement reads them, by fact content (ids differ)."""
    sql = (
        "SELECT f.content, t.term, t.tf, t.context_tf, t.length, t.context_length "
        "FROM semantic_terms AS t JOIN semantic_facts AS f ON f.fts_rowid = t.fts_rowid "
        "WHERE t.tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = 'acme') "
        "ORDER BY f.content, t.term"
    )
    return (await db.prepare(sql).all()).results


async def test_a_fact_keeps_a_short_hash_and_leaves_no_postings_when_gone(
    rt: LocalRuntime,
) -> None:
    memory, db = _memory(rt, "primary"), rt.shard_db("primary")
    created = await memory.learn_many(FACTS)
    await rt.background.drain()
    hashes = "SELECT content, content_hash FROM semantic_facts ORDER BY content"
    rows = (await db.prepare(hashes).all()).results
    assert [r["content_hash"] for r in rows] == [content_hash(r["content"])[:24] for r in rows]
    before = await _postings(db)
    assert {r["term"] for r in before} >= {"annual", "contract", "freight", "monday"}

    # Learning a stored fact again is idempotent, and says its whole hash.
    again = await memory.learn(FACTS[2])
    assert not again.created
    assert again.content_hash == content_hash(FACTS[2]["content"]) == created[2].content_hash
    count = "SELECT COUNT(*) AS n FROM semantic_facts"
    assert await db.prepare(count).first_value("n") == len(FACTS)

    # A delete and an erase leave no posting, length or term count behind for a fact that
    # went, and the other facts' postings as they were.
    first = "SELECT fact_id FROM semantic_facts WHERE subject = 'contact:ada'"
    await memory.delete(str(await db.prepare(first).first_value("fact_id")))
    await rt.background.drain()
    eraser = SubjectEraser("acme", db=db, clock=rt.clock, vectors=rt.shard_vectors("primary"))
    assert (await eraser.erase("contact:bo")).facts == 1
    gone = ("Ada asked", "Bo asked")
    assert await _postings(db) == [r for r in before if not r["content"].startswith(gone)]
    left = (
        "SELECT COUNT(*) AS n FROM keyword_{} "
        "WHERE fts_rowid NOT IN (SELECT fts_rowid FROM semantic_facts)"
    )
    for table in ("postings", "lengths"):
        assert await db.prepare(left.format(table)).first_value("n") == 0
    assert await db.prepare("SELECT COUNT(*) AS n FROM keyword_lengths").first_value("n") == 4
    df = "SELECT COUNT(*) AS n FROM semantic_term_stats WHERE term = 'ada' AND df > 0"
    assert await db.prepare(df).first_value("n") == 0


async def test_two_tenants_on_one_database_share_no_postings(rt: LocalRuntime) -> None:
    """The postings carry no tenant id (a term's number belongs to one tenant's term row):
    the same words learned by two tenants give each its own terms, counts and hits, and one
    tenant's delete leaves the other's index whole."""
    db = rt.shard_db("s2")
    memories = {
        tenant: SemanticMemory(
            tenant, db=db, vectors=rt.shard_vectors("s2"), embedder=rt.embedder, clock=rt.clock
        )
        for tenant in ("acme", "globex")
    }
    for memory in memories.values():
        await memory.learn_many(FACTS[:3])
    await rt.background.drain()
    per_tenant = (
        "SELECT k.tenant_id AS tenant, COUNT(*) AS terms, SUM(s.df) AS df "
        "FROM semantic_term_stats AS s JOIN keyword_tenants AS k ON k.code = s.tenant_id "
        "GROUP BY k.tenant_id ORDER BY k.tenant_id"
    )
    [acme, globex] = (await db.prepare(per_tenant).all()).results
    assert (acme["terms"], acme["df"]) == (globex["terms"], globex["df"])
    for tenant, memory in memories.items():
        found = await memory.recall("annual contract renewal", len(FACTS))
        assert found.results and all(r.fact.tenant_id == tenant for r in found.results)
    ada = "SELECT fact_id FROM semantic_facts WHERE tenant_id = 'acme' AND subject = 'contact:ada'"
    await memories["acme"].delete(str(await db.prepare(ada).first_value("fact_id")))
    await rt.background.drain()
    [after_acme, after_globex] = (await db.prepare(per_tenant).all()).results
    assert after_globex == globex and after_acme["df"] < acme["df"]
    hits = await memories["globex"].recall("Ada annual contract Monday", len(FACTS))
    assert "Ada asked" in hits.results[0].fact.content
