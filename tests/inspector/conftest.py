"""A local server (the app `agent-memory dev` serves) with a tenant seeded over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from tests.inspector.seed import Seeded, seed


@contextlib.contextmanager
def serve_seeded(state: Path) -> Iterator[tuple[Seeded, LocalRuntime]]:
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())
    with running_server(runtime) as base:
        yield seed(base, state), runtime


@pytest.fixture(scope="module")
def seeded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    """Read-only tests share one seeded server per module."""
    with serve_seeded(tmp_path_factory.mktemp("inspector") / "state") as (seeded, _runtime):
        yield seeded


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[tuple[Seeded, LocalRuntime]]:
    """A server of its own, for tests that change memory (the erase)."""
    with serve_seeded(tmp_path / "state") as served:
        yield served
