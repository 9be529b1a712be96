"""The in-Pyodide test runner (imported by tests/pyodide/harness.mjs inside Pyodide).

Collects `test_*` functions (sync or async, no arguments) from the `test_*.py` modules next
to this file, in file then definition order, runs each once and returns the results as
JSON: `[{"id": "test_kv.py::test_x", "outcome": "passed"|"failed"|"error", "message",
"traceback", "duration"}]`. `failed` is an AssertionError, `error` any other exception.
A test module that cannot be imported yields one `error` result per test it defines (found
with `ast`), so every test still reports under its own name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def discover() -> list[tuple[str, list[str]]]:
    """(module file name, test function names) for every test module, in order."""
    found = []
    for path in sorted(HERE.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test_")
        ]
        found.append((path.name, names))
    return found


async def run_one(module: Any, name: str) -> dict[str, Any]:
    started = time.perf_counter()
    data = None
    try:
        result = getattr(module, name)()
        if inspect.isawaitable(result):
            result = await result
        # A test may return JSON data for a pytest-side comparison (test_fake_pin.py).
        data = result
        outcome, message, trace = "passed", "", ""
    except AssertionError as exc:
        outcome, message, trace = "failed", str(exc), traceback.format_exc()
    except BaseException as exc:  # a test must never stop the run
        outcome, message, trace = "error", f"{type(exc).__name__}: {exc}", traceback.format_exc()
    return {
        "outcome": outcome,
        "message": message,
        "traceback": trace,
        "duration": round(time.perf_counter() - started, 4),
        "data": data,
    }


async def run_all(select_json: str) -> str:
    """Run the selected tests: `select_json` is a JSON list of ids like
    `test_kv.py::test_x`, or `null` for all of them."""
    select = json.loads(select_json)
    wanted = None if select is None else set(select)
    results = []
    for filename, names in discover():
        ids = [f"{filename}::{name}" for name in names]
        if wanted is not None and not wanted.intersection(ids):
            continue
        try:
            module = importlib.import_module(filename.removesuffix(".py"))
        except BaseException as exc:
            trace = traceback.format_exc()
            for test_id in ids:
                results.append(
                    {
                        "id": test_id,
                        "outcome": "error",
                        "message": f"module did not import: {type(exc).__name__}: {exc}",
                        "traceback": trace,
                        "duration": 0.0,
                    }
                )
            continue
        for name, test_id in zip(names, ids, strict=True):
            if wanted is not None and test_id not in wanted:
                continue
            results.append({"id": test_id, **(await run_one(module, name))})
    return json.dumps(results)
