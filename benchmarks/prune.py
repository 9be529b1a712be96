"""The weekly prune over 1M episodes across 100 tenants, in the local runtime.

    uv run python benchmarks/prune.py [--sizes 250000,500000,1000000] [--tenants 100]
                                      [--batch-rows 500] [--rows-per-week N | --weeks W]
                                      [--json out.json]

For each size, in a fresh state folder (not timed): migrations, then `size` episodes spread
evenly over `--tenants` tenants and over ISO weeks that all lie past the 90-day retention,
written straight into the local D1 file with `executemany` (the episode-counter triggers
run for every row, as they would on D1). By default each tenant has `--rows-per-week`
(= the batch size) episodes per week, so every size has the same batch shape and the
number of batches grows with the rows; `--weeks W` fixes the span instead (then every size
has the same number of batches, each fuller). Then the timed part: one prune job
through the real code path — `agent_memory.lifecycle.prune.Pruner` over the D1 port
(`SqliteD1`, with D1's limits) and the on-disk cold tier (`LocalObjectStore`) — archiving
every batch as gzip NDJSON before deleting it. The budget is unlimited (locally there is
no per-invocation limit; on Cloudflare the same job spreads over invocations, see
docs/lifecycle.md).

Printed per size: wall time, batches, rows/s, archive objects and bytes, D1 statements per
batch; then the growth check: time per row at each size relative to the smallest, which
stays near 1.0 when the cost is linear. Each run is verified: every episode deleted, every
one present exactly once in the archives (by count) and in the cold item index
(`cold_items`, docs/tiered-memory.md), the per-tenant counts exact.
A measurement script, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from agent_memory.ids import content_hash  # noqa: E402
from agent_memory.lifecycle.prune import (  # noqa: E402
    PruneBudget,
    Pruner,
    TenantPruneCounts,
    week_bounds,
)
from bindings.ports.clock import FixedClock  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402
from tests.fakes.embedder import HashingEmbedder  # noqa: E402

NOW = 1_750_000_000.0  # 2025-06-15T15:06:40Z
NOW_MS = int(NOW * 1000)
DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
RETENTION_DAYS = 90
SEED_CHUNK = 50_000


def seed(db_path: Path, size: int, tenants: int, weeks: int) -> None:
    """`size` episodes, `size // tenants` per tenant, the same number in each of `weeks`
    whole ISO weeks that end before the retention cutoff (evenly spaced in each week)."""
    per_tenant = size // tenants
    per_week = -(-per_tenant // weeks)
    cutoff = NOW_MS - RETENTION_DAYS * DAY_MS
    last_week_start, _ = week_bounds(cutoff - WEEK_MS)
    first_week_start = last_week_start - (weeks - 1) * WEEK_MS
    text = "The contact asked about pricing for the enterprise tier and a pilot in Q3."
    digest = content_hash(text)
    data = json.dumps({"channel": "email", "score": 0.7})

    def rows() -> Any:
        serial = 0
        for t in range(tenants):
            tenant = f"tenant-{t:03d}"
            for i in range(per_tenant):
                week, slot = divmod(i, per_week)
                created = first_week_start + week * WEEK_MS + slot * (WEEK_MS - 1) // per_week
                serial += 1
                yield (
                    tenant,
                    f"E{serial:025d}",
                    f"R{serial // 10:025d}",
                    "assistant",
                    "default",
                    "observation",
                    f"contact:{i % 500}",
                    text,
                    data,
                    0.5,
                    digest,
                    created,
                )

    conn = sqlite3.connect(db_path)
    try:
        batch: list[tuple[Any, ...]] = []
        for row in rows():
            batch.append(row)
            if len(batch) >= SEED_CHUNK:
                _insert(conn, batch)
                batch = []
        if batch:
            _insert(conn, batch)
    finally:
        conn.close()


def _insert(conn: sqlite3.Connection, batch: list[tuple[Any, ...]]) -> None:
    with conn:
        conn.executemany(
            "INSERT INTO memory_episodes (tenant_id, episode_id, run_id, agent_type, "
            "instance_id, kind, subject, content, data, importance, content_hash, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )


async def measure(
    size: int, tenants: int, weeks: int | None, batch_rows: int, rows_per_week: int
) -> dict[str, Any]:
    if weeks is None:
        weeks = max(1, -(-(size // tenants) // rows_per_week))
    with tempfile.TemporaryDirectory(prefix="prune-bench-") as tmp:
        runtime = LocalRuntime.open(
            Path(tmp) / "state", embedder=HashingEmbedder(), clock=FixedClock(NOW)
        )
        await runtime.migrate()
        seed_started = time.perf_counter()
        await asyncio.to_thread(seed, runtime.state.d1, size, tenants, weeks)
        seed_seconds = time.perf_counter() - seed_started
        expected = (size // tenants) * tenants
        pruner = Pruner(
            runtime.db,
            runtime.cold,
            runtime.clock,
            default_retention_days=RETENTION_DAYS,
            budget=PruneBudget(max_operations=10**12, max_seconds=10.0**9, batch_rows=batch_rows),
        )
        done = {"tenants": 0}

        def progress(counts: TenantPruneCounts) -> None:
            done["tenants"] += 1
            if done["tenants"] % 10 == 0 or done["tenants"] == tenants:
                print(
                    f"    {size:>9,}: {done['tenants']}/{tenants} tenants pruned "
                    f"({time.perf_counter() - started:.1f}s)",
                    file=sys.stderr,
                    flush=True,
                )

        started = time.perf_counter()
        report = await pruner.run(f"bench-{size}", NOW_MS, progress=progress)
        seconds = time.perf_counter() - started

        left = await runtime.db.prepare("SELECT COUNT(*) AS n FROM memory_episodes").first_value(
            "n"
        )
        ledger = await runtime.db.prepare(
            "SELECT COUNT(*) AS objects, SUM(rows) AS rows, SUM(bytes) AS bytes "
            "FROM lifecycle_archives"
        ).first()
        assert ledger is not None
        indexed = await runtime.db.prepare(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT archive_key) AS objects FROM cold_items"
        ).first()
        assert indexed is not None
        keys = runtime.cold.keys("archive/")
        totals = report.totals()
        ok = (
            report.complete
            and int(left or 0) == 0
            and totals["episodes_deleted"] == expected
            and int(ledger["rows"] or 0) == expected
            and int(ledger["objects"] or 0) == len(keys)
            # every archived episode is in the cold index once, pointing at a real object
            and int(indexed["n"] or 0) == expected
            and int(indexed["objects"] or 0) == len(keys)
            and all(t.episodes_deleted == size // tenants for t in report.tenants)
        )
        await runtime.close()
        return {
            "episodes": expected,
            "tenants": tenants,
            "weeks": weeks,
            "batch_rows": batch_rows,
            "seed_seconds": round(seed_seconds, 2),
            "prune_seconds": round(seconds, 3),
            "batches": totals["batches"],
            "rows_per_second": round(expected / seconds),
            "archive_objects": len(keys),
            "archive_bytes": int(ledger["bytes"] or 0),
            "d1_statements": report.operations,
            "verified": ok,
        }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="250000,500000,1000000")
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--weeks", type=int, default=None)
    parser.add_argument("--batch-rows", type=int, default=500)
    parser.add_argument("--rows-per-week", type=int, default=None)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = []
    for size in sizes:
        print(f"  seeding and pruning {size:,} episodes...", file=sys.stderr, flush=True)
        results.append(
            await measure(
                size,
                args.tenants,
                args.weeks,
                args.batch_rows,
                args.rows_per_week or args.batch_rows,
            )
        )
    base = results[0]["prune_seconds"] / results[0]["episodes"]
    print(
        f"\n{'episodes':>10} {'tenants':>7} {'weeks':>5} {'wall s':>8} {'batches':>8} "
        f"{'rows/s':>9} {'objects':>8} {'MB':>7} {'ops':>7} {'s/row vs first':>14} {'ok':>3}"
    )
    for r in results:
        r["per_row_vs_first"] = round((r["prune_seconds"] / r["episodes"]) / base, 3)
        print(
            f"{r['episodes']:>10,} {r['tenants']:>7} {r['weeks']:>5} {r['prune_seconds']:>8.2f} "
            f"{r['batches']:>8,} {r['rows_per_second']:>9,} {r['archive_objects']:>8,} "
            f"{r['archive_bytes'] / 1e6:>7.1f} {r['d1_statements']:>7,} "
            f"{r['per_row_vs_first']:>14.3f} {'yes' if r['verified'] else 'NO':>3}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["verified"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
