"""Sequential round trips per memory operation: what each one costs once bindings are remote.

On Cloudflare every binding call (D1, KV, Vectorize, R2, Workers AI, a Durable Object RPC,
the LLM) crosses the network; the local runtime answers in microseconds and hides it. This
script runs the local runtime in-process with a delay injected before every binding call
(each kind counted apart) and sends, through the same `worker.app.handle` the Worker entry
calls, each user-facing memory operation: MCP `recall_memory` and `store_memory`, the memory
API's semantic search, all-tier search, semantic and working writes, one agent turn (a model
that answers at once: the turn's own memory work), the inspector's fact list and the admin
run listing.

Per operation it prints:

* **rt**: sequential round trips on the response path, not counting the LLM and the DO RPC
  — the longest chain of delayed calls that ran one after the other (calls that overlap ran
  concurrently), the fewest over the iterations (load can only add); `rt all` counts every
  kind; `wall rt` is (latency at D - latency at 0) / D;
* the calls per kind made before the response and after it (`ctx.waitUntil` work, drained);
* the median latency at 0 ms and at D ms per call (`--delay-ms`, default 20), same run.

The last line is JSON.

    uv run python benchmarks/round_trips.py [--delay-ms 20] [--iterations 3] [--facts 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import dataclasses
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from gateway import admin_ops  # noqa: E402
from http_messages import Headers, HttpRequest  # noqa: E402
from local_runtime.access_dev import mint_token  # noqa: E402
from local_runtime.memory_tokens_dev import issue_token  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402
from local_runtime.scripted_llm import Answer, ScriptedLLM  # noqa: E402
from worker.app import handle  # noqa: E402

TENANT = "acme"
AGENT = "agent-a"
KINDS = ("d1", "kv", "vectorize", "r2", "ai", "rpc", "llm")
NOT_STORAGE = {"rpc", "llm"}  # the floors count the memory work besides these
# The floor each operation must reach at the delay (issue 24), on the response path.
FLOORS = {
    "MCP recall_memory": 3,
    "memory API ?tier=semantic&query=": 3,
    "memory API ?query= (all tiers)": 3,
    "memory API semantic write": 3,
    "MCP store_memory": 3,
    "memory API working write": 2,
    "agent run, one turn": 2,
}

_after: contextvars.ContextVar[bool] = contextvars.ContextVar("after", default=False)


@dataclasses.dataclass
class Call:
    kind: str
    start: float
    end: float
    after: bool


class Recorder:
    """Sleeps `delay` seconds before each binding call and records when the sleep ran."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.calls: list[Call] = []
        self.trace = False

    async def cross(self, kind: str) -> None:
        start = time.perf_counter()
        if self.delay:
            await asyncio.sleep(self.delay)
        self.calls.append(Call(kind, start, time.perf_counter(), _after.get()))
        if self.trace:  # which project code made the call (`--trace`)
            frames = [f for f in traceback.extract_stack() if "/src/" in f.filename][-3:]
            where = " < ".join(f"{Path(f.filename).stem}.{f.name}:{f.lineno}" for f in frames)
            print(f"  {'after' if _after.get() else 'path '} {kind:<9} {where}")


class Delayed:
    """Every coroutine method of `target` pays one delayed crossing of kind `kind`; plain
    methods and attributes pass through (a DO namespace's stubs are wrapped as `rpc`)."""

    def __init__(self, target: Any, kind: str, recorder: Recorder) -> None:
        self._target, self._kind, self._recorder = target, kind, recorder

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name == "get_by_name":
            return lambda *a, **k: Delayed(attr(*a, **k), "rpc", self._recorder)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        async def crossing(*args: Any, **kwargs: Any) -> Any:
            await self._recorder.cross(self._kind)
            return await attr(*args, **kwargs)

        return crossing


class DelayedStatement(Delayed):
    def bind(self, *params: Any) -> DelayedStatement:
        return DelayedStatement(self._target.bind(*params), "d1", self._recorder)


class DelayedD1(Delayed):
    def prepare(self, sql: str) -> DelayedStatement:
        return DelayedStatement(self._target.prepare(sql), "d1", self._recorder)

    async def batch(self, statements: Sequence[Any]) -> Any:
        await self._recorder.cross("d1")
        return await self._target.batch([s._target for s in statements])


