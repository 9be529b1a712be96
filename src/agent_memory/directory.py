"""The tenant directory: which shard holds each tenant's memory, and the fences a move puts on
a tenant's writes (docs/placement.md, "The directory").

`tenant_bindings` resolves a tenant's shard once per request (`Memory.open`): the only shard,
this isolate's cache (`HOME_TTL_SECONDS`), KV `tenant-home:{tenant}`, else the primary's
`tenant_directory` row, placing a new tenant (`choose_shard`; insert and read-back in one batch,
so racing first requests agree). Only the directory's writers change a home (`set_home`: the
move's switch); requests only copy it into KV. Fences (`tenant_fences`, per database): triggers
abort a fenced tenant's writes with `tenant_moved` (`frozen`: every write; `moved`: all but
deletes; `incoming`: none), answered 503 `tenant_moving`; this isolate then reads the database,
not KV, for `FRESH_AFTER_FENCE_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, replace
from typing import TypeVar

from bindings.environment import CONTROL_PLANE_TABLES, Bindings, Shard
from bindings.ports.d1 import FENCE_MARK, D1Database
from bindings.ports.kv import KVNamespace
from bindings.ports.vectorize import VECTORIZE_MAX_VECTORS
from bindings.settings import PRIMARY_SHARD
from http_messages import ApiError

log = logging.getLogger(__name__)
T = TypeVar("T")

HOME_TTL_SECONDS = 30.0
FRESH_AFTER_FENCE_SECONDS = 120.0
# Two shards whose free shares (`ShardUsage.free`) differ by less than this are equally free:
# the tenant goes to the first of them (by the order of MEMORY_SHARDS), so small databases
# are not filled one tenant each in turn.
FREE_SPACE_TIE = 0.01
FENCE_STATES = ("incoming", "frozen", "moved")
# Tables of the directory and moves themselves: never copied with a tenant.
DIRECTORY_TABLES = frozenset(
    {
        "tenant_directory",
        "tenant_fences",
        "tenant_moves",
        "tenant_move_tracking",
        "tenant_move_changes",
    }
)
# Tables the database's own triggers keep from other tables' rows (keyword postings and their
# counters from `semantic_facts`, migrations 0009/0015, the tenant's code in them, 0020; the
# episode count from `memory_episodes`, 0004): a move does not copy them (the target's
# triggers rebuild them) and they carry no fence triggers (those would refuse the base
# tables' own trigger writes).
DERIVED_TABLES = frozenset(
    {
        "semantic_terms",
        "semantic_term_stats",
        "semantic_index_stats",
        "memory_tenant_stats",
        "keyword_tenants",
    }
)
# Derived tables whose `tenant_id` column holds the tenant's code in this database (0020),
# and the code of the tenant bound to the `?`.
BY_TENANT_CODE = frozenset({"semantic_terms", "semantic_term_stats"})
TENANT_CODE = "(SELECT code FROM keyword_tenants WHERE tenant_id = ?)"


def tenant_clause(table: str) -> str:
    """`tenant_id = ?` for `table`'s rows of the tenant bound to the `?` (by its code in the
    tables that name it so)."""
    return f"tenant_id = {TENANT_CODE}" if table in BY_TENANT_CODE else "tenant_id = ?"


HOMES_CACHED = 4096  # bounds this isolate's memory; past it the cache starts over
# tenant -> (read at, shard): this isolate's copy of the directory, for `HOME_TTL_SECONDS`.
_HOMES: dict[str, tuple[float, str]] = {}
_fresh_until = 0.0


def all_shards(bindings: Bindings) -> tuple[Shard, ...]:
    """Every shard, the primary first. Until narrowed, `db` and `vectors` are the primary's
    (so a copy with another `db` has that as its primary)."""
    if not bindings.shards:
        return (Shard(PRIMARY_SHARD, bindings.db, bindings.vectors),)
    if bindings.shard is None:
        primary = Shard(bindings.shards[0].name, bindings.db, bindings.vectors)
        return (primary, *bindings.shards[1:])
    return bindings.shards


def primary_db(bindings: Bindings) -> D1Database | None:
    """The primary database: control-plane tables (OAuth, grants, the tenant directory)."""
    return all_shards(bindings)[0].db


def on_shard(bindings: Bindings, name: str) -> Bindings:
    """A copy whose `db` and `vectors` are shard `name`'s; KeyError for an unknown name."""
    shards = all_shards(bindings)
    for shard in shards:
        if shard.name == name:
            return replace(bindings, db=shard.db, vectors=shard.vectors, shard=name, shards=shards)
    raise KeyError(f"no shard named {name!r}")


