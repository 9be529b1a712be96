"""The start-up rule: importing `worker.entry` (what the deploy snapshots, under Cloudflare's
start-up CPU limit) loads only what every request may need; a route only some requests
take names a `LazyHandler` in `worker.app.ROUTES` and its module loads on first use
(docs/pyodide.md "Start-up").

Checked over the import graph (module-level imports only: an import inside a function runs
on its first call), so an eager import that would pull a lazy route, the agent runtime or
the memory core back into the start-up fails here, not only in the benchmark
(benchmarks/startup.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path

from tests.import_graph import import_time_closure
from worker.app import ROUTES
from worker.routing import LazyHandler

SRC = Path(__file__).resolve().parents[2] / "src"

# Loaded on first use only: the Durable Object's core (agent_runtime_do), the memory
# core's rooms behind the lazy routes, the cron jobs (worker.cron), the OpenAI embedder.
NEVER_AT_START_UP = (
    "agent_runtime_do",
    "agent_memory.agent",
    "agent_memory.governance",
    "agent_memory.lifecycle",
    "agent_memory.retrieval",
    "agent_memory.hot_warm_cold",
    "agent_memory.tiers",
    "worker.lifecycle_jobs",
    "bindings.openai_embedder",
)


def lazy_targets() -> list[LazyHandler]:
    """Every route's lazy handler, and the lazy gates of the routes' auth."""
    handlers = [route.handler for route in ROUTES if isinstance(route.handler, LazyHandler)]
    gates = {id(r.auth.gate): r.auth.gate for r in ROUTES if r.auth.gate is not None}
    return [*handlers, *gates.values()]


def start_up_violations(root_dir: Path, lazy_modules: set[str]) -> list[str]:
    closure = import_time_closure("worker.entry", root_dir)
    banned = tuple(NEVER_AT_START_UP)
    return sorted(
        name
        for name in closure
        if name in lazy_modules or any(name == b or name.startswith(b + ".") for b in banned)
    )


def test_the_start_up_imports_no_lazy_route_and_no_memory_core() -> None:
    modules = {handler.target.partition(":")[0] for handler in lazy_targets()}
    assert start_up_violations(SRC, modules) == []


def test_the_start_up_closure_is_the_small_one_the_benchmark_measures() -> None:
    # Guards against a vacuous pass: the walk sees the entry, the app and the hot path.
    closure = import_time_closure("worker.entry", SRC)
    assert {"worker.app", "gateway.tool_proxy", "gateway.mcp"} <= closure
    assert len(closure) < 90  # 67 when this rule was written; 182 before it


def test_every_lazy_route_names_an_async_handler_that_exists() -> None:
    targets = lazy_targets()
    assert len(targets) > 20
    for handler in targets:
        resolved = handler.resolve()
        assert inspect.iscoroutinefunction(resolved), handler.target


def test_an_eager_import_of_a_lazy_module_is_reported(tmp_path: Path) -> None:
    def write(module: str, text: str) -> None:
        path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.parents:
            if parent == tmp_path:
                break
            (parent / "__init__.py").touch()
        path.write_text(text)

    write("worker.entry", "from worker.app import handle\n")
    write(
        "worker.app",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import agent_runtime_do.core\n"
        "def later():\n    import worker.openapi\n"
        "class Routes:\n    import worker.inspector_routes\n",
    )
    write("worker.openapi", "")
    write("worker.inspector_routes", "")
    write("agent_runtime_do.core", "")
    lazy = {"worker.openapi", "worker.inspector_routes"}
    # A class body runs at import: reported. A function body and TYPE_CHECKING do not.
    assert start_up_violations(tmp_path, lazy) == ["worker.inspector_routes"]
