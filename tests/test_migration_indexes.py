"""The indexes no statement needed are not in the schema, and the lookups they could have
served still seek an index (a full scan of a tenant's facts would grow with the tenant)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from agent_memory.governance.writes import BRIEF_FIGURES
from tests.conftest import PROJECT_ROOT

DROPPED = {
    "semantic_facts_by_subject",
    "semantic_facts_by_agent",
    "memory_events_by_run",
    "memory_events_by_kind",
}

# The statements that could have used a dropped index, as the code builds them
# (recall's exact-match channel with an agent filter, the inspector's subject list, the
# subject erase's event pages; the event log's newest events of a kind, the inspector's
# events of a kind in a window, the brief's unsure decisions of the last day).
LOOKUPS = [
    "SELECT fact_id FROM (SELECT f.fact_id AS fact_id FROM semantic_facts AS f "
    "WHERE f.tenant_id = ? AND f.subject IN (SELECT value FROM json_each(?)) "
    "AND +f.status = 'active' AND (f.valid_to IS NULL OR f.valid_to > ?) "
    "AND f.agent_type = ? LIMIT 51)",
    "SELECT * FROM semantic_facts WHERE tenant_id = ? AND subject = ? "
    "ORDER BY created_at DESC, fact_id DESC LIMIT ?",
    "SELECT event_id, run_id, content_hash, payload FROM memory_events "
    "WHERE tenant_id = ? AND event_id > ? ORDER BY event_id LIMIT ?",
    "SELECT * FROM memory_events WHERE tenant_id = ? AND kind = ? "
    "ORDER BY created_at DESC, event_id DESC LIMIT ?",
    "SELECT * FROM memory_events WHERE tenant_id = ? AND 1 AND kind = ? AND created_at >= ? "
    "AND created_at < ? ORDER BY created_at DESC, event_id DESC LIMIT ?",
    f"SELECT {BRIEF_FIGURES}",
]


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    for path in sorted((PROJECT_ROOT / "migrations").glob("*.sql")):
        conn.executescript(path.read_text())
    yield conn
    conn.close()


def test_indexes_no_statement_uses_are_dropped(db: sqlite3.Connection) -> None:
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert not DROPPED & names


@pytest.mark.parametrize("sql", LOOKUPS)
def test_lookups_still_seek_an_index(db: sqlite3.Connection, sql: str) -> None:
    plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", [None] * sql.count("?"))]
    touched = [step for step in plan if "semantic_facts" in step or "memory_events" in step]
    touched += [step for step in plan if step.startswith(("SEARCH f ", "SCAN f"))]
    assert touched, plan
    assert all(step.startswith("SEARCH") and "INDEX" in step for step in touched), plan
