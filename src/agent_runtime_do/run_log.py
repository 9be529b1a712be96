"""The run log (tier 1, DO SQLite): one append-only row per step of a run.

Rows are only ever INSERTed, each in one synchronous statement that also computes the
row's `step` (the run's previous maximum + 1) inside the database. Two runs of one
instance interleaved by Cloudflare therefore cannot lose or renumber each other's rows,
and a row appended later (a reported outcome) continues the run's numbering.
"""

from __future__ import annotations

import json
from typing import Any

from agent_runtime_do.schema import RUN_LOG_KINDS
from bindings.ports.clock import Clock
from bindings.ports.do_sql import SqlStorage


def append_run_log(
    sql: SqlStorage, clock: Clock, run_id: str, kind: str, detail: dict[str, Any]
) -> None:
    if kind not in RUN_LOG_KINDS:
        raise ValueError(f"unknown run_log kind {kind!r}")
    sql.exec(
        "INSERT INTO run_log (run_id, step, kind, detail_json, created_at) "
        "SELECT ?, COALESCE(MAX(step), -1) + 1, ?, ?, ? FROM run_log WHERE run_id = ?",
        run_id,
        kind,
        json.dumps(detail, separators=(",", ":"), ensure_ascii=False, default=str),
        clock.now(),
        run_id,
    )


class RunLogger:
    """Appends the rows of one run; callable as the loop's `log_step(kind, detail)`."""

    def __init__(self, sql: SqlStorage, clock: Clock, run_id: str) -> None:
        self._sql = sql
        self._clock = clock
        self.run_id = run_id
        self.rows = 0

    def __call__(self, kind: str, detail: dict[str, Any]) -> None:
        append_run_log(self._sql, self._clock, self.run_id, kind, detail)
        self.rows += 1


def read_run_log(sql: SqlStorage, run_id: str) -> list[dict[str, Any]]:
    rows = sql.exec(
        "SELECT seq, step, kind, detail_json, created_at FROM run_log "
        "WHERE run_id = ? ORDER BY step",
        run_id,
    ).to_array()
    return [
        {
            "seq": int(row["seq"]),
            "step": int(row["step"]),
            "kind": row["kind"],
            "detail": json.loads(row["detail_json"]),
            "created_at": float(row["created_at"]),
        }
        for row in rows
    ]
