"""Moving a tenant to another shard, online (issue 29; docs/placement.md, "Moving a tenant",
describes each phase, its cost, the lease and what the tenant's writes meet).

A move is a row of `tenant_moves` (primary database) that `advance` carries forward a bounded
slice at a time (`MoveBudget`) under the move's lease (409 `move_busy` to another advance);
every step is idempotent (a chunk is compared before it is written), so a crash anywhere
resumes from the last saved step. Tables are found from the schema (`directory.tenant_tables`);
derived tables (`directory.DERIVED_TABLES`) are rebuilt by the target's triggers, not copied.
"""

from __future__ import annotations

import hashlib
import json
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from agent_memory.directory import (
    DERIVED_TABLES,
    TenantTable,
    base_tables,
    clear_fence,
    control_db,
    directory_home,
    ensure_fence_triggers,
    set_fence,
    set_home,
    shard_db,
    shard_named,
    tenant_clause,
    tenant_tables,
)
from agent_memory.governance.feed import ChangeFeed
from agent_memory.ids import IDS_PER_STATEMENT, chunks
from agent_memory.lifecycle.prune import Meter
from agent_memory.tiers.semantic.models import delete_own_vectors, own_vectors
from bindings.environment import Bindings, Shard
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import Row
from http_messages import ApiError

Phase = Literal["copying", "fenced", "switched", "deleting", "done", "cancelling", "cancelled"]
FINISHED = ("done", "cancelled")
CHUNK_ROWS = 100
# The source stays frozen this long after the switch: longer than an isolate keeps a home
# (30 s) plus KV's propagation (60 s), so nothing still reads it when it empties.
GRACE_SECONDS = 300.0
# Copy passes before the fence: more while a pass rewrote over `CATCH_UP_ROWS` rows.
MAX_COPY_PASSES = 3
CATCH_UP_ROWS = 10 * CHUNK_ROWS
# Fenced passes before a move gives up (a pass that keeps finding changes means something
# writes past the fence, or vectors that are not yet visible: resume later).
MAX_FENCED_PASSES = 5
# The fenced step reads a tenant of at most this many rows whole on both sides (it fits in
# one step's 400 calls even when every row is a fact); a larger one's logged changes are
# replayed and row counts compared, so its writes are refused for seconds, not minutes.
FULL_VERIFY_ROWS = 5_000
# A rowid-keyed table moves by its natural key (its rowid differs between databases).
NATURAL_KEYS = {"semantic_facts": ("fact_id",)}
# The table whose rows carry the tenant's vectors (id = fact_id).
VECTOR_TABLE = "semantic_facts"
# How long a lease outlives its advance's `max_seconds`: longer than one step can take (a
# chunk's D1 and Vectorize calls), so an advance never saves after its lease has ended.
LEASE_MARGIN_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class MoveBudget:
    """One `advance`: at most `max_calls` D1 and Vectorize calls and `max_seconds`."""

    max_calls: int = 400
    max_seconds: float = 20.0


class MoveStatus(BaseModel):
    """A move as the operator sees it."""

    tenant_id: str
    source: str
    target: str
    phase: Phase
    progress: dict[str, Any] = {}
    started_at: int
    updated_at: int
    switched_at: int | None = None
    finished_at: int | None = None
    error: str | None = None
    lease_until: int | None = None  # while an advance is carrying it

    @property
    def stopped_by_check(self) -> bool:
        """Its check after the switch found rows differing: it waits for an operator."""
        return bool(self.progress.get("check", {}).get("differs"))


def _status(row: Row) -> MoveStatus:
    return MoveStatus.model_validate({**row, "progress": json.loads(str(row["progress"]))})


async def move_status(bindings: Bindings, tenant: str) -> MoveStatus | None:
    sql = "SELECT * FROM tenant_moves WHERE tenant_id = ?"
    row = await control_db(bindings).prepare(sql).bind(tenant).first()
    return None if row is None else _status(row)


async def moves(bindings: Bindings) -> list[MoveStatus]:
    rows = await control_db(bindings).prepare("SELECT * FROM tenant_moves ORDER BY tenant_id").all()
    return [_status(r) for r in rows.results]


