"""DO SQLite schema for one AgentRuntime instance (created under blockConcurrencyWhile).

No BEGIN/COMMIT here: DO SQL rejects them; statements are idempotent instead.
"""

from __future__ import annotations

from bindings.ports.do_sql import SqlStorage

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS turn_state (
        instance_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        agent_type TEXT NOT NULL,
        turn_count INTEGER NOT NULL DEFAULT 0 CHECK (turn_count >= 0),
        last_run_id TEXT,
        last_status TEXT,
        state_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS run_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN
            ('llm_call', 'tool_call', 'memory_read', 'memory_write', 'error', 'turn_start', 'turn_end')),
        detail_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS run_log_by_run ON run_log (run_id, step)",
    """CREATE TABLE IF NOT EXISTS procedural_workflows (
        workflow_id TEXT PRIMARY KEY,
        agent_type TEXT NOT NULL,
        task_type TEXT NOT NULL,
        spec TEXT NOT NULL,
        alpha REAL NOT NULL DEFAULT 1.0 CHECK (alpha > 0),
        beta REAL NOT NULL DEFAULT 1.0 CHECK (beta > 0),
        pulls INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS procedural_by_task
        ON procedural_workflows (agent_type, task_type, status)""",
)


def create_schema(sql: SqlStorage) -> None:
    """Create every table and index; safe to run on every object start."""
    for statement in SCHEMA:
        sql.exec(statement)
