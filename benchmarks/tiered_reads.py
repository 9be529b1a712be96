"""Reads through the hot/warm/cold MemoryClient in the local runtime, per tier.

    uv run python benchmarks/tiered_reads.py [--episodes 300]

In a fresh state folder on a clock the script moves: `--episodes` episodes of one agent are
written through the client (to D1), then each is read three times — from warm (the read
promotes it to KV), from hot, and, after the clock moves 100 days and the weekly prune has
archived them, from cold (one new client per read, so each pays its index lookup and
archive object fetch; a listing shares the client and fetches each object once). Prints the
median and p95 per tier in milliseconds. A measurement script, not a test: the local stores
are SQLite files and a directory, so the numbers show the relative cost of the paths, not
Cloudflare's latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from agent_memory.hot_warm_cold import (  # noqa: E402
    ArchiveColdMemory,
    D1WarmMemory,
    KVHotMemory,
    MemoryBuilder,
    MemoryClient,
    item_text,
)
from agent_memory.ids import new_ulid  # noqa: E402
from agent_memory.lifecycle.prune import Pruner  # noqa: E402
from agent_memory.namespace import ItemKey  # noqa: E402
from agent_memory.tiers.episodic import Episode  # noqa: E402
from bindings.ports.clock import FixedClock  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402


def client(rt: LocalRuntime) -> MemoryClient:
    return (
        MemoryBuilder()
        .with_hot(KVHotMemory(rt.kv))
        .with_warm(D1WarmMemory(rt.db))
        .with_cold(ArchiveColdMemory(rt.db, rt.cold, rt.clock))
        .for_tenant("acme")
        .build()
    )


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"{name:<5} median {statistics.median(ms):6.3f} ms   p95 {p95:6.3f} ms   n={len(ms)}"


async def main(episodes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FixedClock(1_750_000_000.0)
        rt = LocalRuntime.open(Path(tmp) / "state", clock=clock)
        await rt.migrate()
        keys = []
        for i in range(episodes):
            episode = Episode(
                episode_id=new_ulid(clock.now() + i),
                run_id=new_ulid(clock.now()),
                agent_type="assistant",
                instance_id="agent-7",
                kind="message",
                subject=f"contact:{i % 10}",
                content=f"turn {i} of a conversation " + "x" * 200,
                created_at=int((clock.now() + i) * 1000),
            )
            key = ItemKey.build("acme", "agent-7", "episode", episode.episode_id).key
            await client(rt).set(key, item_text({**episode.model_dump(), "tenant_id": "acme"}))
            keys.append(key)
        times: dict[str, list[float]] = {"warm": [], "hot": [], "cold": []}
        for tier in ("warm", "hot"):
            memory = client(rt)
            for key in keys:
                started = time.perf_counter()
                found = await memory.get(key)
                times[tier].append(time.perf_counter() - started)
                assert found is not None and found.tier == tier
        clock.advance(100 * 86_400)
        now_ms = int(clock.now() * 1000)
        await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("bench", now_ms)
        for key in keys:
            started = time.perf_counter()
            found = await client(rt).get(key)
            times["cold"].append(time.perf_counter() - started)
            assert found is not None and found.tier == "cold"
        await rt.close()
    for tier in ("hot", "warm", "cold"):
        print(summary(tier, times[tier]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    asyncio.run(main(parser.parse_args().episodes))