async def start_move(bindings: Bindings, tenant: str, target: str) -> MoveStatus:
    """Begin moving `tenant` to shard `target` (409 while another move of it is unfinished,
    422 for an unknown shard or the shard it is on)."""
    shard_named(bindings, target)
    current = await move_status(bindings, tenant)
    if current is not None and current.phase not in FINISHED:
        raise ApiError(409, "move_in_progress", f"tenant {tenant!r} is already moving")
    source = await directory_home(bindings, tenant)  # the database's word, not a cache's
    if source == target:
        raise ApiError(422, "already_there", f"tenant {tenant!r} is on shard {target!r}")
    now_ms = int(bindings.clock.now() * 1000)
    sql = (
        "INSERT INTO tenant_moves (tenant_id, source, target, phase, progress, started_at, "
        "updated_at) VALUES (?, ?, ?, 'copying', '{}', ?, ?) ON CONFLICT (tenant_id) DO UPDATE "
        "SET source = excluded.source, target = excluded.target, phase = 'copying', "
        "progress = '{}', started_at = excluded.started_at, updated_at = excluded.updated_at, "
        "switched_at = NULL, finished_at = NULL, error = NULL, lease_owner = NULL, "
        f"lease_until = NULL WHERE tenant_moves.phase IN {FINISHED} RETURNING *"  # a racing start
    )
    values = (tenant, source, target, now_ms, now_ms)
    row = await control_db(bindings).prepare(sql).bind(*values).first()
    if row is None:
        raise ApiError(409, "move_in_progress", f"tenant {tenant!r} is already moving")
    return _status(row)


def _busy(tenant: str, until: int | None) -> ApiError:
    return ApiError(
        409,
        "move_busy",
        f"another advance is carrying tenant {tenant!r}'s move forward (its lease ends at "
        f"{until} ms); try again after it",
    )


async def _save(bindings: Bindings, move: MoveStatus, owner: str, **changes: Any) -> MoveStatus:
    """Record `move` with `changes`, only while `owner` holds its lease (409 `move_busy`
    otherwise: an advance that outlived its lease stops before it acts on a stale view)."""
    updated = move.model_copy(update={**changes, "updated_at": int(bindings.clock.now() * 1000)})
    sql = (
        "UPDATE tenant_moves SET phase = ?, progress = ?, updated_at = ?, switched_at = ?, "
        "finished_at = ?, error = ? WHERE tenant_id = ? AND lease_owner = ?"
    )
    u, progress = updated, json.dumps(updated.progress, separators=(",", ":"))
    values = (u.phase, progress, u.updated_at, u.switched_at, u.finished_at, u.error, u.tenant_id)
    saved = await control_db(bindings).prepare(sql).bind(*values, owner).run()
    if not saved.meta.changes:
        raise _busy(move.tenant_id, None)
    return updated


async def advance(bindings: Bindings, tenant: str, budget: MoveBudget | None = None) -> MoveStatus:
    """Carry `tenant`'s move forward within `budget` and return where it stands (404 when it
    has none, 409 `move_busy` while another advance carries it). Safe to call again at any
    point, after a crash too (once a crashed advance's lease has ended)."""
    return await _leased(bindings, tenant, budget, "advance")


async def cancel_move(
    bindings: Bindings, tenant: str, budget: MoveBudget | None = None
) -> MoveStatus:
    """Cancel `tenant`'s move before its switch and take the first bounded step of undoing
    it (`advance` finishes it); 404 without a move, 409 `move_switched` once the tenant
    lives on the target (move it back instead), 409 `move_busy` while an advance runs."""
    return await _leased(bindings, tenant, budget, "cancel")


async def recheck_move(bindings: Bindings, tenant: str) -> MoveStatus:
    """Run again the check of a switched move that found rows differing (after an operator
    repaired them, or to see whether they still differ) and take its first step; 404 without
    a move, 409 `nothing_to_recheck` unless its check found a difference."""
    return await _leased(bindings, tenant, None, "recheck")


