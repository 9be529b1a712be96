"""The schema (migrations/): STRICT tables, CHECK constraints, tenant-first indexes, keyword
postings kept in step by triggers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from tests.conftest import PROJECT_ROOT

ULID = "01J0000000000000000000000A"
HASH = "a" * 64
FACT_HASH = "a" * 24  # a fact keeps the first 24 characters (tiers.semantic.writes)


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    for path in sorted((PROJECT_ROOT / "migrations").glob("*.sql")):
        conn.executescript(path.read_text())
    yield conn
    conn.close()


def _fact(**over: object) -> dict[str, object]:
    row: dict[str, object] = dict(
        tenant_id="t1",
        fact_id=ULID,
        agent_type="sdr",
        subject="contact:1",
        predicate="responded_positively_to",
        object="direct_roi_framing",
        content="Contact 1 responded positively to direct ROI framing",
        confidence=0.8,
        source="agent",
        embedding_provider="local",
        embedding_model="m",
        embedding_dimensions=384,
        content_hash=FACT_HASH,
        status="active",
        superseded_by=None,
        valid_from=1,
        created_at=1,
        updated_at=1,
    )
    row.update(over)
    return row


def _insert_fact(db: sqlite3.Connection, **over: object) -> None:
    row = _fact(**over)
    cols = ", ".join(row)
    db.execute(
        f"INSERT INTO semantic_facts ({cols}) VALUES ({', '.join('?' * len(row))})",
        list(row.values()),
    )


def test_tables_are_strict(db: sqlite3.Connection) -> None:
    strict = {row[1]: row[5] for row in db.execute("PRAGMA table_list")}
    for table in ("agent_runs", "memory_episodes", "semantic_facts"):
        assert strict[table] == 1, table


# A tenant's code, looked up by code; the crons' running and expired exports of every tenant.
CROSS_TENANT_INDEXES = {"sqlite_autoindex_keyword_tenants_2", "portability_jobs_by_status"}


def test_every_index_on_tenant_data_starts_with_tenant_id(db: sqlite3.Connection) -> None:
    indexes = db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").fetchall()
    assert len(indexes) >= 8
    for name, table in indexes:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info('{table}')")}
        if "tenant_id" not in columns or name in CROSS_TENANT_INDEXES:
            continue  # no tenant's data (the prune's runs), or looked up across tenants
        first = db.execute(f"PRAGMA index_info('{name}')").fetchone()
        assert first[2] == "tenant_id", f"{name} does not lead with tenant_id"


def test_strict_types_and_checks_reject_bad_rows(db: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        _insert_fact(db, confidence=1.5)
    with pytest.raises(sqlite3.IntegrityError):
        _insert_fact(db, fact_id="not-a-ulid")
    with pytest.raises(sqlite3.IntegrityError):
        _insert_fact(db, metadata="{not json")
    with pytest.raises(sqlite3.IntegrityError):  # superseded needs superseded_by
        _insert_fact(db, status="superseded")
    with pytest.raises(sqlite3.IntegrityError):  # STRICT: no text in an INTEGER column
        _insert_fact(db, created_at="yesterday")
    with pytest.raises(sqlite3.IntegrityError):  # the whole hash is not what a fact keeps
        _insert_fact(db, content_hash=HASH)
    assert db.execute("SELECT COUNT(*) FROM semantic_facts").fetchone()[0] == 0


def test_same_content_about_same_subject_is_one_fact(db: sqlite3.Connection) -> None:
    _insert_fact(db)
    with pytest.raises(sqlite3.IntegrityError):
        _insert_fact(db, fact_id="01J0000000000000000000000B")
    _insert_fact(db, tenant_id="t2")  # another tenant may hold the same content


def test_keyword_postings_follow_inserts_updates_and_deletes(db: sqlite3.Connection) -> None:
    _insert_fact(db, index_terms='["contact responded framing"]', index_length=3)

    def matches(term: str) -> list[str]:
        return [
            r[0]
            for r in db.execute(
                "SELECT f.fact_id FROM semantic_terms AS t JOIN semantic_facts AS f "
                "ON f.fts_rowid = t.fts_rowid WHERE t.term = ? AND t.tenant_id = "
                "(SELECT code FROM keyword_tenants WHERE tenant_id = 't1')",
                (term,),
            )
        ]

    assert matches("framing") == [ULID]
    db.execute(
        "UPDATE semantic_facts SET index_terms = '[\"prefers email\"]' WHERE fact_id = ?", (ULID,)
    )
    assert matches("framing") == []
    assert matches("email") == [ULID]
    db.execute("DELETE FROM semantic_facts WHERE fact_id = ?", (ULID,))
    assert matches("email") == []
    assert db.execute("SELECT COUNT(*) FROM keyword_postings").fetchone()[0] == 0


def test_runs_and_episodes_validate_status_and_kind(db: sqlite3.Connection) -> None:
    db.execute(
        "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status, started_at)"
        " VALUES ('t1', ?, 'sdr', 'i1', 'running', 5)",
        (ULID,),
    )
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status,"
            " started_at) VALUES ('t1', ?, 'sdr', 'i1', 'exploded', 5)",
            ("01J0000000000000000000000B",),
        )
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO memory_episodes (tenant_id, episode_id, run_id, agent_type, instance_id,"
            " kind, content, content_hash, created_at) VALUES"
            " ('t1', ?, ?, 'sdr', 'i1', 'dream', 'x', ?, 5)",
            (ULID, ULID, HASH),
        )
