"""Export and import throughput at 100K facts, and the change feed's delivery latency and retries,
in the local runtime.

    uv run python benchmarks/portability.py [--facts 100000] [--seed-facts 1000]
                                            [--changes 200] [--json out.json]

Not timed: a fresh state folder, `--seed-facts` facts learned through the semantic tier
(hashing embedder) on the primary shard, then copied by SQL into `--facts` distinct rows (new
ids and contents, each with its learned row's key, keyword entry and history fields). Timed:

* **export**: one job through `Exporter` (every table in key order, gzip parts of 5,000
  records written to the on-disk R2), to the end;
* **import**: that export's lines into another tenant on the other shard through `Importer`
  (every line checked first, then chunks of 500 through the write gate: policy, sealing,
  inserts, vectors for every active fact with the hashing embedder, activation);
* **feed latency**: `--changes` facts learned one at a time, each change published after its
  response, consumed from the local durable queue (fan-out, then a signed POST to a loopback
  receiver) by a loop like the dev server's; the time from the write's answer to the receiver;
* **retries** (a clock the script moves): a receiver failing its first 3 attempts, and one
  that always fails: when each attempt happens, and where the message ends.

A measurement script, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from agent_memory.directory import place_tenant  # noqa: E402
from agent_memory.governance.feed import DEAD_LETTER_QUEUE, FEED_QUEUE  # noqa: E402
from agent_memory.ids import content_hash, new_ulid  # noqa: E402
from agent_memory.lifecycle import portability  # noqa: E402
from agent_memory.memory import Memory  # noqa: E402
from agent_memory.tiers.semantic.models import FactInput  # noqa: E402
from agent_memory.tiers.semantic.writes import STORED_HASH_CHARS  # noqa: E402
from bindings.ports.clock import FixedClock  # noqa: E402
from http_messages import Headers, HttpRequest  # noqa: E402
from local_runtime.access_dev import mint_token  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402
from local_runtime.server import serving_in_thread  # noqa: E402
from tests.fakes.embedder import HashingEmbedder  # noqa: E402
from worker.app import handle  # noqa: E402

WORDS = ["tea", "boat", "Paris", "Berlin", "invoice", "May", "coffee", "window", "seat", "jazz",
         "map", "kite"]  # fmt: skip


async def seed(rt: LocalRuntime, facts: int, learned: int) -> None:
    memory = await Memory.open(rt.bindings(), "src")
    inputs = [
        FactInput(
            content=f"{WORDS[i % 12]} note {i} about {WORDS[(i * 7) % 12]}",
            subject=f"person:{i % 97}",
            valid_from=1.7e9 + i,
        )
        for i in range(learned)
    ]
    for start in range(0, learned, 500):
        await memory.semantic().learn_many(inputs[start : start + 500])
    db = sqlite3.connect(rt.state.d1_of("primary"))
    columns = [r[1] for r in db.execute("PRAGMA table_info(semantic_facts)") if r[1] != "fts_rowid"]
    template = [
        dict(zip(columns, row, strict=True))
        for row in db.execute(
            f"SELECT {', '.join(columns)} FROM semantic_facts WHERE tenant_id = 'src'"
        )
    ]
    copies = []
    for n in range(facts - len(template)):
        row = dict(template[n % len(template)])
        row["content"] = f"{row['content']} copy {n}"
        row["fact_id"] = new_ulid(1.7e9 + n / 1000)
        row["content_hash"] = content_hash(row["content"])[:STORED_HASH_CHARS]
        copies.append(tuple(row[c] for c in columns))
    marks = ", ".join("?" for _ in columns)
    db.executemany(f"INSERT INTO semantic_facts ({', '.join(columns)}) VALUES ({marks})", copies)
    db.commit()
    db.close()


async def throughput(rt: LocalRuntime) -> dict[str, Any]:
    exporter = (await Memory.open(rt.bindings(), "src")).exporter()
    started = time.perf_counter()
    job = await exporter.start("bench", "sealed")
    job = await exporter.advance(job.job_id, max_seconds=10.0**9)
    export_s = time.perf_counter() - started
    lines: list[bytes] = []
    for part in range(job.progress["part"]):
        lines += gzip.decompress(await exporter.part(job.job_id, part)).splitlines()
    importer = (await Memory.open(rt.bindings(), "dst")).importer()
    started = time.perf_counter()
    report = await importer.run(lambda: lines, by="bench")
    await rt.background.drain()
    import_s = time.perf_counter() - started
    records = job.progress["records"]
    assert report.refused == {} and sum(report.written.values()) == records, report
    return {
        "records": records,
        "facts": job.progress["counts"].get("fact", 0),
        "export_seconds": round(export_s, 2),
        "export_records_per_s": round(records / export_s),
        "export_parts": job.progress["part"],
        "export_mb": round(job.progress["bytes"] / 1e6, 1),
        "import_seconds": round(import_s, 2),
        "import_records_per_s": round(records / import_s),
    }


class Receiver:
    def __init__(self, fail_first: int = 0, expected: int = 0) -> None:
        self.arrived: dict[str, float] = {}
        self.all_in = threading.Event()  # set once `expected` changes arrived
        self.expected = expected
        self.fail_first = fail_first
        self.attempts = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.attempts += 1
        fact = json.loads(body)["data"].get("id", "")
        status = 500 if self.attempts <= self.fail_first else 200
        if status == 200:
            self.arrived.setdefault(fact, time.perf_counter())
            if len(self.arrived) >= self.expected:
                self.all_in.set()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def register(rt: LocalRuntime, url: str) -> None:
    token = mint_token(rt.state.access, "operator@localhost", now=rt.clock.now())
    headers = Headers({"cf-access-jwt-assertion": token, "content-type": "application/json"})
    body = json.dumps({"url": url}).encode()
    request = HttpRequest("POST", "http://127.0.0.1/admin/tenants/feed/webhooks", headers, body)
    assert (await handle(request, rt.bindings())).status == 201


async def latency(rt: LocalRuntime, changes: int) -> dict[str, Any]:
    receiver = Receiver(expected=changes)
    with serving_in_thread(receiver, lifespan="off") as base:
        await register(rt, base + "/hook")
        stop = asyncio.Event()

        async def consumer_loop() -> None:  # the dev server's loop, without its 1 s pause
            while not stop.is_set():
                if not await rt.deliver_queues():
                    await asyncio.sleep(0.001)

        loop = asyncio.create_task(consumer_loop())
        answered: dict[str, float] = {}
        memory = await Memory.open(rt.bindings(), "feed")
        for i in range(changes):
            learned = await memory.semantic().learn(FactInput(content=f"change {i}", subject="x"))
            answered[learned.fact_id] = time.perf_counter()
            await asyncio.sleep(0.005)  # writes arriving over time, not in one burst
        await asyncio.to_thread(receiver.all_in.wait, 60)
        stop.set()
        await loop
    waits = sorted((receiver.arrived[f] - t) * 1000 for f, t in answered.items())
    return {
        "changes": changes,
        "delivered": len(receiver.arrived),
        "latency_ms_p50": round(statistics.median(waits), 1),
        "latency_ms_p95": round(waits[int(len(waits) * 0.95) - 1], 1),
        "latency_ms_max": round(waits[-1], 1),
    }


async def retries(state: Path) -> dict[str, Any]:
    clock = FixedClock(1_750_000_000.0)
    out: dict[str, Any] = {}
    for name, fail_first in (("fails_3_times", 3), ("always_fails", 10**9)):
        rt = LocalRuntime.open(state / name, embedder=HashingEmbedder(), clock=clock)
        await rt.migrate()
        receiver = Receiver(fail_first)
        with serving_in_thread(receiver, lifespan="off") as base:
            await register(rt, base + "/hook")
            memory = await Memory.open(rt.bindings(), "feed")
            await memory.semantic().learn(FactInput(content="one change", subject="x"))
            await rt.background.drain()
            start, times = clock.now(), []
            while rt.queues.pending(FEED_QUEUE) or rt.queues.pending(DEAD_LETTER_QUEUE):
                before = receiver.attempts
                await rt.deliver_queues()
                if receiver.attempts > before:
                    times.append(int(clock.now() - start))
                clock.advance(5)
        deliveries = await memory.bindings.db.prepare(  # type: ignore[union-attr]
            "SELECT status, attempts FROM feed_deliveries"
        ).all()
        [row] = deliveries.results
        out[name] = {"attempt_seconds": times, "ended": row["status"], "attempts": row["attempts"]}
        await rt.close()
    return out


async def main(facts: int, learned: int, changes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        rt = LocalRuntime.open(Path(tmp) / "state", embedder=HashingEmbedder())
        await rt.migrate()
        await place_tenant(rt.bindings(), "src", "primary")
        await place_tenant(rt.bindings(), "dst", "s2")
        await seed(rt, facts, min(learned, facts))
        result = {"throughput": await throughput(rt)}
        print(json.dumps(result["throughput"]), flush=True)
        result["feed"] = await latency(rt, changes)
        print(json.dumps(result["feed"]), flush=True)
        await rt.close()
        result["retries"] = await retries(Path(tmp))
        print(json.dumps(result["retries"]), flush=True)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--seed-facts", type=int, default=1_000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    found = asyncio.run(main(args.facts, args.seed_facts, args.changes))
    if args.json:
        args.json.write_text(json.dumps(found, indent=2))
    assert portability.VERSION == 1