def instrument(runtime: LocalRuntime, recorder: Recorder) -> None:
    """Every `Bindings` the runtime hands out (requests and the Durable Object's core) gets
    delayed ports; background work is marked as after the response."""
    plain = runtime.bindings
    wrapped = {"kv": "kv", "vectors": "vectorize", "cold": "r2", "embedder": "ai", "llm": "llm"}

    def bindings() -> Any:
        b = plain()
        changes: dict[str, Any] = {
            name: Delayed(getattr(b, name), kind, recorder)
            for name, kind in wrapped.items()
            if getattr(b, name)
        }
        changes["db"] = DelayedD1(b.db, "d1", recorder)
        changes["agents"] = Delayed(b.agents, "agents", recorder)
        return dataclasses.replace(b, **changes)

    runtime.bindings = bindings  # type: ignore[method-assign]
    schedule = runtime.background.wait_until

    def wait_until(work: Coroutine[Any, Any, Any]) -> None:
        async def marked() -> Any:
            _after.set(True)
            return await work

        schedule(marked())

    runtime.background.wait_until = wait_until  # type: ignore[method-assign]


def chain(calls: Sequence[Call], kinds: set[str]) -> int:
    """The longest run of calls each starting after the previous one ended."""
    picked = sorted((c for c in calls if c.kind in kinds), key=lambda c: c.end)
    best: list[int] = []
    for i, call in enumerate(picked):
        prior = [best[j] for j in range(i) if picked[j].end <= call.start + 1e-4]
        best.append(1 + max(prior, default=0))
    return max(best, default=0)


def request(method: str, path: str, body: Any, headers: dict[str, str]) -> HttpRequest:
    raw = b"" if body is None else json.dumps(body).encode()
    merged = {"content-type": "application/json", **headers}
    return HttpRequest(
        method=method, url=f"http://127.0.0.1:8790{path}", headers=Headers(merged), body=raw
    )


def mcp(name: str, arguments: dict[str, Any], i: int, headers: dict[str, str]) -> HttpRequest:
    body = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return request("POST", "/mcp", body, headers)


def operations(h: dict[str, dict[str, str]]) -> dict[str, Callable[[int], HttpRequest]]:
    memory = f"/api/v1/memory/{AGENT}"
    return {
        "MCP recall_memory": lambda i: mcp(
            "recall_memory", {"query": f"where is the office {i}"}, i, h["mcp"]
        ),
        "memory API ?tier=semantic&query=": lambda i: request(
            "GET", f"{memory}?tier=semantic&query=office+floors+{i}", None, h["memory"]
        ),
        "memory API ?query= (all tiers)": lambda i: request(
            "GET", f"{memory}?query=office+floors+{i}", None, h["memory"]
        ),
        "memory API semantic write": lambda i: request(
            "POST",
            memory,
            {
                "tier": "semantic",
                "key": f"city-{i}",
                "value": f"The branch {i} is in Lyon near river {i}",
            },
            h["memory"],
        ),
        "MCP store_memory": lambda i: mcp(
            "store_memory",
            {"content": f"Bench fact {i}: the garage holds {i} bicycles"},
            i,
            h["mcp"],
        ),
        "memory API working write": lambda i: request(
            "POST",
            memory,
            {"tier": "working", "key": f"note-{i % 3}", "value": f"scratch {i}"},
            h["memory"],
        ),
        "agent run, one turn": lambda i: request(
            "POST",
            f"/v1/agents/{TENANT}/assistant/run",
            {"input": f"The office moved to Lyon in week {i}", "instance_id": "bench"},
            h["access"],
        ),
        "inspector fact list": lambda i: request(
            "GET", f"/admin/tenants/{TENANT}/facts?limit=20", None, h["access"]
        ),
        "admin run listing": lambda i: request(
            "GET", f"/admin/agents/{TENANT}/runs?limit=20", None, h["access"]
        ),
    }


async def setup(runtime: LocalRuntime, facts: int) -> dict[str, dict[str, str]]:
    await admin_ops.create_tenant(runtime.kv, runtime.clock, TENANT, memory_enabled=True)
    issued = await admin_ops.issue_api_key(runtime.kv, runtime.clock, TENANT)
    token = issue_token(
        runtime.settings.memory_token_keys,
        TENANT,
        AGENT,
        tiers=("working", "episodic", "semantic", "procedural"),
        scopes=("read", "write"),
        ttl=3600,
    )
    h = {
        "mcp": {"authorization": f"Bearer {issued.api_key}"},
        "access": {
            "cf-access-jwt-assertion": mint_token(
                runtime.state.access, "ops@example.com", now=time.time()
            )
        },
        "memory": {"authorization": f"Bearer {token}"},
    }
    for i in range(facts):
        await answer(
            runtime,
            mcp(
                "store_memory",
                {"content": f"Fact {i}: the office in city {i} has {i % 7} floors"},
                i,
                h["mcp"],
            ),
        )
    return h


