"""The one Miniflare harness of a test session, and fresh stores on it for each test.

`harness()` starts `tests/miniflare/harness.mjs` under Node the first time it is called
and returns the same running harness afterwards; `stop()` ends it (the session fixture in
`tests/miniflare/conftest.py` calls it, and `atexit` does too, as a fallback for sessions
that only used the contract factories). Starting takes a few seconds (workerd boots), so
it happens once per session, never per test.

Readiness is the harness's own signal: the one JSON line it prints on stdout once
Miniflare answers. There are no sleeps; the only bound is a hang guard on that line.

Isolation without restarting workerd (the context managers below):

* KV: the namespace is emptied before each use (one harness call). A key prefix per test
  would change key lengths and therefore workerd's own error texts, which the contract
  suite checks;
* D1: every table and view is dropped before each use, leaving an empty database;
* DO SQL: each use gets a Durable Object with a new unique name, so a new SQLite database.

Tests run sequentially in one process (no xdist), so emptying shared KV/D1 is safe.
When Node or `node_modules` is missing, `harness()` skips outside CI and fails in CI
(`tests.conftest.require_node_tools`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import tomllib
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from tests.conftest import PROJECT_ROOT, require_node_tools
from tests.contracts.conftest import KVHarness
from tests.miniflare.adapters import (
    MiniflareD1,
    MiniflareDurableObjectStorage,
    MiniflareHarness,
    MiniflareKV,
)

HARNESS_SCRIPT = Path(__file__).with_name("harness.mjs")
# Not a timed assertion: a guard so that a harness that never becomes ready fails the
# session with its log instead of hanging it. workerd is usually ready in 1-3 s.
READY_GUARD_SECONDS = 180.0


def compatibility_date() -> str:
    """The Worker's compatibility date (wrangler.toml), so workerd behaves as deployed; or,
    when that is later, the npm workerd's own (1.YYYYMMDD.n): it refuses later dates. The
    flags in between are proven in tests/workerd (docs/pyodide.md "Compatibility flags")."""
    config = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text(encoding="utf-8"))
    workerd = PROJECT_ROOT / "node_modules" / "workerd" / "package.json"
    if not workerd.exists():
        return str(config["compatibility_date"])
    day = json.loads(workerd.read_text(encoding="utf-8"))["version"].split(".")[1]
    return min(str(config["compatibility_date"]), f"{day[:4]}-{day[4:6]}-{day[6:]}")


def _ram_folder() -> str | None:
    """A RAM-backed folder for Miniflare's storage if the machine has one (Linux)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class HarnessProcess:
    """A running `node harness.mjs` and its connection."""

    def __init__(self) -> None:
        self._log: IO[bytes] = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="miniflare-harness-", suffix=".log", delete=False
        )
        # Miniflare keeps its "in-memory" stores in files under TMPDIR, and a KV put or D1
        # write then waits for the disk: on a RAM-backed folder they are 3-5x faster.
        self._tmp = tempfile.mkdtemp(prefix="miniflare-", dir=_ram_folder())
        env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0", "TMPDIR": self._tmp}
        self.process = subprocess.Popen(
            ["node", str(HARNESS_SCRIPT), "--compatibility-date", compatibility_date()],
            cwd=PROJECT_ROOT,
            stdin=subprocess.PIPE,  # kept open: the harness exits when it closes
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            # Its own process group, so stop() can end workerd too if node hangs.
            start_new_session=True,
        )
        ready = self._read_ready_line()
        self.port = int(ready["port"])
        self.miniflare_version = str(ready.get("miniflare", "?"))
        self.connection = MiniflareHarness(f"http://127.0.0.1:{self.port}")

    def _read_ready_line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        lines: list[bytes] = []
        reader = threading.Thread(
            target=lambda: lines.append(self.process.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(READY_GUARD_SECONDS)
        line = lines[0] if lines else b""
        try:
            message = json.loads(line)
        except ValueError:
            message = {"ready": False, "error": f"no ready line (got {line!r})"}
        if not message.get("ready"):
            self.stop()
            raise RuntimeError(
                f"the Miniflare harness did not start: {message.get('error')}\n"
                f"--- harness log ---\n{self.log_tail()}"
            )
        return dict(message)

    def log_tail(self, size: int = 4000) -> str:
        try:
            return Path(self._log.name).read_text(encoding="utf-8", errors="replace")[-size:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Close stdin (the harness disposes Miniflare and exits); escalate if it hangs."""
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(self.process.pid, sig)
                    except ProcessLookupError:
                        break
                    try:
                        self.process.wait(timeout=10)
                        break
                    except subprocess.TimeoutExpired:
                        continue
        if self.process.stdout is not None:
            self.process.stdout.close()
        if hasattr(self, "connection"):
            self.connection.close()
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)
        shutil.rmtree(self._tmp, ignore_errors=True)


_running: HarnessProcess | None = None
_failure: str | None = None
_lock = threading.Lock()


def harness() -> MiniflareHarness:
    """The session's harness connection, starting the harness on first use."""
    global _running, _failure
    require_node_tools()
    with _lock:
        if _failure is not None:
            pytest.fail(_failure)
        if _running is None:
            try:
                _running = HarnessProcess()
            except Exception as exc:
                # Remember it: every later test fails at once instead of retrying a boot.
                _failure = str(exc)
                pytest.fail(_failure)
            atexit.register(stop)
        return _running.connection


def stop() -> None:
    """Stop the session's harness if one is running."""
    global _running
    with _lock:
        if _running is not None:
            _running.stop()
            _running = None


# --- fresh stores (the contract-suite factories and the tier fixtures use these) -------------


@asynccontextmanager
async def miniflare_kv() -> AsyncIterator[KVHarness]:
    """An empty KV namespace on workerd. Its clock is real time and cannot be moved."""
    import time

    connection = harness()
    connection.clear_kv()
    async with connection.async_client() as client:
        yield KVHarness(kv=MiniflareKV(connection, client), now=time.time, advance=None)


@asynccontextmanager
async def miniflare_d1() -> AsyncIterator[MiniflareD1]:
    """An empty D1 database on workerd."""
    connection = harness()
    connection.reset_d1()
    async with connection.async_client() as client:
        yield MiniflareD1(connection, client)


@contextmanager
def miniflare_do_storage() -> Iterator[MiniflareDurableObjectStorage]:
    """The storage of a brand-new SQLite-backed Durable Object on workerd."""
    yield MiniflareDurableObjectStorage(harness(), f"contract-{uuid.uuid4().hex}")
