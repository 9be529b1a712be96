"""DO SQLite schema for one AgentRuntime instance (created under blockConcurrencyWhile).

No BEGIN/COMMIT here: DO SQL rejects them; statements are idempotent instead.

* `turn_state`: one row per instance. Counters change only through single-statement
  `x = x + 1` updates, so a turn interleaved with another (Cloudflare may deliver a second
  event while the first awaits the model) never loses an update.
* `run_log`: one row per step of every run (model call, tool call, memory read/write,
  error, turn start/end), append-only, numbered by `seq`.
* `run_workflows`: which procedural workflow a run used, and its outcome once reported.
* `procedural_workflows`: the Thompson-sampling bandit (tier 4).
* `failed_writes`: episodic D1 writes that exhausted their retries, with their payload,
  kept for the admin view and retried by the object's alarm (`retries` so far,
  `next_retry_at` = NULL once given up: then only the daily brief reports them).
* `pending_writes`: the episodic writes queued but not yet settled (the outbox,
  `agent_runtime_do.outbox`): written before a turn answers, removed once the write landed
  in D1 or moved to `failed_writes`, replayed when the object starts again.

* `instance_lifecycle`: one row: who this object is (tenant, agent type, instance), when
  it was last active and last cleared (`agent_runtime_do.lifecycle`).

Changing a table later needs an explicit ALTER step here (CREATE IF NOT EXISTS does not
alter existing objects' tables): `ADDED_COLUMNS`, applied by `create_schema`.
"""

from __future__ import annotations

from bindings.ports.do_sql import SqlStorage

RUN_LOG_KINDS = (
    "llm_call",
    "tool_call",
    "memory_read",
    "memory_write",
    "error",
    "turn_start",
    "turn_end",
)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS turn_state (
        instance_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        agent_type TEXT NOT NULL,
        turn_count INTEGER NOT NULL DEFAULT 0 CHECK (turn_count >= 0),
        completed_count INTEGER NOT NULL DEFAULT 0 CHECK (completed_count >= 0),
        failed_count INTEGER NOT NULL DEFAULT 0 CHECK (failed_count >= 0),
        last_run_id TEXT,
        last_status TEXT,
        state_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS run_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ({", ".join(f"'{k}'" for k in RUN_LOG_KINDS)})),
        detail_json TEXT NOT NULL DEFAULT '{{}}',
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS run_log_by_run ON run_log (run_id, step)",
    """CREATE TABLE IF NOT EXISTS run_workflows (
        run_id TEXT PRIMARY KEY,
        workflow_id TEXT NOT NULL,
        task_type TEXT NOT NULL,
        outcome_score REAL CHECK (outcome_score IS NULL OR outcome_score BETWEEN 0 AND 1),
        created_at REAL NOT NULL,
        scored_at REAL
    )""",
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
    """CREATE TABLE IF NOT EXISTS failed_writes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        op TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        error TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        created_at REAL NOT NULL,
        retries INTEGER NOT NULL DEFAULT 0,
        next_retry_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS failed_writes_by_run ON failed_writes (run_id, seq)",
    """CREATE TABLE IF NOT EXISTS pending_writes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        op TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS instance_lifecycle (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        tenant_id TEXT NOT NULL,
        agent_type TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        last_activity_at REAL NOT NULL,
        cleared_at REAL
    )""",
)

# Columns added after objects already existed: (table, column, definition).
ADDED_COLUMNS = (
    ("failed_writes", "retries", "INTEGER NOT NULL DEFAULT 0"),
    ("failed_writes", "next_retry_at", "REAL"),
)


def create_schema(sql: SqlStorage) -> None:
    """Create every table and index; safe to run on every object start."""
    for statement in SCHEMA:
        sql.exec(statement)
    for table, column, definition in ADDED_COLUMNS:
        present = {str(row["name"]) for row in sql.exec(f"PRAGMA table_info({table})").to_array()}
        if column not in present:
            sql.exec(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
