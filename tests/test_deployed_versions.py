"""What the tests run is what Cloudflare runs: interpreter, compiled packages and deploy tools.

`pywrangler deploy` vendors `[project].dependencies` for Pyodide: a package with compiled
code can only come from Pyodide's own package set (its wheels are built for Emscripten), so
pydantic-core, and with it pydantic, and numpy deploy at the versions Pyodide's lock names,
whatever `uv.lock` says. These tests fail when the two disagree, when the npm Pyodide is not
the one our compatibility date runs, and when the pinned wrangler is older than what the
pinned workers-py (pywrangler) demands. Why each pin is what it is: docs/pyodide.md.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT, require_node_tools
from tests.worker_dependencies import canonical, worker_closure

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
UV_LOCK = tomllib.loads((PROJECT_ROOT / "uv.lock").read_text(encoding="utf-8"))
PACKAGE_JSON = json.loads((PROJECT_ROOT / "package.json").read_text(encoding="utf-8"))
WRANGLER_TOML = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text(encoding="utf-8"))
NODE_MODULES = PROJECT_ROOT / "node_modules"

# What Cloudflare runs for compatibility dates from 2025-09-29 (the `python_workers_20250116`
# runtime): Pyodide 0.28.2 with Python 3.13.2 (workerd's `pyodide_0.28.2_2025-01-16` bundle,
# the one ../shared/workerd-python serves offline).
CLOUDFLARE_PYODIDE = "0.28.2"
CLOUDFLARE_PYTHON = "3.13.2"
# The only workerd that accepts the offline Python bundle (later releases verify its checksum).
WORKERD_FOR_THE_PYTHON_BUNDLE = "1.20260426.1"


def locked_versions() -> dict[str, set[str]]:
    versions: dict[str, set[str]] = {}
    for package in UV_LOCK["package"]:
        versions.setdefault(canonical(package["name"]), set()).add(package["version"])
    return versions


def direct_dependencies() -> list[str]:
    dependencies: list[str] = PYPROJECT["project"]["dependencies"]
    return dependencies


def pyodide_lock() -> dict[str, Any]:
    path = NODE_MODULES / "pyodide" / "pyodide-lock.json"
    if not path.exists():
        require_node_tools()
        pytest.skip("node_modules/pyodide is missing: run `npm ci`")
    lock: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return lock


def npm_version(package: str) -> str:
    path = NODE_MODULES / package / "package.json"
    if not path.exists():
        require_node_tools()
        pytest.skip(f"node_modules/{package} is missing: run `npm ci`")
    version: str = json.loads(path.read_text(encoding="utf-8"))["version"]
    return version


def test_every_worker_dependency_is_pinned_to_its_locked_version() -> None:
    locked = locked_versions()
    for requirement in direct_dependencies():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.]*)", requirement)
        assert match, f"{requirement!r}: the Worker's dependencies are pinned with =="
        name, version = match.groups()
        assert locked[canonical(name)] == {version}, (requirement, locked[canonical(name)])


def test_compiled_packages_are_tested_at_the_versions_pyodide_deploys() -> None:
    packages = pyodide_lock()["packages"]
    locked = locked_versions()
    closure = worker_closure()
    checked = []
    for name in sorted(closure):
        entry = packages.get(name)
        if entry is None:
            continue  # pure Python from PyPI: pywrangler resolves it like uv does
        compiled = not entry["file_name"].endswith("-none-any.whl")
        direct = name in {canonical(re.split(r"[=<>~!]", d)[0]) for d in direct_dependencies()}
        if compiled or direct:
            checked.append(name)
            assert locked[name] == {entry["version"]}, (
                f"{name}: uv.lock tests {sorted(locked[name])}, Pyodide deploys {entry['version']}"
            )
    # The ones that matter most are really checked (not skipped as absent).
    assert {"pydantic", "pydantic-core", "numpy"} <= set(checked), checked


def test_npm_pyodide_is_the_interpreter_our_compatibility_date_runs() -> None:
    assert PACKAGE_JSON["devDependencies"]["pyodide"] == CLOUDFLARE_PYODIDE
    assert npm_version("pyodide") == CLOUDFLARE_PYODIDE
    assert pyodide_lock()["info"]["python"] == CLOUDFLARE_PYTHON
    # compatibility_date >= 2025-09-29 with `python_workers` selects Python 3.13 (Pyodide 0.28).
    assert WRANGLER_TOML["compatibility_date"] >= "2025-09-29"
    assert "python_workers" in WRANGLER_TOML["compatibility_flags"]


def test_pywrangler_vendors_for_the_same_python(monkeypatch: pytest.MonkeyPatch) -> None:
    utils = pytest.importorskip("pywrangler.utils")
    monkeypatch.chdir(PROJECT_ROOT)  # it reads wrangler.toml from the project root
    interpreter = f"cpython-{CLOUDFLARE_PYTHON}-emscripten-wasm32-musl"
    assert utils.get_uv_pyodide_interp_name() == interpreter


def test_pinned_wrangler_satisfies_pywrangler() -> None:
    """pywrangler refuses `dev` and `deploy` below its MIN_WRANGLER_VERSION (it checks with
    `npx wrangler --version`); `pywrangler sync` needs the internet, so read the constant."""
    utils = pytest.importorskip("pywrangler.utils")
    pinned = PACKAGE_JSON["devDependencies"]["wrangler"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"wrangler is pinned exactly, not {pinned!r}"
    installed = npm_version("wrangler")
    assert installed == pinned
    assert tuple(int(x) for x in installed.split(".")) >= utils.MIN_WRANGLER_VERSION
    # and wrangler runs: npx puts node_modules/.bin (with its Node 22) first on PATH.
    assert (NODE_MODULES / ".bin" / "node").exists() or sys.platform not in {"linux", "darwin"}


def test_workerd_stays_the_one_the_offline_python_bundle_accepts() -> None:
    assert PACKAGE_JSON["devDependencies"]["workerd"] == WORKERD_FOR_THE_PYTHON_BUNDLE
    assert npm_version("workerd") == WORKERD_FOR_THE_PYTHON_BUNDLE
    miniflare = json.loads((NODE_MODULES / "miniflare" / "package.json").read_text())
    assert miniflare["dependencies"]["workerd"] == WORKERD_FOR_THE_PYTHON_BUNDLE