def shard_named(bindings: Bindings, name: str) -> Shard:
    """Shard `name`, or 422 `unknown_shard` (an operator named one MEMORY_SHARDS lacks)."""
    for shard in all_shards(bindings):
        if shard.name == name:
            return shard
    raise ApiError(422, "unknown_shard", f"no shard named {name!r} (MEMORY_SHARDS)")


def home_key(tenant: str) -> str:
    return f"tenant-home:{tenant}"


async def tenant_bindings(bindings: Bindings, tenant: str) -> Bindings:
    """`bindings` narrowed to `tenant`'s shard (see the module docstring)."""
    if bindings.shard is not None:
        return bindings
    shards = all_shards(bindings)
    if len(shards) == 1:
        return on_shard(bindings, shards[0].name)
    return on_shard(bindings, await home_of(bindings, tenant))


async def home_of(bindings: Bindings, tenant: str) -> str:
    """The name of `tenant`'s shard: cache, KV, then the directory (placing a new tenant)."""
    now = bindings.clock.now()
    names = {s.name for s in all_shards(bindings)}
    read_at, name = _HOMES.get(tenant, (now, None))
    # A clock that moved backwards also invalidates: never serve an entry of unknown age.
    if name in names and read_at <= now < read_at + HOME_TTL_SECONDS:
        return str(name)
    kv = bindings.kv
    name = None
    if kv is not None and now >= _fresh_until:
        try:
            name = await kv.get(home_key(tenant))
        except Exception as exc:  # KV is a cache of the directory: D1 answers without it
            log.warning("directory: KV read failed, asking the directory: %s", exc)
    if name not in names:
        name = await directory_home(bindings, tenant)
        if kv is not None:
            bindings.background.wait_until(_remember(kv, tenant, name))
    if len(_HOMES) >= HOMES_CACHED:
        _HOMES.clear()
    _HOMES[tenant] = (now, str(name))
    return str(name)


async def _remember(kv: KVNamespace, tenant: str, shard: str) -> None:
    try:
        await kv.put(home_key(tenant), shard)
    except Exception as exc:  # the next request reads the directory again
        log.warning("directory: KV write failed: %s", exc)


def control_db(bindings: Bindings) -> D1Database:
    """The primary database (the directory, the move log), or 503 without it."""
    db = primary_db(bindings)
    if db is None:
        raise ApiError(503, "episodic_unavailable", "the D1 binding is missing")
    return db


def shard_db(shard: Shard) -> D1Database:
    """A shard's database, or 503 when the deployment lacks its binding."""
    if shard.db is None:
        raise ApiError(503, "episodic_unavailable", f"shard {shard.name} has no D1 binding")
    return shard.db


async def recorded_home(bindings: Bindings, tenant: str) -> str | None:
    """The directory's row for `tenant` (None: never placed)."""
    sql = "SELECT shard FROM tenant_directory WHERE tenant_id = ?"
    value = await control_db(bindings).prepare(sql).bind(tenant).first_value("shard")
    return None if value is None else str(value)


async def directory_home(bindings: Bindings, tenant: str) -> str:
    """The directory's shard for `tenant`, placing it first if it has none."""
    found = await recorded_home(bindings, tenant)
    if found is not None:
        return found
    return await _place(bindings, tenant, await choose_shard(bindings, tenant))


async def _place(bindings: Bindings, tenant: str, shard: str) -> str:
    """Record `shard` as the home of a tenant without one and return the recorded home: the
    insert and its read-back run in one batch, so of two racing placements one wins and both
    callers learn which."""
    db = control_db(bindings)
    insert = "INSERT OR IGNORE INTO tenant_directory (tenant_id, shard, placed_at) VALUES (?, ?, ?)"
    read = "SELECT shard FROM tenant_directory WHERE tenant_id = ?"
    now_ms = int(bindings.clock.now() * 1000)
    results = await db.batch(
        [db.prepare(insert).bind(tenant, shard, now_ms), db.prepare(read).bind(tenant)]
    )
    placed = str(results[1].results[0]["shard"])
    if placed == shard and results[0].meta.changes:
        log.info("directory: tenant %s placed on shard %s", tenant, placed)
    return placed


async def choose_shard(bindings: Bindings, tenant: str) -> str:
    """Where a tenant without a directory row goes: the primary when it already holds rows of
    the tenant, else the shard with the most free space (`ShardUsage.free`, `FREE_SPACE_TIE`)."""
    shards = all_shards(bindings)
    primary = shards[0]
    if primary.db is not None and await holds_tenant(primary.db, tenant, PRIMARY_SHARD):
        return PRIMARY_SHARD
    usage = await shard_usage(bindings)
    capacity = bindings.settings.d1_database_max_bytes
    free = {
        s.name: share
        for s in shards
        if s.db is not None and (share := usage[s.name].free(capacity)) is not None
    }
    if not free:
        return PRIMARY_SHARD
    best = max(free.values())
    return next(name for name, share in free.items() if best - share <= FREE_SPACE_TIE)


