"""Migration 0001: STRICT tables, CHECK constraints, tenant-first indexes, FTS kept in step."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from tests.conftest import PROJECT_ROOT

MIGRATION = (PROJECT_ROOT / "migrations" / "0001_initial.sql").read_text()
ULID = "01J0000000000000000000000A"
HASH = "a" * 64


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(MIGRATION)
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
        content_hash=HASH,
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


def test_every_index_on_tenant_data_starts_with_tenant_id(db: sqlite3.Connection) -> None:
    indexes = db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").fetchall()
    assert len(indexes) >= 8
    for name, _table in indexes:
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
    assert db.execute("SELECT COUNT(*) FROM semantic_facts").fetchone()[0] == 0


def test_same_content_about_same_subject_is_one_fact(db: sqlite3.Connection) -> None:
    _insert_fact(db)
    with pytest.raises(sqlite3.IntegrityError):
        _insert_fact(db, fact_id="01J0000000000000000000000B")
    _insert_fact(db, tenant_id="t2")  # another tenant may hold the same content


def test_fts_follows_inserts_updates_and_deletes(db: sqlite3.Connection) -> None:
    _insert_fact(db)

    def matches(term: str) -> list[str]:
        return [
            r[0]
            for r in db.execute(
                "SELECT fact_id FROM semantic_facts_fts WHERE tenant_id = ? AND "
                "semantic_facts_fts MATCH ?",
                ("t1", term),
            )
        ]

    assert matches("framing") == [ULID]
    db.execute("UPDATE semantic_facts SET content = 'prefers email' WHERE fact_id = ?", (ULID,))
    assert matches("framing") == []
    assert matches("email") == [ULID]
    db.execute("DELETE FROM semantic_facts WHERE fact_id = ?", (ULID,))
    assert matches("email") == []


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
