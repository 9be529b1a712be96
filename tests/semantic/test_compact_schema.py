"""The schema a shard database made now gets (migrations-compact/, issue 29 item 4): fewer
bytes a fact, and nothing a user can tell apart from a database made from migrations/.

The same facts written to both kinds of database must give the same postings (as the
`semantic_terms` columns every statement reads), the same recall scores, the same
idempotent learn, and the same clean-up when facts are deleted, erased or reindexed.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from agent_memory.ids import content_hash
from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.tiers.semantic.keyword_index import reindex_tenant
from agent_memory.tiers.semantic.memory import SemanticMemory
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.migrations import migration_files
from local_runtime.runtime import COMPACT_MIGRATIONS_DIR, MIGRATIONS_DIR, LocalRuntime

# Objects whose definition is the compact schema's own (its header says why).
DIFFERENT = {
    "semantic_facts",
    "semantic_terms",
    "semantic_term_stats",
    "semantic_terms_on_insert",
    "semantic_terms_on_delete",
    "semantic_terms_on_update",
    "storage_format",
}


def _made_from(folder: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for path in migration_files(folder):
        conn.executescript(path.read_text())
    return conn


def _objects(conn: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    rows = conn.execute("SELECT name, type, sql FROM sqlite_master WHERE sql IS NOT NULL")
    return {name: (kind, re.sub(r"\s+", " ", sql)) for name, kind, sql in rows}


def _columns(conn: sqlite3.Connection, name: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({name})")]


def test_the_two_schemas_differ_only_where_the_compact_one_says() -> None:
    """A migration added to one folder and not the other (or written differently) fails
    here: every table, index and trigger is the same text, but for the listed ones."""
    legacy, compact = _made_from(MIGRATIONS_DIR), _made_from(COMPACT_MIGRATIONS_DIR)
    mine, theirs = _objects(legacy), _objects(compact)
    assert set(theirs) - set(mine) == {"keyword_postings", "keyword_lengths"}
    assert set(mine) - set(theirs) == set()
    for name in set(mine) - DIFFERENT:
        assert theirs[name] == mine[name], name
    # The fact row: only the hash's width.
    assert theirs["semantic_facts"][1] == mine["semantic_facts"][1].replace(
        "length(content_hash) = 64", "length(content_hash) = 24"
    )
    # Postings read through the same columns; the term statistics gain the term's number.
    assert (mine["semantic_terms"][0], theirs["semantic_terms"][0]) == ("table", "view")
    assert _columns(compact, "semantic_terms") == _columns(legacy, "semantic_terms")
    assert _columns(compact, "semantic_term_stats") == [
        "term_id",
        *_columns(legacy, "semantic_term_stats"),
    ]
    widths = [
        c.execute("SELECT content_hash_chars FROM storage_format").fetchall()
        for c in (legacy, compact)
    ]
    assert widths == [[(64,)], [(24,)]]


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


async def _counters(db: SqliteD1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    terms = "SELECT term, df FROM semantic_term_stats WHERE df > 0 ORDER BY term"
    index = "SELECT docs, total_length, total_context_length FROM semantic_index_stats"
    return (await db.prepare(terms).all()).results, (await db.prepare(index).all()).results


async def _same_everywhere(
    rt: LocalRuntime, legacy: SemanticMemory, compact: SemanticMemory
) -> None:
    old, new = rt.shard_db("primary"), rt.shard_db("s2")
    assert await _postings(new) == await _postings(old)
    assert await _counters(new) == await _counters(old)
    for query in ("annual contract renewal", "freight on Tuesday", "Monday lease"):
        # Every fact, so ties (ordered by fact id, which differ) are not cut apart.
        want = await legacy.recall(query, len(FACTS))
        got = await compact.recall(query, len(FACTS))
        assert sorted((r.fact.content, r.score) for r in got.results) == sorted(
            (r.fact.content, r.score) for r in want.results
        ), query
    await rt.background.drain()


async def test_a_compact_database_stores_less_and_answers_the_same(rt: LocalRuntime) -> None:
    legacy, compact = _memory(rt, "primary"), _memory(rt, "s2")
    created = await legacy.learn_many(FACTS)
    await compact.learn_many(FACTS)
    await rt.background.drain()
    old, new = rt.shard_db("primary"), rt.shard_db("s2")

    hashes = "SELECT content, content_hash FROM semantic_facts ORDER BY content"
    stored = [(await db.prepare(hashes).all()).results for db in (old, new)]
    assert [r["content_hash"] for r in stored[0]] == [content_hash(r["content"]) for r in stored[0]]
    assert [r["content_hash"] for r in stored[1]] == [h["content_hash"][:24] for h in stored[0]]
    await _same_everywhere(rt, legacy, compact)

    # Learning a stored fact again is still idempotent, and says its whole hash.
    again = await compact.learn(FACTS[2])
    assert not again.created
    assert again.content_hash == content_hash(FACTS[2]["content"]) == created[2].content_hash
    count = "SELECT COUNT(*) AS n FROM semantic_facts"
    assert await new.prepare(count).first_value("n") == len(FACTS)

    # A delete, an erase and a reindex keep both keyword indexes equal, and leave no posting,
    # length or term count behind for a fact that went.
    for memory, db in ((legacy, old), (compact, new)):
        first = "SELECT fact_id FROM semantic_facts WHERE subject = 'contact:ada'"
        await memory.delete(str(await db.prepare(first).first_value("fact_id")))
        await rt.background.drain()
    for shard in ("primary", "s2"):
        eraser = SubjectEraser(
            "acme", db=rt.shard_db(shard), clock=rt.clock, vectors=rt.shard_vectors(shard)
        )
        assert (await eraser.erase("contact:bo")).facts == 1
    for db in (old, new):
        await db.prepare(
            "UPDATE semantic_facts SET index_terms = NULL WHERE subject = 'contact:cy'"
        ).run()
        assert await reindex_tenant(db, "acme", 10) == 1
    await _same_everywhere(rt, legacy, compact)
    left = (
        "SELECT COUNT(*) AS n FROM keyword_{} "
        "WHERE fts_rowid NOT IN (SELECT fts_rowid FROM semantic_facts)"
    )
    for table in ("postings", "lengths"):
        assert await new.prepare(left.format(table)).first_value("n") == 0
    assert await new.prepare("SELECT COUNT(*) AS n FROM keyword_lengths").first_value("n") == 4


async def test_a_state_folder_made_before_keeps_its_databases_schema(
    tmp_path: Path, real_migrations: None
) -> None:
    """A local state folder whose s2 database was made from migrations/ (before
    migrations-compact/ existed) is migrated on, not made again from the other folder; a
    fresh one gets the folder wrangler.toml names."""
    from local_runtime.state import StateDir

    old = StateDir.create(tmp_path / "old")
    before = [p for p in migration_files(MIGRATIONS_DIR) if p.name < "0023"]
    conn = sqlite3.connect(old.d1_of("s2"))
    conn.execute(
        "CREATE TABLE d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, "
        "applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)"
    )
    for path in before:
        conn.executescript(path.read_text())
        conn.execute("INSERT INTO d1_migrations (name) VALUES (?)", (path.name,))
    conn.commit()
    conn.close()
    width = "SELECT content_hash_chars AS n FROM storage_format"
    for folder, expected in ((tmp_path / "old", 64), (tmp_path / "new", 24)):
        rt = LocalRuntime.open(folder)
        try:
            await rt.migrate()
            assert await rt.shard_db("s2").prepare(width).first_value("n") == expected
        finally:
            await rt.close()


async def test_two_tenants_on_a_compact_database_share_no_postings(rt: LocalRuntime) -> None:
    """The compact postings carry no tenant id (a term's number belongs to one tenant's
    term row): the same words learned by two tenants give each its own terms, counts and
    hits, and one tenant's delete leaves the other's index whole."""
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