@dataclass(frozen=True, slots=True)
class ShardUsage:
    """A shard's D1 database size in bytes and its index's vector count (None: not known)."""

    bytes: int | None
    vectors: int | None

    def free(self, max_bytes: int) -> float | None:
        """The share of the shard still free: the smaller of its database's (of `max_bytes`)
        and its index's (of Vectorize's 10M); None when the database's size is not known."""
        if self.bytes is None:
            return None
        shares = [1 - self.bytes / max_bytes]
        if self.vectors is not None:
            shares.append(1 - self.vectors / VECTORIZE_MAX_VECTORS)
        return min(shares)


# Run for its `meta.size_after` (sqlite_master is there in any database, migrated or not).
SIZE_PROBE = "SELECT 1 FROM sqlite_master LIMIT 1"


async def shard_usage(bindings: Bindings) -> dict[str, ShardUsage]:
    """Every shard's usage, all read at once: D1's `meta.size_after` of one statement and
    the index's `describe()`. What does not answer is logged and left unknown."""

    async def size(shard: Shard) -> int | None:
        if shard.db is None:
            return None
        return (await shard.db.prepare(SIZE_PROBE).run()).meta.size_after

    async def count(shard: Shard) -> int | None:
        if shard.vectors is None:
            return None
        return (await shard.vectors.describe()).vector_count

    def known(shard: Shard, what: str, value: T | BaseException | None) -> T | None:
        if isinstance(value, BaseException):
            log.warning("directory: shard %s: no %s: %s", shard.name, what, value)
            return None
        return value

    async def usage(shard: Shard) -> ShardUsage:
        found = await asyncio.gather(size(shard), count(shard), return_exceptions=True)
        return ShardUsage(
            known(shard, "database size", found[0]), known(shard, "vector count", found[1])
        )

    shards = all_shards(bindings)
    found = await asyncio.gather(*(usage(s) for s in shards))
    return {shard.name: each for shard, each in zip(shards, found, strict=True)}


async def set_home(bindings: Bindings, tenant: str, shard: str) -> None:
    """Record `shard` as `tenant`'s home in the directory and KV (the move's switch)."""
    sql = (
        "INSERT INTO tenant_directory (tenant_id, shard, placed_at) VALUES (?, ?, ?) "
        "ON CONFLICT (tenant_id) DO UPDATE SET shard = excluded.shard, "
        "placed_at = excluded.placed_at"
    )
    now_ms = int(bindings.clock.now() * 1000)
    await control_db(bindings).prepare(sql).bind(tenant, shard, now_ms).run()
    await _publish(bindings, tenant, shard)


async def _publish(bindings: Bindings, tenant: str, shard: str) -> None:
    """A home the directory now records, into KV and out of this isolate's cache."""
    if bindings.kv is not None:
        await bindings.kv.put(home_key(tenant), shard)
    _HOMES.pop(tenant, None)


async def place_tenant(bindings: Bindings, tenant: str, shard: str) -> str:
    """Place a tenant the directory does not know yet on `shard` (an operator pinning a large
    tenant to a database of its own); 409 `already_placed` for a placed tenant (that is a
    move), 422 `unknown_shard`. Returns the shard."""
    shard_named(bindings, shard)
    found = await recorded_home(bindings, tenant)
    if found is None:
        primary = all_shards(bindings)[0]
        elsewhere = shard != PRIMARY_SHARD and primary.db is not None
        if elsewhere and await holds_tenant(shard_db(primary), tenant, PRIMARY_SHARD):
            found = PRIMARY_SHARD  # its rows are on the primary: only a move takes them
    placed = found or await _place(bindings, tenant, shard)
    if placed != shard:  # placed elsewhere before, or by a request meanwhile
        raise ApiError(
            409, "already_placed", f"tenant {tenant!r} is on shard {placed!r}; move it instead"
        )
    await _publish(bindings, tenant, shard)
    return shard


async def homes(bindings: Bindings) -> dict[str, str]:
    """Every placed tenant's shard (the operator's listing)."""
    sql = "SELECT tenant_id, shard FROM tenant_directory ORDER BY tenant_id"
    rows = (await control_db(bindings).prepare(sql).all()).results
    return {str(r["tenant_id"]): str(r["shard"]) for r in rows}


def note_fenced(now: float) -> ApiError:
    """A write met a fence: forget every cached home, read the directory itself (not KV) for
    `FRESH_AFTER_FENCE_SECONDS`, and answer 503 `tenant_moving` (nothing was written)."""
    global _fresh_until
    _HOMES.clear()
    _fresh_until = now + FRESH_AFTER_FENCE_SECONDS
    return ApiError(
        503,
        "tenant_moving",
        "the tenant is moving to another database; nothing was written, retry shortly",
        headers={"retry-after": "5"},
    )