async def _leased(
    bindings: Bindings,
    tenant: str,
    budget: MoveBudget | None,
    action: Literal["advance", "cancel", "recheck"],
) -> MoveStatus:
    """Hold `tenant`'s move for one advance (the lease is taken and the move read in one
    statement: 404 without a move, 409 `move_busy` while another advance holds it), act, and
    give the lease back."""
    # A step's budget when the caller names none: `MOVE_STEP_CALLS` metered calls.
    budget = budget or MoveBudget(max_calls=bindings.settings.move_step_calls)
    owner = uuid.uuid4().hex
    now = int(bindings.clock.now() * 1000)
    until = now + int((budget.max_seconds + LEASE_MARGIN_SECONDS) * 1000)
    sql = (
        "UPDATE tenant_moves SET lease_owner = ?, lease_until = ? WHERE tenant_id = ? "
        "AND (lease_until IS NULL OR lease_until <= ?) RETURNING *"
    )
    taken = await control_db(bindings).prepare(sql).bind(owner, until, tenant, now).first()
    if taken is None:
        current = await move_status(bindings, tenant)
        if current is None:
            raise ApiError(404, "no_move", f"tenant {tenant!r} has no move")
        raise _busy(tenant, current.lease_until)
    move = _status(taken)
    try:
        if action == "recheck":
            if not move.stopped_by_check:
                raise ApiError(
                    409,
                    "nothing_to_recheck",
                    f"tenant {tenant!r}'s move ({move.phase}) has no check that found a difference",
                )
            progress = {k: v for k, v in move.progress.items() if k != "check"}
            move = await _save(bindings, move, owner, progress=progress, error=None)
        move = await _advance(
            bindings, move, owner, Meter(budget.max_calls, budget.max_seconds), action == "cancel"
        )
    finally:
        release = (
            "UPDATE tenant_moves SET lease_owner = NULL, lease_until = NULL "
            "WHERE tenant_id = ? AND lease_owner = ?"
        )
        await control_db(bindings).prepare(release).bind(tenant, owner).run()
    return move.model_copy(update={"lease_until": None})


