"""What the subject erase's FTS5 merge costs, and that it removes the erased facts' tokens.

    uv run python benchmarks/erase_fts.py [--sizes 10000,100000,250000] [--tenants 100]
                                          [--erase-facts 20] [--json out.json]

For each size, in a fresh state folder (not timed): migrations, then `size` semantic facts
spread over `--tenants` tenants, written straight into the local D1 file with `executemany`,
50 rows per transaction like the write path's batches (the FTS5 triggers index every row, as
on D1, so the index has the segments real traffic leaves); the erased subject's
`--erase-facts` facts each carry a unique marker token. Then, through the D1 port
(`SqliteD1`, with D1's limits):

1. the subject's facts are deleted (the trigger deletes their FTS rows) and the WAL is
   checkpointed: the raw database file is searched for the marker (FTS5 keeps a deleted
   document's tokens in its old segments until they are merged);
2. timed: `INSERT INTO semantic_facts_fts (semantic_facts_fts) VALUES ('optimize')`, the
   statement the erase runs (`lifecycle._erase_rows`), then a checkpoint; the file is
   searched again.

Printed per size: FTS rows, database MB, marker hits before and after, optimize seconds.
A measurement script, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from agent_memory.ids import content_hash, new_ulid  # noqa: E402
from local_runtime.adapters.d1 import SqliteD1  # noqa: E402
from local_runtime.migrations import apply_migrations  # noqa: E402
from local_runtime.runtime import MIGRATIONS_DIR  # noqa: E402

_TEXT = (
    "prefers email calls meeting quarterly budget renewal contract pricing discount demo "
    "onboarding support ticket integration webhook invoice travel conference roadmap launch "
    "feedback survey churn upsell champion procurement security review legal signature"
)
WORDS = _TEXT.split()
MARKER = "zqxmarker"


def seed(path: Path, size: int, tenants: int, erase_facts: int) -> None:
    """`size` facts; the first `erase_facts` belong to subject `contact:erased` of tenant
    t0 and carry the marker token."""
    rng = random.Random(7)
    conn = sqlite3.connect(path)
    rows: list[tuple[Any, ...]] = []
    for index in range(size):
        tenant = f"t{index % tenants}"
        if index < erase_facts:
            tenant, subject = "t0", "contact:erased"
            content = f"{MARKER}{index} " + " ".join(rng.choices(WORDS, k=14))
        else:
            subject = f"contact:{index % 5000}"
            content = " ".join(rng.choices(WORDS, k=16))
        now = 1_750_000_000_000 + index
        rows.append(
            (tenant, new_ulid(now / 1000), "assistant", subject, "states", "", content, "{}",
             0.8, "learn", "local", "minilm", 384, content_hash(content), "active", now, now,
             now)
        )  # fmt: skip
    # Committed 50 rows at a time, as the write path commits them: the FTS5 index then has
    # the many segments (automerged) it has after real traffic, not one built in bulk.
    for start in range(0, len(rows), 50):
        conn.executemany(
            "INSERT INTO semantic_facts (tenant_id, fact_id, agent_type, subject, predicate, "
            "object, content, metadata, confidence, source, embedding_provider, embedding_model, "
            "embedding_dimensions, content_hash, status, valid_from, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows[start : start + 50],
        )
        conn.commit()
    conn.close()


def hits(path: Path) -> int:
    """Occurrences of the marker in the database file and its WAL (FTS5 stores a term in
    full where a leaf page starts and prefix-compressed after, so the shared prefix counts)."""
    raw = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        raw += wal.read_bytes()
    return raw.count(MARKER.encode())


async def measure(size: int, tenants: int, erase_facts: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="erase-fts-") as folder:
        path = Path(folder) / "d1.sqlite"
        db = SqliteD1(path)
        await apply_migrations(db, MIGRATIONS_DIR)
        db.close()
        seed(path, size, tenants, erase_facts)
        db = SqliteD1(path)
        fts_rows = await db.prepare("SELECT COUNT(*) AS n FROM semantic_facts_fts").first_value("n")
        await (
            db.prepare("DELETE FROM semantic_facts WHERE tenant_id = ? AND subject = ?")
            .bind("t0", "contact:erased")
            .run()
        )
        db.checkpoint()
        before = hits(path)
        started = time.perf_counter()
        await db.prepare(
            "INSERT INTO semantic_facts_fts (semantic_facts_fts) VALUES ('optimize')"
        ).run()
        seconds = time.perf_counter() - started
        db.checkpoint()
        after = hits(path)
        megabytes = path.stat().st_size / 1e6
        db.close()
    return {
        "facts": size,
        "fts_rows": fts_rows,
        "db_mb": round(megabytes, 1),
        "marker_hits_before_optimize": before,
        "marker_hits_after_optimize": after,
        "optimize_seconds": round(seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,250000")
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--erase-facts", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    print(f"sqlite {sqlite3.sqlite_version}")
    print("| facts | FTS rows | D1 MB | marker in file before | after | optimize s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        r = asyncio.run(measure(size, args.tenants, args.erase_facts))
        results.append(r)
        print(
            f"| {r['facts']:,} | {r['fts_rows']:,} | {r['db_mb']} | "
            f"{r['marker_hits_before_optimize']} | {r['marker_hits_after_optimize']} | "
            f"{r['optimize_seconds']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