def forget_cached_homes() -> None:
    """Tests: start from an empty isolate cache."""
    global _fresh_until
    _HOMES.clear()
    _TABLES.clear()
    _fresh_until = 0.0


@dataclass(frozen=True, slots=True)
class TenantTable:
    """A table with a `tenant_id` column: its columns and primary key, in order, and the
    declared type of each column."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    types: dict[str, str]


_TABLES: dict[str, tuple[TenantTable, ...]] = {}


async def tenant_tables(db: D1Database, shard: str) -> tuple[TenantTable, ...]:
    """Every table of shard `shard`'s database `db` holding tenant rows (a `tenant_id`
    column), control-plane and directory tables excepted, read from the schema once per shard
    and isolate (the schema changes only with a migration, applied before the deploy that
    uses it)."""
    cached = _TABLES.get(shard)
    if cached is not None:
        return cached
    listed = (await db.prepare("PRAGMA table_list").all()).results
    names = sorted(
        str(r["name"])
        for r in listed
        if r.get("type") == "table"
        and r.get("schema", "main") == "main"
        and not str(r["name"]).startswith(("sqlite_", "_cf_", "d1_"))
        and str(r["name"]) not in CONTROL_PLANE_TABLES | DIRECTORY_TABLES
    )
    infos = await db.batch([db.prepare(f'PRAGMA table_info("{name}")') for name in names])
    tables = []
    for name, info in zip(names, infos, strict=True):
        columns = tuple(str(c["name"]) for c in info.results)
        if "tenant_id" not in columns:
            continue
        keyed = sorted((int(c["pk"]), str(c["name"])) for c in info.results if int(c["pk"]))
        types = {str(c["name"]): str(c["type"]).upper() for c in info.results}
        tables.append(TenantTable(name, columns, tuple(c for _, c in keyed), types))
    _TABLES[shard] = found = tuple(tables)
    return found


async def holds_tenant(db: D1Database, tenant: str, shard: str) -> bool:
    """Whether any tenant table of `db` has a row of `tenant` (one statement)."""
    tables = await tenant_tables(db, shard)
    if not tables:
        return False
    probes = " OR ".join(f'EXISTS (SELECT 1 FROM "{t.name}" WHERE tenant_id = ?1)' for t in tables)
    found = await db.prepare(f"SELECT ({probes}) AS held").bind(tenant).first_value("held")
    if found:
        log.info("directory: shard %s already holds rows of tenant %s", shard, tenant)
    return bool(found)


def _trigger_sql(table: str, event: str) -> str:
    row = "OLD" if event == "DELETE" else "NEW"
    states = "('frozen')" if event == "DELETE" else "('frozen', 'moved')"
    suffix = zlib.crc32(table.encode()) & 0xFFFF
    return (
        f'CREATE TRIGGER IF NOT EXISTS "fence_{table[:40]}_{suffix:04x}_{event.lower()}" '
        f'BEFORE {event} ON "{table}" WHEN EXISTS (SELECT 1 FROM tenant_fences '
        f"WHERE tenant_id = {row}.tenant_id AND state IN {states}) "
        f"BEGIN SELECT RAISE(ABORT, '{FENCE_MARK}'); END"
    )


async def base_tables(db: D1Database, shard: str) -> list[TenantTable]:
    """The tenant tables of shard `shard` a move copies, fences and logs: all but the
    `DERIVED_TABLES` the database's triggers keep from them."""
    return [t for t in await tenant_tables(db, shard) if t.name not in DERIVED_TABLES]


async def ensure_fence_triggers(db: D1Database, shard: str) -> int:
    """Create the fence triggers on every tenant table of `db` that lacks them (idempotent:
    a table added by a later migration gets them at the next move). Returns the count of
    statements run."""
    statements = [
        db.prepare(_trigger_sql(t.name, event))
        for t in await base_tables(db, shard)
        for event in ("INSERT", "UPDATE", "DELETE")
    ]
    if statements:
        await db.batch(statements)
    return len(statements)


async def set_fence(db: D1Database, tenant: str, state: str, now_ms: int) -> None:
    """Fence `tenant`'s rows in `db` (`FENCE_STATES`)."""
    if state not in FENCE_STATES:
        raise ValueError(f"unknown fence state {state!r}")
    sql = (
        "INSERT INTO tenant_fences (tenant_id, state, set_at) VALUES (?, ?, ?) "
        "ON CONFLICT (tenant_id) DO UPDATE SET state = excluded.state, set_at = excluded.set_at"
    )
    await db.prepare(sql).bind(tenant, state, now_ms).run()


async def clear_fence(db: D1Database, tenant: str) -> None:
    await db.prepare("DELETE FROM tenant_fences WHERE tenant_id = ?").bind(tenant).run()
