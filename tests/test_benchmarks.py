"""Every script in benchmarks/ still runs: each once at a tiny size, as CI's smoke check.

A benchmark is a script that prints figures (speed targets live there, not in timed tests);
one that no longer starts is a measurement nobody can repeat. The figures at these sizes mean
nothing; only that each script runs to the end and exits 0 is checked. A new script must be
added to SMOKE with its tiny arguments (the second test fails otherwise).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT, require_node_tools

BENCHMARKS = PROJECT_ROOT / "benchmarks"

# Runs Pyodide under Node (npm ci): skipped without the Node tools, failed in CI.
NEEDS_NODE = {"startup.py"}
# script -> arguments for a run of a few seconds
SMOKE: dict[str, list[str]] = {
    "context_assembly.py": ["--episodes", "300", "--iterations", "20", "--warmup", "5"],
    "gateway_overhead.py": ["--calls", "20", "--warmup", "5"],
    "portability.py": ["--facts", "300", "--seed-facts", "50", "--changes", "10"],
    "prune.py": ["--sizes", "3000", "--tenants", "3"],
    "request_paths.py": [],
    "round_trips.py": ["--facts", "3", "--iterations", "1", "--delay-ms", "2"],
    "semantic_latency.py": ["--facts", "300", "--queries", "10", "--embedder", "hashing"],
    "startup.py": ["--runs", "1", "--repeat", "2"],
    "storage_bytes.py": [
        "--facts",
        "200",
        "--episodes",
        "40",
        "--recalls",
        "5",
        "--embedding-names",
        "workers-ai",
    ],
    "tenant_move.py": ["--facts", "30", "--episodes", "30"],
    "tiered_reads.py": ["--episodes", "20"],
    "updates.py": ["--cases", "12", "--embedder", "hashing"],
}


def test_every_benchmark_has_a_smoke_size() -> None:
    scripts = {path.name for path in BENCHMARKS.glob("*.py")}
    assert scripts == set(SMOKE), "add the new script to SMOKE with tiny arguments"


# ~60 s (fresh workerd and Pyodide processes): marked slow so it is scheduled early
# (tests/conftest.py), not last on one worker while the other has finished.
SLOW = {"startup.py"}


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=[pytest.mark.slow] if s in SLOW else []) for s in sorted(SMOKE)],
)
def test_benchmark_runs_at_a_tiny_size(script: str) -> None:
    if script in NEEDS_NODE:
        require_node_tools()
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *SMOKE[script]],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": f"{PROJECT_ROOT / 'src'}{os.pathsep}{PROJECT_ROOT}"},
        check=False,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert done.stdout.strip(), f"{script} printed nothing"
