"""DESIGN invariant 3: no request path touches a Durable Object except the agent-run path.

Every route the Worker serves is driven with a `Bindings` whose Durable Object namespace
records any use and fails; only the agent-run / admin-agents routes may touch it. Cron
jobs are driven the same way. Routes added later are covered automatically.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import build_request
from worker.app import ROUTES, handle
from worker.cron import JOBS, run_scheduled

# Route patterns that may reach an agent's Durable Object: the agent-run and admin-agents
# routes, the memory API (procedural memory lives in the object), pack promotion (which
# reads the instance's pack candidates) and subject erase (which clears the subject from
# every instance's run log, turn state and queued writes).
AGENT_ROUTE_PREFIXES = (
    "/v1/agents/",
    "/admin/agents/",
    "/api/v1/memory/",
    "/admin/tenants/{tenant}/agents/",
    "/admin/tenants/{tenant}/subjects/",
)


class TouchedDurableObjectError(RuntimeError):
    pass


class SpyNamespace:
    def __init__(self) -> None:
        self.touched: list[str] = []

    def get_by_name(self, name: str) -> Any:
        self.touched.append(name)
        raise TouchedDurableObjectError(f"Durable Object {name!r} touched")


def fill(pattern: str) -> str:
    values = {
        "{tenant}": "acme",
        "{agent_type}": "assistant",
        "{run_id}": "01J00000000000000000000000",
    }
    for name, value in values.items():
        pattern = pattern.replace(name, value)
    while "{" in pattern:
        start = pattern.index("{")
        pattern = pattern[:start] + "x1" + pattern[pattern.index("}") + 1 :]
    return pattern


BODIES: list[Any] = [
    None,
    {},
    {"input": "hello", "score": 1.0},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "recall_memory", "arguments": {"query": "x"}},
    },
]


async def test_only_agent_routes_reach_a_durable_object(
    agent_runtime: LocalRuntime, token: str
) -> None:
    spy = SpyNamespace()
    bindings = dataclasses.replace(agent_runtime.bindings(), agents=spy)
    driven = 0
    for route in ROUTES:
        is_agent_route = route.path.startswith(AGENT_ROUTE_PREFIXES)
        path = fill(route.path)
        for body in BODIES:
            for auth in (None, token):
                spy.touched.clear()
                request = build_request(route.method, path, body, token=auth)
                response = await handle(request, bindings)
                driven += 1
                if not is_agent_route:
                    assert spy.touched == [], (route.method, route.path, response.status)
    assert driven >= len(ROUTES) * len(BODIES) * 2
    # Sanity: the spy does catch the agent-run path.
    spy.touched.clear()
    request = build_request("POST", "/v1/agents/acme/assistant/run", {"input": "hi"}, token=token)
    response = await handle(request, bindings)
    assert spy.touched == ["acme:assistant:default"]
    assert response.status == 500  # the namespace failed, and nothing else was reached


async def test_cron_jobs_never_reach_a_durable_object(agent_runtime: LocalRuntime) -> None:
    spy = SpyNamespace()
    bindings = dataclasses.replace(agent_runtime.bindings(), agents=spy)
    for cron in [*JOBS, "* * * * *"]:
        with contextlib.suppress(TouchedDurableObjectError):
            await run_scheduled(cron, agent_runtime.clock.now(), bindings)
        assert spy.touched == [], cron
