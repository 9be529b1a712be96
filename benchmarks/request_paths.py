"""How much code one request crosses: project modules and functions per request path.

Runs the local runtime in-process and sends, through the same `worker.app.handle` the Worker
entry calls, one request of each kind (after a warm-up request of the same kind, so imports
and caches are not counted):

* MCP `tools/call recall_memory` (API key; a memory-enabled tenant with a few facts),
* an agent run, one turn (`POST /v1/agents/{tenant}/{type}/run`, Access JWT),
* a memory-API semantic write (`POST /api/v1/memory/{agent}`, memory token).

Every Python function call while the request is answered and its after-response work drains
is recorded (`sys.setprofile`, all threads); a call counts when its code lives in a project
module: `src/` (what ships) and, separately, `local_runtime/` (the CPython stand-in for the
Cloudflare bindings). Prints one row per path and the size of `src/` (lines, modules,
classes, pydantic models, Protocols); the last line is JSON.

    uv run python benchmarks/request_paths.py
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
LOCAL = ROOT / "local_runtime"
sys.path[:0] = [str(SRC), str(ROOT)]

from gateway import admin_ops  # noqa: E402
from http_messages import Headers, HttpRequest  # noqa: E402
from local_runtime.access_dev import mint_token  # noqa: E402
from local_runtime.memory_tokens_dev import issue_token  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402
from worker.app import handle  # noqa: E402

TENANT = "acme"
# A module longer than this is worth a reviewer's look (a prompt, not a rule: a cohesive
# module may be as large as its concern).
REVIEW_LINES = 400


class Tracer:
    """Records (module, qualified function name) of every call into project code."""

    def __init__(self) -> None:
        self.calls: set[tuple[str, str, str]] = set()  # (root, module, function)
        self._cache: dict[str, tuple[str, str] | None] = {}

    def _module(self, filename: str) -> tuple[str, str] | None:
        cached = self._cache.get(filename, ())
        if cached != ():
            return cached  # type: ignore[return-value]
        found: tuple[str, str] | None = None
        path = Path(filename)
        for root, name in ((SRC, "src"), (LOCAL, "local_runtime")):
            if path.is_relative_to(root):
                base = root if name == "src" else root.parent
                parts = path.relative_to(base).with_suffix("").parts
                module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                found = (name, module)
        self._cache[filename] = found
        return found

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        found = self._module(frame.f_code.co_filename)
        if found is not None:
            self.calls.add((found[0], found[1], frame.f_code.co_qualname))

    def __enter__(self) -> Tracer:
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def counts(self, root: str) -> tuple[int, int]:
        """Modules crossed and functions run under `root`."""
        per = self.modules(root)
        return len(per), sum(per.values())

    def modules(self, root: str) -> dict[str, int]:
        """Each module crossed, with how many of its functions ran."""
        per: dict[str, int] = {}
        for r, m, _ in self.calls:
            if r == root:
                per[m] = per.get(m, 0) + 1
        return dict(sorted(per.items()))


def request(method: str, path: str, body: Any, headers: dict[str, str]) -> HttpRequest:
    raw = b"" if body is None else json.dumps(body).encode()
    merged = {"content-type": "application/json", **headers}
    return HttpRequest(
        method=method, url=f"http://127.0.0.1:8790{path}", headers=Headers(merged), body=raw
    )


async def setup(runtime: LocalRuntime) -> dict[str, dict[str, str]]:
    await admin_ops.create_tenant(runtime.kv, runtime.clock, TENANT, memory_enabled=True)
    issued = await admin_ops.issue_api_key(runtime.kv, runtime.clock, TENANT)
    access = mint_token(runtime.state.access, "ops@example.com", now=time.time())
    token = issue_token(
        runtime.settings.memory_token_keys,
        TENANT,
        "agent-a",
        tiers=("working", "episodic", "semantic", "procedural"),
        scopes=("read", "write"),
        ttl=3600,
    )
    return {
        "mcp": {"authorization": f"Bearer {issued.api_key}"},
        "access": {"cf-access-jwt-assertion": access},
        "memory": {"authorization": f"Bearer {token}"},
    }


def paths(headers: dict[str, dict[str, str]]) -> dict[str, Callable[[int], HttpRequest]]:
    def mcp_recall(i: int) -> HttpRequest:
        call = {"name": "recall_memory", "arguments": {"query": f"where is the office {i}"}}
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call}
        return request("POST", "/mcp", body, headers["mcp"])

    def agent_turn(i: int) -> HttpRequest:
        body = {"input": f"The office moved to Lyon in week {i}"}
        return request("POST", f"/v1/agents/{TENANT}/assistant/run", body, headers["access"])

    def semantic_write(i: int) -> HttpRequest:
        body = {"tier": "semantic", "key": f"office-{i}", "value": f"The office is in Lyon {i}"}
        return request("POST", "/api/v1/memory/agent-a", body, headers["memory"])

    return {
        "MCP recall_memory": mcp_recall,
        "agent run (one turn)": agent_turn,
        "memory-API semantic write": semantic_write,
    }


async def seed_facts(runtime: LocalRuntime, headers: dict[str, dict[str, str]]) -> None:
    for i in range(5):
        body = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {
                "name": "store_memory",
                "arguments": {"content": f"Fact number {i}: the office has {i} floors"},
            },
        }
        await answer(runtime, request("POST", "/mcp", body, headers["mcp"]))


async def answer(runtime: LocalRuntime, req: HttpRequest) -> int:
    response = await handle(req, runtime.bindings())
    await runtime.background.drain()
    if response.status >= 400:
        raise SystemExit(f"{req.method} {req.path}: {response.status} {response.body[:300]!r}")
    return response.status


def source_size() -> dict[str, int]:
    """Lines, modules and classes under src/; a class is a pydantic model when a base is
    `BaseModel` or (transitively, by name) another model, a Protocol when a base is."""
    lines = modules = 0
    bases_of: list[tuple[str, set[str]]] = []
    large: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        modules += 1
        lines += text.count("\n")
        if text.count("\n") > REVIEW_LINES:
            large[path.relative_to(SRC).as_posix()] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                names = {ast.unparse(b).rsplit(".", 1)[-1].split("[")[0] for b in node.bases}
                bases_of.append((node.name, names))
    models = {"BaseModel", "RootModel"}
    while True:
        grown = models | {name for name, bases in bases_of if bases & models}
        if grown == models:
            break
        models = grown
    return {
        "lines": lines,
        "modules": modules,
        "classes": len(bases_of),
        "pydantic_models": sum(1 for name, bases in bases_of if bases & models),
        "protocols": sum(1 for _, bases in bases_of if "Protocol" in bases),
        "modules_over_review_lines": large,
    }


async def run() -> dict[str, Any]:
    from tests.fakes.embedder import HashingEmbedder

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="request-paths-") as folder:
        runtime = LocalRuntime.open(Path(folder) / "state", embedder=HashingEmbedder())
        await runtime.migrate()
        try:
            headers = await setup(runtime)
            await seed_facts(runtime, headers)
            for name, make in paths(headers).items():
                await answer(runtime, make(0))  # warm-up: imports, caches
                with Tracer() as tracer:
                    await answer(runtime, make(1))
                src_modules, src_functions = tracer.counts("src")
                local_modules, local_functions = tracer.counts("local_runtime")
                results[name] = {
                    "modules": src_modules,
                    "functions": src_functions,
                    "local_runtime_modules": local_modules,
                    "local_runtime_functions": local_functions,
                    "src_modules": tracer.modules("src"),
                }
        finally:
            await runtime.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modules", action="store_true", help="also list the src modules each path crosses"
    )
    args = parser.parse_args(argv)
    results = asyncio.run(run())
    print(f"{'path':<28} {'src modules':>11} {'functions':>9}   (+ local_runtime)")
    for name, row in results.items():
        print(
            f"{name:<28} {row['modules']:>11} {row['functions']:>9}   "
            f"(+{row['local_runtime_modules']} modules, +{row['local_runtime_functions']} fns)"
        )
        if args.modules:
            for module, functions in row["src_modules"].items():
                print(f"    {module} ({functions})")
    size = source_size()
    print(
        f"src/: {size['lines']} lines, {size['modules']} modules, {size['classes']} classes "
        f"({size['pydantic_models']} pydantic models, {size['protocols']} Protocols)"
    )
    for name, count in sorted(size["modules_over_review_lines"].items()):
        print(f"  over {REVIEW_LINES} lines, worth a look: {name} ({count})")
    print(json.dumps({"paths": results, "src": size}))


if __name__ == "__main__":
    main()