async def answer(runtime: LocalRuntime, req: HttpRequest) -> float:
    """Answer `req` (bindings as the runtime hands them); the latency until the response.
    Work after the response (waitUntil, alarms due now) is drained before returning."""
    start = time.perf_counter()
    response = await handle(req, runtime.bindings())
    elapsed = time.perf_counter() - start
    _after.set(True)
    await runtime.background.drain()
    await runtime.fire_due_alarms()
    await runtime.background.drain()
    _after.set(False)
    if response.status >= 400:
        raise SystemExit(f"{req.method} {req.path}: {response.status} {response.body[:300]!r}")
    return elapsed


def counts(calls: Sequence[Call], after: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in calls:
        if c.after == after:
            out[c.kind] = out.get(c.kind, 0) + 1
    return {k: out[k] for k in (*KINDS, "agents") if k in out}


async def run(delay: float, iterations: int, facts: int, trace: bool) -> dict[str, Any]:
    recorder = Recorder()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="round-trips-") as folder:
        from tests.fakes.embedder import HashingEmbedder

        runtime = LocalRuntime.open(
            Path(folder) / "state",
            embedder=HashingEmbedder(),
            llm=ScriptedLLM([Answer("Noted.")]),
        )
        await runtime.migrate()
        instrument(runtime, recorder)
        try:
            headers = await setup(runtime, facts)
            n = 1000
            for name, make in operations(headers).items():
                await answer(runtime, make(n))  # warm-up: imports, caches
                n += 1
                latency: dict[str, list[float]] = {"0": [], "d": []}
                rows: list[dict[str, Any]] = []
                for _ in range(iterations):
                    for label, d in (("0", 0.0), ("d", delay)):
                        recorder.delay, recorder.calls = d, []
                        recorder.trace = trace and label == "d"
                        if recorder.trace:
                            print(name)
                        latency[label].append(await answer(runtime, make(n)))
                        n += 1
                        if label == "d":
                            on_path = [c for c in recorder.calls if not c.after]
                            rows.append(
                                {
                                    "rt": chain(on_path, set(KINDS) - NOT_STORAGE),
                                    "rt_all": chain(on_path, set(KINDS)),
                                    "calls": counts(recorder.calls, after=False),
                                    "after": counts(recorder.calls, after=True),
                                }
                            )
                recorder.delay, recorder.trace = 0.0, False
                ms0 = statistics.median(latency["0"]) * 1000
                msd = statistics.median(latency["d"]) * 1000
                # Load can only make concurrent calls look sequential (a task started late),
                # never the reverse: the fewest sequential calls seen is the count.
                fewest = min(rows, key=lambda r: r["rt"])
                results[name] = {
                    **fewest,
                    "wall_rt": round((msd - ms0) / (delay * 1000), 1) if delay else None,
                    "ms_at_0": round(ms0, 1),
                    "ms_at_delay": round(msd, 1),
                    "floor": FLOORS.get(name),
                }
        finally:
            await runtime.close()
    return results


def show(calls: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in calls.items()) or "-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--facts", type=int, default=40, help="facts stored before measuring")
    parser.add_argument("--trace", action="store_true", help="print where each call is made")
    args = parser.parse_args(argv)
    delay = args.delay_ms / 1000
    results = asyncio.run(run(delay, args.iterations, args.facts, args.trace))
    d = f"{args.delay_ms:g}ms"
    print(
        f"{'operation':<34} {'rt':>3} {'floor':>5} {'rt all':>6} {'wall rt':>7} "
        f"{'ms@0':>7} {'ms@' + d:>9}  calls on the response path | after it"
    )
    for name, r in results.items():
        floor = "" if r["floor"] is None else str(r["floor"])
        mark = "" if r["floor"] is None or r["rt"] <= r["floor"] else " OVER"
        print(
            f"{name:<34} {r['rt']:>3} {floor:>5} {r['rt_all']:>6} {r['wall_rt']!s:>7} "
            f"{r['ms_at_0']:>7} {r['ms_at_delay']:>9}  {show(r['calls'])} | "
            f"{show(r['after'])}{mark}"
        )
    print(
        "rt: sequential calls on the response path besides the LLM and the DO RPC "
        "(`agents` counts calls on the namespace itself, undelayed)"
    )
    print(json.dumps({"delay_ms": args.delay_ms, "operations": results}))


if __name__ == "__main__":
    main()