async def _advance(
    bindings: Bindings, move: MoveStatus, owner: str, meter: Meter, cancel: bool = False
) -> MoveStatus:
    """Carry `move` (as read under `owner`'s lease: nobody else moves it) forward."""
    tenant = move.tenant_id
    source, target = shard_named(bindings, move.source), shard_named(bindings, move.target)

    def now_ms() -> int:
        return int(bindings.clock.now() * 1000)

    # A crash between the switch's directory write and its save leaves `fenced` with the
    # directory already naming the target (the next advance finishes the switch): the
    # directory's word decides, never the phase alone.
    if cancel and move.phase not in ("cancelling", "cancelled"):
        if move.phase not in ("copying", "fenced") or (
            await directory_home(bindings, tenant) == move.target
        ):
            raise ApiError(
                409,
                "move_switched",
                f"tenant {tenant!r} already lives on shard {move.target!r} ({move.phase}); "
                f"move it back to {move.source!r} instead",
            )
        move = await _save(bindings, move, owner, phase="cancelling", progress={}, error=None)
    home_checked = False
    while not meter.stopped() and move.phase not in FINISHED:
        if move.phase in ("copying", "fenced"):
            if "pass" not in move.progress and "replayed" not in move.progress:
                # The phase's first step. Fences first, on both sides: triggers (the change
                # log's too), the target `incoming`; the source logs the tenant's writes from
                # before the first read (copying) or is frozen (fenced).
                src_db = shard_db(source)
                await ensure_fence_triggers(src_db, source.name)
                await ensure_fence_triggers(shard_db(target), target.name)
                await set_fence(shard_db(target), tenant, "incoming", now_ms())
                meter.spend(4)
                if move.phase == "copying":
                    await _ensure_tracking_triggers(src_db, source.name)
                    await _track(src_db, tenant, now_ms())
                    meter.spend()
                    first = await _begin_pass(src_db, tenant, 1)
                    move = await _save(bindings, move, owner, progress=first)
                    continue
                await set_fence(src_db, tenant, "frozen", now_ms())
                replay = int(move.progress.get("rows", 0)) > FULL_VERIFY_ROWS
                after = {"replayed": 0} if replay else _new_pass(1)
                move = await _save(bindings, move, owner, progress=after)
                continue
            if (
                move.phase == "fenced"
                and not home_checked
                and await directory_home(bindings, tenant) == target.name
            ):
                # A crash inside the switch, after the directory named the target: the tenant
                # writes there now, so no pass may run again (it would copy the frozen source
                # over those writes); finish the switch.
                resumed = {**move.progress, "resumed": True}
                move = await _switch(bindings, move, owner, resumed, meter)
                continue
            home_checked = True  # once an advance: it holds the lease, nobody else switches
            if "replayed" in move.progress:
                replayed = await _replay_step(source, target, tenant, meter)
                if replayed:
                    total = move.progress["replayed"] + replayed
                    move = await _save(bindings, move, owner, progress={"replayed": total})
                    continue
                counts = await _counts(source, target, tenant, meter)
                if any(c["source_rows"] != c["target_rows"] for c in counts.values()):
                    # Something changed the source past the log: verify the whole tenant.
                    error = "row counts differed after the replay; verifying every row"
                    move = await _save(bindings, move, owner, progress=_new_pass(1), error=error)
                    continue
                verified = {"verified": counts, "replayed": move.progress["replayed"]}
                move = await _switch(bindings, move, owner, verified, meter)
                continue
            progress = await _sync_step(source, target, tenant, move.progress, meter)
            if not progress["done"]:
                move = await _save(bindings, move, owner, progress=progress)
                continue
            if move.phase == "copying":
                # Whatever was logged before this pass began, the pass has copied since.
                await _forget_changes(shard_db(source), tenant, progress["log_mark"])
                meter.spend()
                # Unfenced passes repeat while the last one rewrote much (writes went on
                # during it): the log then holds little, and the tenant's writes are refused
                # for its replay only.
                more = progress["rows_written"] > CATCH_UP_ROWS
                if more and progress["pass"] < MAX_COPY_PASSES:
                    after = await _begin_pass(shard_db(source), tenant, progress["pass"] + 1)
                    move = await _save(bindings, move, owner, progress=after)
                else:
                    # The step ends here: the next one fences as its first action, with its
                    # whole budget for the replay, so a tenant whose replay fits in one step
                    # is refused writes for that step only, never across the wait until the
                    # next advance.
                    rows = sum(t["source_rows"] for t in progress["tables"].values())
                    move = await _save(
                        bindings, move, owner, phase="fenced", progress={"rows": rows}
                    )
                    break
            elif progress["changed"]:
                if progress["pass"] >= MAX_FENCED_PASSES:
                    # Something keeps changing (vectors not yet visible in the index?): stop
                    # here; the next `advance` starts the fenced passes again.
                    error = "the copy kept changing under the fence; resume the move later"
                    return await _save(bindings, move, owner, error=error, progress=_new_pass(1))
                move = await _save(
                    bindings, move, owner, progress=_new_pass(progress["pass"] + 1), error=None
                )
            else:
                verified = {"verified": progress["tables"], "vectors": progress["vectors"]}
                move = await _switch(bindings, move, owner, verified, meter)
        elif move.phase == "switched":
            if move.stopped_by_check:
                break  # kept for an operator (below): nothing more happens to this move
            check = move.progress.get("check")
            if "replayed" in move.progress and not (check and check["done"]):
                # A replayed move is verified row by row before its source goes: every row
                # the tenant has not written on the target since the switch must equal the
                # frozen source's (counts and SHA-256). A difference keeps the source.
                check = await _sync_step(
                    source, target, tenant, check or _new_pass(1), meter, check=True
                )
                if check.get("differs"):
                    error = (
                        f"rows differ after the switch in {', '.join(check['differs'])}; the "
                        "source is kept (frozen) for an operator: do not delete it"
                    )
                    progress = {**move.progress, "check": check}
                    return await _save(bindings, move, owner, error=error, progress=progress)
                move = await _save(
                    bindings, move, owner, progress={**move.progress, "check": check}
                )
                continue
            if now_ms() < (move.switched_at or 0) + GRACE_SECONDS * 1000:
                break  # the source is read by nobody only after the grace period
            await set_home(bindings, tenant, target.name)  # overwrite any stale KV copy
            await set_fence(shard_db(source), tenant, "moved", now_ms())
            await _untrack(shard_db(target), tenant)
            meter.spend(3)
            move = await _save(
                bindings, move, owner, phase="deleting", progress={**move.progress, "table": 0}
            )
        elif move.phase == "cancelling" and not move.progress:
            # The source first: the tenant's writes resume there before anything else.
            await clear_fence(shard_db(source), tenant)
            await _untrack(shard_db(source), tenant)
            meter.spend(2)
            move = await _save(bindings, move, owner, progress={"table": 0})
        elif move.phase in ("deleting", "cancelling"):
            cancelling = move.phase == "cancelling"
            shard = target if cancelling else source
            done = await _delete_step(shard, tenant, move.progress, meter)
            if done is not None:
                move = await _save(bindings, move, owner, progress={**move.progress, "table": done})
                continue
            if cancelling:
                await set_fence(shard_db(target), tenant, "moved", now_ms())
                meter.spend()
            phase = "cancelled" if cancelling else "done"
            move = await _save(bindings, move, owner, phase=phase, finished_at=now_ms())
    return move


