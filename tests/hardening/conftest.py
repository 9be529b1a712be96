"""Fixtures for the hardening tests (issue 14): the agent-path fixtures, and the local dev
server over real loopback HTTP for what only the ASGI layer can get wrong."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.agents.conftest import agent_runtime, send, token

__all__ = ["agent_runtime", "send", "served", "token"]


@pytest.fixture
def served(agent_runtime: LocalRuntime) -> Iterator[str]:
    """The dev server's ASGI app for `agent_runtime` on a free 127.0.0.1 port; its base URL."""
    with running_server(agent_runtime) as base:
        yield base
