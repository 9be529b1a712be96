"""`turn_state` (tier 1, DO SQLite): the instance's counters and last run.

Every change is one SQL statement that computes the new value in the database
(`turn_count = turn_count + 1`), never a read-modify-write across an `await`: Cloudflare
may run another event of this object while a turn awaits the model, and such an update
would otherwise be lost.
"""

from __future__ import annotations

from typing import Any

from bindings.ports.do_sql import SqlStorage

_COLUMNS = (
    "instance_id, tenant_id, agent_type, turn_count, completed_count, failed_count, "
    "last_run_id, last_status, created_at, updated_at"
)


def begin_turn(
    sql: SqlStorage, *, tenant: str, agent_type: str, instance_id: str, run_id: str, now: float
) -> dict[str, Any]:
    """Create the row on the first run, else count one more turn; returns the new row."""
    sql.exec(
        "INSERT INTO turn_state (instance_id, tenant_id, agent_type, turn_count, last_run_id, "
        "last_status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, 'running', ?, ?) "
        "ON CONFLICT (instance_id) DO UPDATE SET turn_count = turn_count + 1, "
        "last_run_id = excluded.last_run_id, last_status = 'running', "
        "updated_at = excluded.updated_at",
        instance_id,
        tenant,
        agent_type,
        run_id,
        now,
        now,
    )
    state = read_turn_state(sql, instance_id)
    if state is None:  # just written in the same synchronous stretch: cannot happen
        raise RuntimeError("turn_state row vanished")
    return state


def finish_turn(
    sql: SqlStorage, *, instance_id: str, run_id: str, completed: bool, now: float
) -> None:
    counter = "completed_count" if completed else "failed_count"
    sql.exec(
        f"UPDATE turn_state SET {counter} = {counter} + 1, last_run_id = ?, last_status = ?, "
        "updated_at = ? WHERE instance_id = ?",
        run_id,
        "completed" if completed else "failed",
        now,
        instance_id,
    )


def read_turn_state(sql: SqlStorage, instance_id: str) -> dict[str, Any] | None:
    rows = sql.exec(
        f"SELECT {_COLUMNS} FROM turn_state WHERE instance_id = ?", instance_id
    ).to_array()
    return dict(rows[0]) if rows else None