def _new_pass(number: int) -> dict[str, Any]:
    counts = {"table": 0, "vectors": 0, "rows_written": 0}
    return {"pass": number, "after": None, "changed": False, "done": False, "tables": {}, **counts}


async def _switch(
    bindings: Bindings, move: MoveStatus, owner: str, verified: dict[str, Any], meter: Meter
) -> MoveStatus:
    """The directory and KV name the target, whose fence is lifted; the source stops logging
    and, after a replay, the target starts (before the directory names it): what the tenant
    writes there is left out of the check that precedes the source's deletion."""
    source, target = shard_named(bindings, move.source), shard_named(bindings, move.target)
    if "replayed" in verified:
        await _ensure_tracking_triggers(shard_db(target), target.name)
        await _track(shard_db(target), move.tenant_id, int(bindings.clock.now() * 1000))
        meter.spend(2)
    await set_home(bindings, move.tenant_id, target.name)
    await clear_fence(shard_db(target), move.tenant_id)
    await _untrack(shard_db(source), move.tenant_id)
    meter.spend(4)
    if (feed := ChangeFeed.of(bindings)) is not None:
        feed.publish(move.tenant_id, [("moved", {"from": source.name, "to": target.name})])
    return await _save(
        bindings,
        move,
        owner,
        phase="switched",
        progress=verified,
        switched_at=int(bindings.clock.now() * 1000),
        error=None,  # an earlier attempt's trouble is over
    )


# The change log (migration 0022): AFTER triggers on every tenant table of the source log the
# key of each row a tracked tenant's write touches, so what changed since a copy pass began is
# known without reading the tenant.


def _tracking_trigger_sql(table: TenantTable, event: str) -> str:
    key = _key(table)
    if any(table.types.get(c) == "BLOB" for c in key):
        # json_array() refuses a BLOB: the trigger would fail the tenant's writes.
        raise ApiError(500, "table_not_movable", f"{table.name} has a BLOB in its key")
    rows = {"INSERT": ("NEW",), "UPDATE": ("OLD", "NEW"), "DELETE": ("OLD",)}[event]
    inserts = " ".join(
        "INSERT INTO tenant_move_changes (tenant_id, tbl, key) VALUES "
        f"({row}.tenant_id, '{table.name}', json_array({', '.join(f'{row}.{c}' for c in key)}));"
        for row in rows
    )
    suffix = zlib.crc32(table.name.encode()) & 0xFFFF
    return (
        f'CREATE TRIGGER IF NOT EXISTS "track_{table.name[:40]}_{suffix:04x}_{event.lower()}" '
        f'AFTER {event} ON "{table.name}" WHEN EXISTS (SELECT 1 FROM tenant_move_tracking '
        f"WHERE tenant_id = {rows[0]}.tenant_id) BEGIN {inserts} END"
    )


async def _ensure_tracking_triggers(db: D1Database, shard: str) -> None:
    """The change log's triggers on every tenant table of `db` that lacks them (idempotent)."""
    tables = await base_tables(db, shard)
    statements = [
        db.prepare(_tracking_trigger_sql(t, event))
        for t in tables
        for event in ("INSERT", "UPDATE", "DELETE")
    ]
    if statements:
        await db.batch(statements)


async def _track(db: D1Database, tenant: str, now_ms: int) -> None:
    sql = "INSERT INTO tenant_move_tracking (tenant_id, since) VALUES (?, ?) ON CONFLICT DO NOTHING"
    await db.prepare(sql).bind(tenant, now_ms).run()


async def _untrack(db: D1Database, tenant: str) -> None:
    await db.batch(
        [
            db.prepare("DELETE FROM tenant_move_tracking WHERE tenant_id = ?").bind(tenant),
            db.prepare("DELETE FROM tenant_move_changes WHERE tenant_id = ?").bind(tenant),
        ]
    )


async def _begin_pass(db: D1Database, tenant: str, number: int) -> dict[str, Any]:
    """A copy pass, with the change log's last entry before it (`log_mark`): the pass reads
    every row after those changes, so they are forgotten when it ends."""
    sql = "SELECT COALESCE(MAX(n), 0) AS n FROM tenant_move_changes WHERE tenant_id = ?"
    mark = await db.prepare(sql).bind(tenant).first_value("n")
    return {**_new_pass(number), "log_mark": int(mark or 0)}


async def _forget_changes(db: D1Database, tenant: str, mark: int) -> None:
    sql = "DELETE FROM tenant_move_changes WHERE tenant_id = ? AND n <= ?"
    await db.prepare(sql).bind(tenant, mark).run()


