"""Shared fixtures: a local runtime in a temporary state folder, and node tooling checks."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from local_runtime.runtime import LocalRuntime

PROJECT_ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


NODE_BIN = PROJECT_ROOT / "node_modules" / ".bin"


def wrangler_command(*args: str) -> list[str]:
    """The project's wrangler, run by the Node 22 that `npm ci` installs beside it.

    wrangler >= 4.127.1 (what pywrangler requires) refuses Node < 22, and the README promises
    that tests run on Node 20: `package.json` lists Node 22 itself as an optional dependency
    (`node-<platform>-<arch>`), linked as `node_modules/.bin/node`. `npx` puts that folder
    first on PATH, so `npx wrangler` (and pywrangler, which calls it) gets Node 22 too.
    """
    node = NODE_BIN / "node"
    wrangler = PROJECT_ROOT / "node_modules" / "wrangler" / "bin" / "wrangler.js"
    return [str(node) if node.exists() else "node", str(wrangler), *args]


@pytest.fixture(autouse=True)
def _fresh_isolate_directory() -> None:
    """Each test is a new deployment: no tenant home cached from another test's runtime."""
    from agent_memory.directory import forget_cached_homes

    forget_cached_homes()


def require_node_tools() -> None:
    """Skip (outside CI) or fail (in CI) when Node or the npm dev tools are missing."""
    missing = []
    if shutil.which("node") is None:
        missing.append("node is not on PATH")
    if not (NODE_BIN / "wrangler").exists():
        missing.append("node_modules is missing: run `npm ci`")
    if missing:
        reason = "; ".join(missing)
        if IN_CI:
            pytest.fail(f"CI needs the Node tools: {reason}")
        pytest.skip(reason)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    """A migrated local runtime with a fast deterministic embedder (no model load)."""
    from local_runtime.runtime import LocalRuntime
    from tests.fakes.embedder import HashingEmbedder

    rt = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    await rt.migrate()
    yield rt
    await rt.close()
