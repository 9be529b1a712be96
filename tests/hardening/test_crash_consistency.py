"""Finding 7 of issue 14: crash consistency of the local runtime.

Each trial starts `agent-memory dev` on a free loopback port with a temp state folder,
sends a mixed burst (agent runs and MCP `store_memory` writes from several threads),
SIGKILLs the server as soon as a seeded number of writes has been acknowledged (while
others are in flight), restarts it on the same state and checks that

* every acknowledged agent run is readable, completed, through the admin API;
* every acknowledged memory write is recalled by the restarted server;
* no fact is `active` without its vector (the semantic write order: row, vector, active).

No sleeps: the kill is triggered by the k-th acknowledgement, readiness is polled with a
deadline. `CRASH_TRIALS` sets the number of seeded trials (default 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from gateway import admin_ops
from local_runtime.access_dev import mint_token
from local_runtime.runtime import PROJECT_ROOT, LocalRuntime
from local_runtime.server import free_port
from tests.fakes.embedder import HashingEmbedder
from worker.identity import ACCESS_HEADER

TRIALS = int(os.environ.get("CRASH_TRIALS", "3"))
START_DEADLINE_SECONDS = 60.0
WORKERS = 6


def start_server(
    state: Path, port: int, log: Path, module: str | None = None
) -> subprocess.Popen[bytes]:
    """`agent-memory dev` as a user runs it (or `module STATE PORT`, stdout piped); returns
    once /healthz answers (or fails)."""
    dev = ["local_runtime.cli", "dev", "--port", str(port), "--state", str(state)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", *(dev if module is None else [module, str(state), str(port)])],
            cwd=PROJECT_ROOT,
            stdout=out if module is None else subprocess.PIPE,
            stderr=subprocess.STDOUT if module is None else out,
        )
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the dev server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass  # not listening yet: poll again until the deadline
        # The poll interval doubles as the exit check: returns early if the server died.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.05)
    process.kill()
    raise AssertionError("the dev server did not become ready in time")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


@dataclass
class Burst:
    """What the burst saw: acknowledged runs and memory writes, and the kill trigger."""

    kill_after: int
    process: subprocess.Popen[bytes]
    runs: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    killed: threading.Event = field(default_factory=threading.Event)

    def acknowledged(self, kind: str, value: str) -> None:
        """Record an acknowledgement; the one that completes the quota (at least
        `kill_after` in all, two of each kind) kills the server mid-burst."""
        with self.lock:
            (self.runs if kind == "run" else self.facts).append(value)
            enough = len(self.runs) + len(self.facts) >= self.kill_after
            mixed = len(self.runs) >= 2 and len(self.facts) >= 2
            if enough and mixed and not self.killed.is_set():
                self.killed.set()
                os.kill(self.process.pid, signal.SIGKILL)


def seed_state(state: Path) -> str:
    """Tenant `acme` with memory on and an API key, written before the server starts."""
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())

    async def seed() -> str:
        await runtime.migrate()
        assert runtime.kv is not None
        await admin_ops.create_tenant(runtime.kv, runtime.clock, "acme", memory_enabled=True)
        key = (await admin_ops.issue_api_key(runtime.kv, runtime.clock, "acme")).api_key
        await runtime.close()
        return key

    return asyncio.run(seed())


def mcp_call(
    client: httpx.Client, base: str, key: str, name: str, arguments: dict[str, object]
) -> dict[str, object]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = client.post(f"{base}/mcp", json=message, headers={"Authorization": f"Bearer {key}"})
    response.raise_for_status()
    result: dict[str, object] = response.json()["result"]
    return result


def burst(base: str, key: str, token: str, trial: Burst, rng: random.Random, tag: str) -> None:
    plan = [("run" if rng.random() < 0.5 else "fact", f"{tag}-{i}") for i in range(200)]

    def one(kind: str, label: str) -> None:
        if trial.killed.is_set():
            return
        try:
            with httpx.Client(timeout=30) as client:
                if kind == "run":
                    response = client.post(
                        f"{base}/v1/agents/acme/assistant/run",
                        json={"input": f"remember item {label}", "instance_id": f"i{label[-1]}"},
                        headers={ACCESS_HEADER: token},
                    )
                    if response.status_code == 200 and response.json()["status"] == "completed":
                        trial.acknowledged("run", response.json()["run_id"])
                else:
                    content = f"crash probe fact {label} zq{label.replace('-', '')}"
                    result = mcp_call(client, base, key, "store_memory", {"content": content})
                    if result["isError"] is False:
                        stored = json.loads(result["content"][0]["text"])  # type: ignore[index]
                        if not stored.get("pending"):
                            trial.acknowledged("fact", content)
        except (httpx.TransportError, httpx.HTTPStatusError):
            pass  # in flight when the server died: not acknowledged, so not promised

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda item: one(*item), plan))


@pytest.fixture
def trial_dirs(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@pytest.mark.parametrize("seed", range(TRIALS))
def test_acknowledged_writes_survive_sigkill(trial_dirs: Path, seed: int) -> None:
    rng = random.Random(seed)
    state, log = trial_dirs / "state", trial_dirs / "server.log"
    key = seed_state(state)
    token = mint_token(state / "access", "ops@example.com", now=time.time(), ttl=3600)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start_server(state, port, log)
    trial = Burst(kill_after=rng.randint(4, 16), process=process)
    try:
        burst(base, key, token, trial, rng, f"s{seed}")
    finally:
        if process.poll() is None and not trial.killed.is_set():
            process.kill()
        process.wait(timeout=30)
    assert trial.killed.is_set(), "the burst ended before the kill: raise the burst size"
    assert process.returncode == -signal.SIGKILL

    restarted = start_server(state, port, log)
    try:
        with httpx.Client(timeout=30) as client:
            for run_id in trial.runs:
                response = client.get(
                    f"{base}/admin/agents/acme/runs/{run_id}", headers={ACCESS_HEADER: token}
                )
                assert response.status_code == 200, (run_id, response.text)
                assert response.json()["run"]["status"] == "completed", response.json()["run"]
            for content in trial.facts:
                found = mcp_call(client, base, key, "recall_memory", {"query": content, "top_k": 5})
                texts = json.loads(found["content"][0]["text"])  # type: ignore[index]
                assert any(content in json.dumps(r) for r in texts["results"]), content
    finally:
        stop(restarted)

    # With the server stopped, look at the stores directly: no active fact without a vector.
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())

    async def active_without_vector() -> tuple[int, list[str]]:
        assert runtime.db is not None and runtime.vectors is not None
        rows = (
            await runtime.db.prepare(
                "SELECT fact_id FROM semantic_facts WHERE tenant_id = ? AND status = 'active'"
            )
            .bind("acme")
            .all()
        )
        ids = [str(row["fact_id"]) for row in rows.results]
        present = {record.id for record in await runtime.vectors.get_by_ids(ids)} if ids else set()
        await runtime.close()
        return len(ids), [fact_id for fact_id in ids if fact_id not in present]

    active, missing = asyncio.run(active_without_vector())
    assert active >= len(trial.facts)  # the check below looked at every acknowledged fact
    assert missing == []
