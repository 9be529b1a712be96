"""Importing the Worker's main module reads no time, randomness or network.

Cloudflare runs module top-level code at deploy time and freezes it into a memory snapshot
(cheat sheet section 8): `os.urandom`/`secrets`/`uuid4`/random seeding there is refused
("Disallowed operation called within global scope") and time read there is frozen. A fresh
interpreter imports `worker.entry` (and so everything it imports from src/), then every
module it leaves to first use (lazy routes, the Durable Object's core, the cron jobs), over
the fake runtime with those functions guarded; any call made *from a module under src/* during the
import is a violation. (Calls library code makes on its own, like numpy's, are not counted:
the runtime patches those.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, os, random, secrets, socket, sys, time, uuid

SRC = sys.argv[1]
violations = []

def guard(owner, name):
    original = getattr(owner, name)
    def guarded(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith(SRC):
            violations.append(f"{name} called from {caller}:{sys._getframe(1).f_lineno}")
        return original(*args, **kwargs)
    setattr(owner, name, guarded)

for owner, names in [
    (time, ["time", "time_ns", "monotonic", "localtime", "gmtime"]),
    (os, ["urandom", "getenv"]),
    (random, ["random", "seed", "randint", "getrandbits", "choice"]),
    (uuid, ["uuid1", "uuid4"]),
    (secrets, ["token_bytes", "token_hex", "token_urlsafe", "randbits"]),
    (socket, ["create_connection", "getaddrinfo"]),
]:
    for name in names:
        guard(owner, name)

from tests.fakes.js_runtime import FakeJsRuntime

with FakeJsRuntime():
    import worker.entry  # noqa: F401

    # And what loads on first use (the start-up rule, docs/pyodide.md "Start-up"): the lazy
    # routes, the Durable Object's core, the cron jobs and the memory tools. They import
    # inside a request, but their module level must be as clean as the snapshot's.
    from worker.app import ROUTES
    from worker.routing import LazyHandler

    for route in ROUTES:
        if isinstance(route.handler, LazyHandler):
            route.handler.resolve()
        if route.auth.gate is not None:
            route.auth.gate.resolve()
    import agent_memory.agent.memory_tools  # noqa: F401
    import agent_runtime_do.core  # noqa: F401
    import worker.lifecycle_jobs  # noqa: F401

print(json.dumps(violations))
"""


def test_importing_the_entry_is_snapshot_safe() -> None:
    src = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, src],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": f"{ROOT}:{src}", "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
