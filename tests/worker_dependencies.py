"""The Worker's Python dependencies as the deploy vendors them, for the harnesses that load
the Worker outside CPython (tests/pyodide, tests/workerd).

`pywrangler deploy` vendors `[project].dependencies` and everything they need into
`python_modules/`. The harnesses cannot download Pyodide's packages, so they take the pure-
Python ones from this venv: `pure_python_modules()` walks the same closure in uv.lock and
answers each distribution's top-level modules with where they live here. Packages with
compiled code (pydantic-core, numpy) are never in it; each harness says what it does about
them (a double, or Pyodide 314's pydantic-core wheel).
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Compiled code: no wheel for Pyodide 0.28 can be had offline.
COMPILED = frozenset({"pydantic-core", "numpy"})


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def worker_closure() -> set[str]:
    """Every distribution the deployed Worker carries: `[project].dependencies`, transitively
    (uv.lock), by canonical name."""
    lock = tomllib.loads((PROJECT_ROOT / "uv.lock").read_text(encoding="utf-8"))
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    by_name = {canonical(p["name"]): p for p in lock["package"]}
    todo = [
        canonical(re.split(r"[=<>~! ;\[]", d, maxsplit=1)[0])
        for d in project["project"]["dependencies"]
    ]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo.extend(canonical(d["name"]) for d in by_name[name].get("dependencies", []))
    return seen


def top_level_modules(distribution: str) -> dict[str, str]:
    """The distribution's top-level packages (name -> folder), single-file modules (`name.py`
    -> file) and `.pth` files (the workers SDK's loads its package patches), as installed."""
    dist = importlib.metadata.distribution(distribution)
    found: dict[str, str] = {}
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if parts[0].endswith((".dist-info", ".data")) or parts[0] in {"..", "bin", "__pycache__"}:
            continue
        if len(parts) == 1 and parts[0].endswith((".py", ".pth")):
            found[parts[0]] = str(dist.locate_file(file))
        elif len(parts) > 1 and str(file).endswith(".py"):
            found[parts[0]] = str(dist.locate_file(parts[0]))
    return found


def pure_python_modules(exclude: Iterable[str] = ()) -> dict[str, str]:
    """Every top-level module of the Worker's pure-Python dependencies: import name (or
    `name.py` for a single-file module) -> path in this venv. `exclude` names distributions
    the caller supplies otherwise (or cannot use: pydantic without its compiled core)."""
    skip = COMPILED | {canonical(name) for name in exclude}
    modules: dict[str, str] = {}
    for name in sorted(worker_closure() - skip):
        modules.update(top_level_modules(name))
    return modules
