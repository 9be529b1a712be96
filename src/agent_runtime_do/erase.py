"""Subject erase inside one AgentRuntime object: the `erase_subject` RPC's storage work.

The subject eraser (`agent_memory.lifecycle.erase`) calls this on every instance of the
tenant before it deletes D1 rows, with the ids of the runs it is about to erase there. The
match rules are `agent_memory.lifecycle.erase`'s: the subject as a field value or as a
substring of text (a field equal to the subject is also a substring of the row's JSON).

* `pending_writes` / `failed_writes`: a write is a trace if its payload mentions the
  subject, or if its run is erased (given by D1, or doomed here because another of its
  writes mentions the subject). Either kind would otherwise be replayed into D1 after the
  erase and bring the run or episode back.
* `run_log`: every row of an erased run, and every row that mentions the subject (a later
  run whose prompt carried an episode about the subject loses those rows, not its log).
* `turn_state.state_json`: keys whose name or value mentions the subject are removed.

Deleted bytes: workerd has no secure delete and refuses VACUUM, so every doomed text cell
is overwritten in place before its row is deleted (`agent_runtime_do.wipe`).

Everything runs in one `transaction_sync`: all or nothing. Counts only are returned.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from agent_memory.statements import chunks
from agent_runtime_do.wipe import wipe_and_delete_ids, zeros
from bindings.ports.do_sql import DurableObjectStorage, SqlStorage


@dataclass(slots=True)
class EraseCounts:
    run_log: int = 0
    turn_state: int = 0
    failed_writes: int = 0
    pending_writes: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "run_log": self.run_log,
            "turn_state": self.turn_state,
            "failed_writes": self.failed_writes,
            "pending_writes": self.pending_writes,
        }


# The text columns of each table that may hold the subject.
_WRITE_TEXT = {"pending_writes": ("payload_json",), "failed_writes": ("payload_json", "error")}


def _doomed_writes(
    sql: SqlStorage, table: str, subject: str, runs: set[str]
) -> tuple[set[int], set[str]]:
    """Seqs of the table's writes that are traces, and the runs they name."""
    seqs: set[int] = set()
    named: set[str] = set()
    columns = _WRITE_TEXT[table]
    for row in sql.exec(f"SELECT seq, run_id, {', '.join(columns)} FROM {table}").to_array():
        if any(subject in str(row[c]) for c in columns) or str(row["run_id"]) in runs:
            seqs.add(int(row["seq"]))
            named.add(str(row["run_id"]))
    return seqs, named


def _scrub_state(state_json: str, subject: str) -> str | None:
    """The state without entries naming the subject, or None when nothing changes."""
    if subject not in state_json:
        return None
    try:
        state = json.loads(state_json)
    except ValueError:
        return "{}"
    if not isinstance(state, dict):
        return "{}"
    kept = {
        key: value
        for key, value in state.items()
        if subject not in key and subject not in json.dumps(value, ensure_ascii=False)
    }
    return json.dumps(kept, separators=(",", ":"), ensure_ascii=False)


def erase_subject_traces(
    storage: DurableObjectStorage, subject: str, erased_runs: Iterable[str]
) -> EraseCounts:
    """Remove the subject's traces from this object's tables (module docstring)."""
    sql = storage.sql

    def erase() -> EraseCounts:
        counts = EraseCounts()
        runs = set(erased_runs)
        pending, pending_runs = _doomed_writes(sql, "pending_writes", subject, runs)
        failed, failed_runs = _doomed_writes(sql, "failed_writes", subject, runs)
        runs |= pending_runs | failed_runs
        # A second pass: a write of a run doomed by the other table's match.
        pending |= _doomed_writes(sql, "pending_writes", subject, runs)[0]
        failed |= _doomed_writes(sql, "failed_writes", subject, runs)[0]
        log_seqs: set[int] = set()
        for row in sql.exec("SELECT seq, detail_json FROM run_log").to_array():
            if subject in str(row["detail_json"]):
                log_seqs.add(int(row["seq"]))
        for chunk in chunks(sorted(runs)):
            marks = ", ".join("?" for _ in chunk)
            rows = sql.exec(f"SELECT seq FROM run_log WHERE run_id IN ({marks})", *chunk)
            log_seqs.update(int(row["seq"]) for row in rows.to_array())
        counts.pending_writes = wipe_and_delete_ids(
            sql, "pending_writes", _WRITE_TEXT["pending_writes"], "seq", sorted(pending)
        )
        counts.failed_writes = wipe_and_delete_ids(
            sql, "failed_writes", _WRITE_TEXT["failed_writes"], "seq", sorted(failed)
        )
        counts.run_log = wipe_and_delete_ids(
            sql, "run_log", ("detail_json",), "seq", sorted(log_seqs)
        )
        for row in sql.exec("SELECT instance_id, state_json FROM turn_state").to_array():
            scrubbed = _scrub_state(str(row["state_json"]), subject)
            if scrubbed is not None:
                # Overwrite in place first: a shorter value could be written elsewhere.
                sql.exec(
                    f"UPDATE turn_state SET {zeros('state_json')} WHERE instance_id = ?",
                    row["instance_id"],
                )
                sql.exec(
                    "UPDATE turn_state SET state_json = ? WHERE instance_id = ?",
                    scrubbed,
                    row["instance_id"],
                )
                counts.turn_state += 1
        return counts

    return storage.transaction_sync(erase)
