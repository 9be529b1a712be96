"""How long moving a tenant between shards takes, and how long its writes are refused.

    uv run python benchmarks/tenant_move.py [--facts 10000] [--episodes 10000] [--step-calls 1]
        [--racing-writes 0]

In a fresh local runtime (two shards, the tests' hashing embedder: vectors are copied, not
recomputed), one tenant gets `--facts` facts and `--episodes` episodes on the primary, then
moves to `s2` with a step budget of `--step-calls` metered calls (default 1: one chunk a
step, so each phase is timed alone; production steps take 400, `MoveBudget`) and no grace
wait (the clock is moved past it). `largest step` is the most D1 calls one step made
(progress saves and the lease included): a Worker invocation allows 1,000. `--racing-writes`
facts are learned after every copying step (their calls not counted): what the fenced step
replays from the change log for a tenant over `FULL_VERIFY_ROWS` rows. Printed per
phase: steps, wall seconds and rows written; `refused_s` is the fenced phase — the only
time the tenant's writes get 503 `tenant_moving`. Local SQLite has no network: on D1 each
call is a round trip, so the figures that carry over are the calls per phase (`calls`),
printed beside the seconds.
The last line is the report as JSON. A measurement script, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(HERE / "src"), str(HERE)]

from agent_memory.ids import new_ulid  # noqa: E402
from agent_memory.lifecycle.move import GRACE_SECONDS, MoveBudget, advance, start_move  # noqa: E402
from agent_memory.memory import Memory  # noqa: E402
from agent_memory.tiers.episodic import Episode  # noqa: E402
from bindings.ports.clock import FixedClock  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402
from tests.fakes.embedder import HashingEmbedder  # noqa: E402

TENANT = "moving-tenant"
RTT_MS = 5  # a D1 round trip from a Worker near its database (an assumption, printed)


async def seed(runtime: LocalRuntime, facts: int, episodes: int) -> None:
    memory = await Memory.open(runtime.bindings(), TENANT)
    semantic = memory.semantic()
    for start in range(0, facts, 500):
        batch = range(start, min(facts, start + 500))
        await semantic.learn_many([{"content": f"fact {n}: the lantern festival"} for n in batch])
    store = memory.episodic
    now_ms = int(runtime.clock.now() * 1000)
    run = new_ulid(now_ms / 1000)
    await store.start_run(
        run_id=run,
        agent_type="assistant",
        instance_id="default",
        input={"text": "seed"},
        started_at=now_ms,
    )
    for n in range(episodes):
        await store.append_episode(
            Episode(
                episode_id=new_ulid(now_ms / 1000 + n / 1000),
                run_id=run,
                agent_type="assistant",
                instance_id="default",
                kind="observation",
                content=f"episode {n} about the move",
                created_at=now_ms,
            )
        )


async def main(
    facts: int, episodes: int, step_calls: int = 1, racing_writes: int = 0
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        clock = FixedClock(time.time())
        runtime = LocalRuntime.open(Path(folder) / "state", embedder=HashingEmbedder(), clock=clock)
        await runtime.migrate()
        started = time.perf_counter()
        await seed(runtime, facts, episodes)
        print(
            f"seeded {facts} facts and {episodes} episodes in {time.perf_counter() - started:.1f} s"
        )
        calls = {"n": 0, "paused": 0}
        for shard in runtime.shards:
            db = runtime.shard_db(shard.name)
            run = db._execute

            def counted(statements: Any, run: Any = run, **kwargs: Any) -> Any:
                calls["n"] += 0 if calls["paused"] else 1
                return run(statements, **kwargs)

            db._execute = counted  # type: ignore[method-assign]
        await start_move(runtime.bindings(), TENANT, "s2")
        phases: dict[str, dict[str, Any]] = {}
        phase = "copying"
        mark, mark_calls = time.perf_counter(), calls["n"]
        largest = 0
        while True:
            before = calls["n"]
            status = await advance(runtime.bindings(), TENANT, MoveBudget(max_calls=step_calls))
            largest = max(largest, calls["n"] - before)
            entry = phases.setdefault(phase, {"steps": 0})
            entry["steps"] += 1
            if status.phase != phase:
                entry["wall_s"] = round(time.perf_counter() - mark, 3)
                entry["calls"] = calls["n"] - mark_calls
                mark, mark_calls, phase = time.perf_counter(), calls["n"], status.phase
            if status.phase == "copying" and racing_writes:
                calls["paused"] = 1
                memory = await Memory.open(runtime.bindings(), TENANT)
                await memory.semantic().learn_many(
                    [
                        {"content": f"racing write {entry['steps']}.{n}"}
                        for n in range(racing_writes)
                    ]
                )
                calls["paused"] = 0
            if status.phase == "switched":
                clock.advance(GRACE_SECONDS + 1)
            if status.phase == "done":
                break
        await runtime.close()
    report = {
        "facts": facts,
        "episodes": episodes,
        "phases": phases,
        "refused_s": phases.get("fenced", {}).get("wall_s"),
        "step_calls": step_calls,
        "largest_step_d1_calls": largest,
        "racing_writes": racing_writes,
    }
    for name, entry in phases.items():
        at_rtt = entry.get("calls", 0) * RTT_MS / 1000 + entry.get("wall_s", 0)
        print(
            f"{name:<9} steps {entry['steps']:>5}  calls {entry.get('calls', 0):>6}  "
            f"wall {entry.get('wall_s', 0):>7.2f} s  (+{RTT_MS} ms a call: {at_rtt:>7.1f} s)"
        )
    fenced = phases.get("fenced", {})
    report["refused_at_rtt_s"] = round(
        fenced.get("calls", 0) * RTT_MS / 1000 + fenced.get("wall_s", 0), 2
    )
    print(
        f"writes refused (fenced phase): {report['refused_s']} s here, "
        f"~{report['refused_at_rtt_s']} s at {RTT_MS} ms per D1 call"
    )
    print(f"largest step: {largest} D1 calls (step budget {step_calls} metered calls)")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--step-calls", type=int, default=1)
    parser.add_argument("--racing-writes", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(main(args.facts, args.episodes, args.step_calls, args.racing_writes))
