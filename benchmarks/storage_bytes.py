"""D1 bytes per memory: per fact, per episode, per event, and the tenants one database holds.

    uv run python benchmarks/storage_bytes.py [--facts 100000] [--episodes 20000]
        [--recalls 2000] [--session-size 0] [--tenant acme] [--embedding-names hashing]
        [--compare /work/main] [--root DIR]

In a fresh local runtime (the same SQLite schema and migrations D1 runs), three phases
through the real write paths, with the tests' hashing embedder (vectors live in Vectorize,
not D1, so the model does not matter here):

1. facts: `SemanticMemory.learn_many` of `--facts` short facts (about 95 bytes of text each,
   `--session-size` facts per session, 0 = none), in one tenant: the row (since migration
   0019 also its `memory_written` event), its keyword postings and its term statistics;
2. episodes: `EpisodicStore.start_run` + `append_episode` (same kind of text, one run per 20
   episodes): the row (its own event since 0019) and the run;
3. recalls: `SemanticMemory.recall(query, top_k=5)` `--recalls` times: the
   `memory_retrieved` events (and the recall statistics of the facts).

After each phase every table and index is measured with SQLite's `dbstat` virtual table
(bytes of the pages each occupies, free space in them included: what the database file
holds), or, when this sqlite3 build lacks it, with a copy of the database per object
dropped (the page-count difference). The difference per phase divided by what the phase
wrote gives the bytes per fact, episode and event; the tenants one D1 database (10 GB, a
limit that cannot be raised) holds follow for a tenant at ADR-043's episodic cap (100K
episodes) with the facts of `--tenant-facts` (semantic memory has no cap: ADR-043 keeps it
"until explicitly deleted", ADR-0030 "v1 has no enforced quota").

Every fact row names the model that embedded it (`embedding_provider`, `embedding_model`): the
hashing embedder's names are short (`test`, `hashing-bow`); `--embedding-names workers-ai`
measures the same rows under the names a deployment on Workers AI stores (`workers-ai`,
`@cf/baai/bge-small-en-v1.5#pooling=cls`, 34 characters more a fact).

`--compare DIR` runs the same measurement on another checkout (its `src`, `local_runtime`
and `migrations`, e.g. `/work/main` before a change) and prints both side by side.
The last line is the report as JSON. A measurement script, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def _root_from_argv() -> Path:
    """The checkout whose code and migrations are measured (`--root`, default this one)."""
    if "--root" in sys.argv:
        return Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
    return HERE


ROOT = _root_from_argv()
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from agent_memory.governance.writes import EventLog, WriteGate  # noqa: E402
from agent_memory.ids import new_ulid  # noqa: E402
from agent_memory.memory import Memory  # noqa: E402
from agent_memory.tiers.episodic import Episode, EpisodicStore  # noqa: E402
from agent_memory.tiers.semantic.models import FactInput  # noqa: E402
from bindings.ports.embedder import EmbeddingConfig  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402
from tests.fakes.embedder import HashingEmbedder  # noqa: E402

TENANT = "acme"  # `--tenant`: every row, posting and index entry holds the tenant id
D1_LIMIT_BYTES = 10 * 1000**3  # 10 GB per D1 database (Cloudflare's limit)
EPISODE_CAP = 100_000  # ADR-043: hard limit of episodes per tenant
VECTORIZE_LIMIT = 10_000_000  # vectors per Vectorize index
NAMES = ["Dana", "Lee", "Sam", "Priya", "Jonas", "Mei", "Omar", "Lucia", "Ken", "Ava"]
ROLES = ["VP Sales", "CFO", "Head of Operations", "CTO", "Procurement Lead", "IT Director"]
COMPANIES = ["Acme Freight", "Globex Retail", "Initech", "Umbrella Health", "Hooli Cloud"]
VERBS = ["asked about", "prefers", "objected to", "requested", "complained about", "praised"]
THINGS = [
    "the annual contract discount",
    "a security questionnaire",
    "the one-page ROI calculator",
    "the integration with Salesforce",
    "a pilot with ten seats",
    "the data residency terms",
    "short messages on Tuesday mornings",
]
WHEN = ["on Monday", "by email", "in the demo", "at the workshop"]


# The names a Workers AI deployment's fact rows hold (`bindings.cloudflare.ai`: the model and
# its pooling), for `--embedding-names workers-ai`.
WORKERS_AI_NAMES = EmbeddingConfig("workers-ai", "@cf/baai/bge-small-en-v1.5#pooling=cls", 384)


class NamedHashingEmbedder(HashingEmbedder):
    """The hashing embedder under another model's names: only the names reach D1's rows."""

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config.dimensions)
        self._config = config


def sentence(i: int) -> str:
    """A short memory (~95 bytes), deterministic in `i`, with a rare word (the case)."""
    return (
        f"{NAMES[i % 10]} ({ROLES[i // 10 % 6]} at {COMPANIES[i // 60 % 5]}) "
        f"{VERBS[i // 7 % 6]} {THINGS[i // 3 % 7]} {WHEN[i // 11 % 4]} (case {i})"
    )


def measure(path: Path) -> dict[str, int]:
    """Bytes per table and index of the SQLite file at `path` (`dbstat`, else per-object
    copies), plus `(file)`, the whole file."""
    con = sqlite3.connect(path)
    try:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        try:
            rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
            sizes = {str(name): int(size) for name, size in rows}
        except sqlite3.OperationalError:  # built without SQLITE_ENABLE_DBSTAT_VTAB
            sizes = _sizes_by_copies(con)
    finally:
        con.close()
    sizes["(file)"] = page_size * pages
    return sizes


def _sizes_by_copies(con: sqlite3.Connection) -> dict[str, int]:
    """Each object's pages: a vacuumed copy without it has that many fewer. A table's
    figure excludes its named indexes (measured on their own) but includes its PRIMARY KEY
    and UNIQUE indexes, which cannot be dropped alone; a vacuumed copy packs its pages
    fuller than a live file (dbstat's figures are the live ones)."""
    objects = con.execute(
        "SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index') "
        "AND rootpage > 0"
    ).fetchall()
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    with tempfile.TemporaryDirectory() as folder:
        whole = Path(folder) / "whole.sqlite"
        con.execute("VACUUM INTO ?", (str(whole),))
        base = sqlite3.connect(whole).execute("PRAGMA page_count").fetchone()[0]
        sizes: dict[str, int] = {}
        for kind, name, _table in objects:
            copy = Path(folder) / "copy.sqlite"
            shutil.copy(whole, copy)
            other = sqlite3.connect(copy)
            try:
                other.execute(f'DROP {kind.upper()} "{name}"')
                other.commit()
                other.execute("VACUUM")
                sizes[name] = (base - other.execute("PRAGMA page_count").fetchone()[0]) * page_size
            except sqlite3.Error:
                pass  # an automatic index: counted with its table
            finally:
                other.close()
                copy.unlink()
        for kind, name, table in objects:
            if kind == "index" and table in sizes and name in sizes:
                sizes[table] -= sizes[name]
    return sizes


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {
        name: after.get(name, 0) - before.get(name, 0)
        for name in sorted(set(after) | set(before))
        if after.get(name, 0) != before.get(name, 0)
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """The three phases on the local runtime's primary database."""
    folder = Path(tempfile.mkdtemp(prefix="storage-bytes-"))
    embedder = (
        NamedHashingEmbedder(WORKERS_AI_NAMES)
        if args.embedding_names == "workers-ai"
        else HashingEmbedder()
    )
    runtime = LocalRuntime.open(folder, embedder=embedder)
    try:
        await runtime.migrate()
        db, db_path = runtime.shard_db("primary"), runtime.state.d1_of("primary")
        phases: dict[str, dict[str, int]] = {}
        written: dict[str, dict[str, float]] = {}
        before = measure(db_path)

        bindings = replace(runtime.bindings(), db=db, vectors=runtime.shard_vectors("primary"))
        memory = (await Memory.open(bindings, args.tenant)).semantic(agent_type="bench")
        texts = [sentence(i) for i in range(args.facts)]
        started = time.perf_counter()
        for start in range(0, args.facts, 500):
            await memory.learn_many(
                [
                    FactInput(
                        content=texts[i],
                        subject=f"contact:{i // 20}",
                        predicate="noted",
                        confidence=0.8,
                        source="bench",
                        session=f"s{i // args.session_size}" if args.session_size else None,
                    )
                    for i in range(start, min(start + 500, args.facts))
                ]
            )
            await runtime.background.drain()
        learn_s = time.perf_counter() - started
        after = measure(db_path)
        phases["facts"], before = delta(after, before), after
        written["facts"] = {
            "n": args.facts,
            "text_bytes": sum(len(t.encode()) for t in texts) / max(args.facts, 1),
        }

        events = EventLog(args.tenant, db)
        store = EpisodicStore(db, args.tenant, gate=WriteGate(args.tenant, events=events))
        now_ms = int(time.time() * 1000)
        run_id = ""
        episode_texts = [sentence(i + 7) for i in range(args.episodes)]
        for i, content in enumerate(episode_texts):
            if i % 20 == 0:
                run_id = new_ulid(now_ms / 1000)
                await store.start_run(
                    run_id=run_id,
                    agent_type="bench",
                    instance_id="bench-1",
                    input={"input": "a task"},
                    started_at=now_ms,
                )
            await store.append_episode(
                Episode(
                    episode_id=new_ulid(now_ms / 1000 + i / 1000),
                    run_id=run_id,
                    agent_type="bench",
                    instance_id="bench-1",
                    kind="observation",
                    content=content,
                    created_at=now_ms + i,
                )
            )
        after = measure(db_path)
        phases["episodes"], before = delta(after, before), after
        written["episodes"] = {
            "n": args.episodes,
            "text_bytes": sum(len(t.encode()) for t in episode_texts) / max(args.episodes, 1),
        }

        for i in range(args.recalls if args.facts else 0):
            await memory.recall(f"what did {NAMES[i % 10]} ask about {THINGS[i % 7]}?", 5)
            await runtime.background.drain()
        after = measure(db_path)
        phases["recalls"] = delta(after, before)
        written["recalls"] = {"n": args.recalls if args.facts else 0, "text_bytes": 0.0}
        return {"phases": phases, "written": written, "learn_seconds": round(learn_s, 1)}
    finally:
        await runtime.close()
        shutil.rmtree(folder, ignore_errors=True)


def per_item(result: dict[str, Any]) -> dict[str, Any]:
    """Bytes per fact / episode / event, by object and in all (`(file)` growth and the sum
    of the objects, which leaves out free pages)."""
    out: dict[str, Any] = {}
    for phase, sizes in result["phases"].items():
        n = result["written"][phase]["n"]
        if not n:
            continue
        objects = {k: v for k, v in sizes.items() if k != "(file)"}
        out[phase] = {
            "n": n,
            "text_bytes": round(result["written"][phase]["text_bytes"], 1),
            "bytes_each": round(sum(objects.values()) / n, 1),
            "file_bytes_each": round(sizes.get("(file)", 0) / n, 1),
            "by_object": {k: round(v / n, 1) for k, v in sorted(objects.items()) if v},
        }
    return out


def capacity(items: dict[str, Any], tenant_facts: list[int]) -> list[dict[str, Any]]:
    """Tenants per 10 GB database: a tenant at the episodic cap (each episode with its
    event) plus `tenant_facts` facts (each with its postings and event)."""
    fact = items.get("facts", {}).get("bytes_each", 0.0)
    episode = items.get("episodes", {}).get("bytes_each", 0.0)
    rows = []
    for facts in tenant_facts:
        for episodes in (0, EPISODE_CAP):
            tenant = facts * fact + episodes * episode
            if tenant <= 0:
                continue
            rows.append(
                {
                    "facts": facts,
                    "episodes": episodes,
                    "tenant_mb": round(tenant / 1e6, 1),
                    "tenants_per_db": int(D1_LIMIT_BYTES // tenant),
                    "tenants_per_vector_index": VECTORIZE_LIMIT // facts if facts else None,
                }
            )
    return rows


def show(label: str, items: dict[str, Any]) -> None:
    print(f"\n{label}")
    for phase, row in items.items():
        what = {"facts": "fact", "episodes": "episode", "recalls": "memory_retrieved event"}
        print(
            f"  per {what[phase]:<23} {row['bytes_each']:>8.1f} bytes "
            f"(file growth {row['file_bytes_each']:.1f}; text {row['text_bytes']:.1f}) "
            f"over n={row['n']}"
        )
        for name, size in sorted(row["by_object"].items(), key=lambda kv: -kv[1]):
            print(f"      {name:<40} {size:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--recalls", type=int, default=2_000)
    parser.add_argument("--session-size", type=int, default=0, help="facts per session")
    parser.add_argument("--tenant", default=TENANT, help="the tenant id (its length counts)")
    parser.add_argument(
        "--tenant-facts",
        default="10000,100000",
        help="facts per tenant in the capacity table (comma-separated)",
    )
    parser.add_argument(
        "--embedding-names",
        choices=["hashing", "workers-ai"],
        default="hashing",
        help="the model names fact rows hold (workers-ai: as a Cloudflare deployment's)",
    )
    parser.add_argument("--root", help="checkout to measure (default: this one)")
    parser.add_argument("--compare", help="another checkout to measure side by side")
    args = parser.parse_args()
    tenant_facts = [int(n) for n in args.tenant_facts.split(",") if n]

    items = per_item(asyncio.run(run(args)))
    report: dict[str, Any] = {
        "root": str(ROOT),
        "per_item": items,
        "capacity": capacity(items, tenant_facts),
    }
    if args.compare:
        argv = [a for a in sys.argv[1:] if a not in {"--compare", args.compare}]
        done = subprocess.run(
            [sys.executable, __file__, *argv, "--root", args.compare],
            capture_output=True,
            text=True,
            check=True,
        )
        other = json.loads(done.stdout.strip().splitlines()[-1])
        report["compare"] = other
        show(f"{args.compare}:", other["per_item"])
    show(f"{ROOT}:", items)
    print("\ntenants per 10 GB D1 database (and per 10M-vector index):")
    print_capacity(report["capacity"], report.get("compare", {}).get("capacity", []))
    print(json.dumps(report))


def print_capacity(rows: list[dict[str, Any]], others: list[dict[str, Any]]) -> None:
    for pos, row in enumerate(rows):
        was = f" (was {others[pos]['tenants_per_db']:>7,})" if pos < len(others) else ""
        vectors = row["tenants_per_vector_index"]
        print(
            f"  {row['facts']:>7,} facts + {row['episodes']:>7,} episodes: "
            f"{row['tenant_mb']:>8.1f} MB/tenant, {row['tenants_per_db']:>7,} per database{was}"
            + (f", {vectors:,} per index" if vectors else "")
        )


if __name__ == "__main__":
    main()