async def _replay_step(source: Shard, target: Shard, tenant: str, meter: Meter) -> int:
    """Copy to the target the rows of up to `CHUNK_ROWS` logged changes (oldest first), then
    forget those entries; the count of entries replayed (0: the log is empty). Idempotent: a
    crash before the entries are forgotten replays them again."""
    src_db, dst_db = shard_db(source), shard_db(target)
    sql = "SELECT n, tbl, key FROM tenant_move_changes WHERE tenant_id = ? ORDER BY n LIMIT ?"
    logged = (await src_db.prepare(sql).bind(tenant, CHUNK_ROWS).all()).results
    meter.spend()
    if not logged:
        return 0
    tables = {t.name: t for t in await tenant_tables(src_db, source.name)}
    keys: dict[str, dict[str, list[Any]]] = {}
    for entry in logged:
        keys.setdefault(str(entry["tbl"]), {})[str(entry["key"])] = json.loads(str(entry["key"]))
    for name, by_text in keys.items():
        table = tables[name]
        width = max(1, len(_key(table)))
        for chunk in chunks(list(by_text.values()), IDS_PER_STATEMENT // width):
            where = _keys_clause(table, chunk)
            rows = await _rows(src_db, table, tenant, where)
            theirs = await _rows(dst_db, table, tenant, where)
            meter.spend(2)
            if rows == theirs:
                continue
            await _replace(target, table, tenant, where, rows, theirs, meter)
            await _sync_vectors(source, target, tenant, table, rows, meter)
    await _forget_changes(src_db, tenant, max(int(entry["n"]) for entry in logged))
    meter.spend()
    return len(logged)


def _keys_clause(table: TenantTable, keys: Sequence[Sequence[Any]]) -> tuple[str, list[Any]]:
    """SQL conditions (after the tenant's) for a key among `keys`, with their parameters."""
    key = _key(table)
    if not key:
        return "", []  # a keyless table holds one row per tenant
    cols = ", ".join(_quoted(key))
    one = "(" + ", ".join("?" for _ in key) + ")"
    return f" AND ({cols}) IN (VALUES {', '.join(one for _ in keys)})", [v for k in keys for v in k]


async def _counts(
    source: Shard, target: Shard, tenant: str, meter: Meter
) -> dict[str, dict[str, int]]:
    """Each tenant table's row count of the tenant on both sides (one batch a side)."""
    src_db, dst_db = shard_db(source), shard_db(target)
    tables = await base_tables(src_db, source.name)
    counted = []
    for db in (src_db, dst_db):
        sql = 'SELECT COUNT(*) AS n FROM "{}" WHERE tenant_id = ?'
        results = await db.batch([db.prepare(sql.format(t.name)).bind(tenant) for t in tables])
        counted.append([int(r.results[0]["n"]) for r in results])
    meter.spend(2)
    return {
        t.name: {"source_rows": mine, "target_rows": theirs}
        for t, mine, theirs in zip(tables, *counted, strict=True)
    }


def _copied(table: TenantTable) -> tuple[str, ...]:
    """The columns a row is compared and written by (a rowid alias differs between databases)."""
    if table.name in NATURAL_KEYS:
        return tuple(c for c in table.columns if c not in table.key)
    return table.columns


def _key(table: TenantTable) -> tuple[str, ...]:
    if table.name in NATURAL_KEYS:
        return NATURAL_KEYS[table.name]
    if "tenant_id" not in table.key:
        raise ApiError(
            500, "table_not_movable", f"{table.name} has no tenant-first key to move it by"
        )
    return tuple(c for c in table.key if c != "tenant_id")


def _quoted(columns: Sequence[str]) -> list[str]:
    """Column names as SQL identifiers (schema-read names: a keyword or odd name still works)."""
    return [f'"{c}"' for c in columns]


def _range(
    key: Sequence[str], after: list[Any] | None, upto: list[Any] | None
) -> tuple[str, list[Any]]:
    """SQL conditions (after the tenant's) for `after < key <= upto`, with their parameters;
    `key`: the key's SQL expressions (`_quoted` columns)."""
    cols = ", ".join(key)
    marks = ", ".join("?" for _ in key)
    sql, params = "", []
    if key and after is not None:
        sql += f" AND ({cols}) > ({marks})"
        params += after
    if key and upto is not None:
        sql += f" AND ({cols}) <= ({marks})"
        params += upto
    return sql, params


def _key_range(
    table: TenantTable, after: list[Any] | None, upto: list[Any] | None
) -> tuple[str, list[Any]]:
    return _range(_quoted(_key(table)), after, upto)


async def _rows(
    db: D1Database,
    table: TenantTable,
    tenant: str,
    where: tuple[str, list[Any]],
    limit: int | None = None,
    columns: Sequence[str] | None = None,
) -> list[Row]:
    """The tenant's rows of `table` meeting `where` (SQL conditions after the tenant's, and
    their parameters: `_key_range`, `_keys_clause`) in key order (`columns`, by default every
    copied one)."""
    cols = ", ".join(_quoted(columns or _copied(table)))
    key = _quoted(_key(table))
    order = f" ORDER BY {', '.join(key)}" if key else ""
    tail = f" LIMIT {int(limit)}" if limit is not None else ""
    sql = f'SELECT {cols} FROM "{table.name}" WHERE tenant_id = ?{where[0]}{order}{tail}'
    return (await db.prepare(sql).bind(tenant, *where[1]).all()).results


def _delete(
    db: D1Database, table: TenantTable, tenant: str, where: tuple[str, list[Any]]
) -> D1Statement:
    sql = f'DELETE FROM "{table.name}" WHERE tenant_id = ?{where[0]}'
    return db.prepare(sql).bind(tenant, *where[1])


def _digest(previous: str, rows: list[Row]) -> str:
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((previous + text).encode()).hexdigest()


def _blob_params(table: TenantTable, row: Row, columns: Sequence[str]) -> list[Any]:
    # D1 returns a BLOB as a list of byte values; it is bound back as bytes.
    return [
        bytes(row[c]) if table.types.get(c) == "BLOB" and isinstance(row[c], list) else row[c]
        for c in columns
    ]


async def _sync_step(
    source: Shard,
    target: Shard,
    tenant: str,
    progress: dict[str, Any],
    meter: Meter,
    *,
    check: bool = False,
) -> dict[str, Any]:
    """One chunk of the current pass: compare, and replace the target's rows when they differ.
    `check`, after a replayed switch: leave out the keys the tenant wrote on the target since
    (its change log) and name the tables where a row differs (`differs`) instead of replacing
    it. Either way the facts' vectors the target lacks are copied."""
    progress = dict(progress)
    src_db, dst_db = shard_db(source), shard_db(target)
    tables = await base_tables(src_db, source.name)
    tables.sort(key=lambda t: (t.name != "tenant_lifecycle", t.name))  # its limits first
    if progress["table"] >= len(tables):
        progress["done"] = True
        return progress
    table = tables[progress["table"]]
    key, after = _key(table), progress["after"]
    limit = CHUNK_ROWS if key else None  # a keyless table holds one row per tenant
    rows = await _rows(src_db, table, tenant, _key_range(table, after, None), limit)
    last = [rows[-1][c] for c in key] if rows and key and len(rows) == CHUNK_ROWS else None
    theirs = await _rows(dst_db, table, tenant, _key_range(table, after, last))
    meter.spend(2)
    if check:
        # The keys the tenant wrote on the target since the switch: its change log, read for
        # this chunk's range only, so however much the tenant writes while a check runs or
        # waits for an operator, a chunk never reads the table's whole log again. Compared
        # as values, not JSON text (SQLite and Python escape some characters apart).
        sql, params = _logged_in_range(table, after, last)
        logged = (await dst_db.prepare(sql).bind(tenant, *params).all()).results
        written = {tuple(json.loads(str(r["key"]))) for r in logged}
        meter.spend()
        rows = [r for r in rows if tuple(r[c] for c in key) not in written]
        theirs = [r for r in theirs if tuple(r[c] for c in key) not in written]
    empty = {"source_rows": 0, "target_rows": 0, "source_sha256": "", "target_sha256": ""}
    tally = progress["tables"].setdefault(table.name, empty)
    tally["source_rows"] += len(rows)
    tally["target_rows"] += len(theirs)
    tally["source_sha256"] = _digest(tally["source_sha256"], rows)
    tally["target_sha256"] = _digest(tally["target_sha256"], theirs)
    if rows != theirs and check:
        if table.name not in progress.setdefault("differs", []):
            progress["differs"].append(table.name)
    elif rows != theirs:  # not a check: the target's rows of the range become the source's
        progress["changed"] = True
        await _replace(target, table, tenant, _key_range(table, after, last), rows, theirs, meter)
        progress["rows_written"] += len(rows)
    if copied := await _sync_vectors(source, target, tenant, table, rows, meter):
        progress["changed"] = True
        progress["vectors"] += copied
    if last is None:
        progress["table"] += 1
    progress["after"] = last
    return progress


def _logged_in_range(
    table: TenantTable, after: list[Any] | None, upto: list[Any] | None
) -> tuple[str, list[Any]]:
    """The change log's entries of `table` with `after < key <= upto` (?: the tenant, then
    the returned parameters), compared on the logged key's elements, in the order and with
    the types `json_array` stored them."""
    elements = [f"json_extract(key, '$[{i}]')" for i in range(len(_key(table)))]
    where, params = _range(elements, after, upto)
    sql = f"SELECT key FROM tenant_move_changes WHERE tenant_id = ? AND tbl = ?{where}"
    return sql, [table.name, *params]


async def _replace(
    target: Shard,
    table: TenantTable,
    tenant: str,
    where: tuple[str, list[Any]],
    rows: list[Row],
    theirs: list[Row],
    meter: Meter,
) -> None:
    """The target's rows meeting `where` (`theirs`, a key range or keys) become the source's
    `rows`, in one transaction; the vectors of facts that went are deleted first."""
    dst_db = shard_db(target)
    columns = _copied(table)
    if table.name == VECTOR_TABLE and target.vectors is not None:
        gone = {str(r["fact_id"]) for r in theirs} - {str(r["fact_id"]) for r in rows}
        if gone:
            await delete_own_vectors(target.vectors, tenant, sorted(gone))
            meter.spend()
    names = ", ".join(_quoted(columns))
    marks = ", ".join("?" for _ in columns)
    insert = f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})'
    statements = [dst_db.prepare(insert).bind(*_blob_params(table, r, columns)) for r in rows]
    await dst_db.batch([_delete(dst_db, table, tenant, where), *statements])
    meter.spend()


