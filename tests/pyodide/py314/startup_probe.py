"""Start-up figures, measured inside a fresh Pyodide 314 interpreter (benchmarks/startup.py).

`measure(kind, preimport_json)` runs one measurement in this interpreter and returns JSON.
Each kind needs an interpreter of its own (an import is measured once per process):

* `libraries` — `import pydantic` (with `pydantic.BaseModel`, which loads its core: the
  package itself is lazy), then `import httpx`, each timed;
* `entry` — `import worker.entry`, timed, with the modules it left in `sys.modules`: the
  project's (under /app/src) and every other one (stdlib and third-party), in import order;
* `project` — first imports every non-project module an `entry` run loaded (its list is
  `preimport_json`), then times `import worker.entry`: what is left is the project's own
  modules' code (their bodies, the pydantic models they build, the stemmer they make).

Each figure is `{"cpu", "wall"}` in seconds: `cpu` is the CPU time of Node's main thread
(`process.threadCpuUsage()`), the thread that runs Pyodide — what a CPU limit counts, and
steady on a busy machine where wall time is not; `wall` is `time.perf_counter()`.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from js import process

PROJECT = "/app/src/"
_BASELINE = frozenset(sys.modules)


def _cpu() -> float:
    usage = process.threadCpuUsage() if hasattr(process, "threadCpuUsage") else process.cpuUsage()
    return (float(usage.user) + float(usage.system)) / 1e6


def _timed(action: Callable[[], Any]) -> dict[str, float]:
    cpu, wall = _cpu(), time.perf_counter()
    action()
    return {"cpu": _cpu() - cpu, "wall": time.perf_counter() - wall}


def _project(name: str) -> bool:
    module = sys.modules.get(name)
    return (getattr(module, "__file__", None) or "").startswith(PROJECT)


def _import_entry() -> None:
    import worker.entry  # noqa: F401


def _import_pydantic() -> None:
    import pydantic

    pydantic.BaseModel  # noqa: B018  (the lazy package loads its core here)


def _import_httpx() -> None:
    import httpx  # noqa: F401


def measure(kind: str, preimport_json: str = "[]") -> str:
    if kind == "libraries":
        return json.dumps({"pydantic": _timed(_import_pydantic), "httpx": _timed(_import_httpx)})
    if kind == "entry":
        seconds = _timed(_import_entry)
        loaded = [name for name in sys.modules if name not in _BASELINE]
        return json.dumps(
            {
                "entry": seconds,
                "modules": len(loaded),
                "project_modules": [name for name in loaded if _project(name)],
                "other_modules": [name for name in loaded if not _project(name)],
                "numpy_imported": "numpy" in sys.modules,
            }
        )
    if kind == "project":
        failed = []
        for name in json.loads(preimport_json):
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except Exception as exc:  # reported: the figure then includes that module
                failed.append(f"{name}: {type(exc).__name__}")
        before = frozenset(sys.modules)
        seconds = _timed(_import_entry)
        # Non-project modules the timed import still loaded (their cost is in the figure).
        late = [name for name in sys.modules if name not in before and not _project(name)]
        return json.dumps({"project": seconds, "preimport_failed": failed, "late_others": late})
    raise ValueError(f"unknown measurement {kind!r}")
