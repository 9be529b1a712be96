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


def require_node_tools() -> None:
    """Skip (outside CI) or fail (in CI) when Node or the npm dev tools are missing."""
    missing = []
    if shutil.which("node") is None:
        missing.append("node is not on PATH")
    if not (PROJECT_ROOT / "node_modules" / ".bin" / "wrangler").exists():
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