async def _sync_vectors(
    source: Shard, target: Shard, tenant: str, table: TenantTable, rows: list[Row], meter: Meter
) -> int:
    """Copy to the target index the vectors of the facts among `rows` (of `table`) that it
    lacks; the count copied."""
    if table.name != VECTOR_TABLE or not rows or source.vectors is None:
        return 0
    meter.spend(2)
    fact_ids = [str(r["fact_id"]) for r in rows]
    if target.vectors is None:
        raise ApiError(503, "semantic_unavailable", f"shard {target.name} has no Vectorize index")
    theirs = {r.id for r in await own_vectors(target.vectors, tenant, fact_ids)}
    missing = [i for i in fact_ids if i not in theirs]
    if not missing:
        return 0
    found = await own_vectors(source.vectors, tenant, missing)
    for chunk in chunks(found, 100):
        await target.vectors.upsert(list(chunk))
    return len(found)


async def _delete_step(
    shard: Shard, tenant: str, progress: dict[str, Any], meter: Meter
) -> int | None:
    """Delete one chunk of the tenant's rows on `shard` (base tables, then derived ones): the
    source once the tenant has moved, the target when its move is cancelled. The table index
    to continue with, or None when the shard holds nothing of the tenant."""
    db = shard_db(shard)
    # The tenant's keyword code goes last: the coded tables are found by it.
    tables = sorted(
        await tenant_tables(db, shard.name),
        key=lambda t: (t.name in DERIVED_TABLES, t.name == "keyword_tenants", t.name),
    )
    index = int(progress.get("table", 0))
    if index >= len(tables):
        return None
    table = tables[index]
    if table.name in DERIVED_TABLES:
        # What the base tables' delete triggers left (counters at zero): one statement.
        where = tenant_clause(table.name)
        await db.prepare(f'DELETE FROM "{table.name}" WHERE {where}').bind(tenant).run()
        meter.spend()
        return index + 1
    key = _key(table)
    # The keys are enough to delete by (a keyless table holds one row per tenant).
    rows = await _rows(db, table, tenant, ("", []), CHUNK_ROWS if key else None, key or None)
    meter.spend()
    if not rows:
        return index + 1
    if table.name == VECTOR_TABLE and shard.vectors is not None:
        await delete_own_vectors(shard.vectors, tenant, [str(r["fact_id"]) for r in rows])
        meter.spend()
    upto = [rows[-1][c] for c in key] if key else None
    await _delete(db, table, tenant, _key_range(table, None, upto)).run()
    meter.spend()
    return index
