"""What the tests run is what Cloudflare runs: interpreter, packages and deploy tools.

`pywrangler deploy` (workers-py) vendors `[project].dependencies` for the Python that
wrangler.toml's date selects (3.14 from 2026-09-08): `uv pip compile pyproject.toml` for the
`cpython-3.14.2-emscripten-wasm32-musl` target with the Pyodide 314.0.7 index as an extra
index and `--index-strategy unsafe-best-match` (pywrangler/resolve.py `_compile_lockfile`,
utils.py `get_pyodide_index`). The extra index comes before PyPI, so a version both carry is
the index's; a version only PyPI carries comes from PyPI if it has a wheel for the target
(pydantic-core's `pyemscripten_2026_0_wasm32`). These tests fail when the versions the deploy
would upload differ from the ones uv.lock installs and the real-workerd tier runs. Why each
pin is what it is: docs/pyodide.md "Versions".
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import tomllib
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT, require_node_tools
from tests.pyodide import pyodide314
from tests.worker_dependencies import canonical, worker_closure

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
UV_LOCK = tomllib.loads((PROJECT_ROOT / "uv.lock").read_text(encoding="utf-8"))
PACKAGE_JSON = json.loads((PROJECT_ROOT / "package.json").read_text(encoding="utf-8"))
WRANGLER_TOML = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text(encoding="utf-8"))
NODE_MODULES = PROJECT_ROOT / "node_modules"

# What Cloudflare runs from 2026-09-08 (python_workers_314): Python 3.14; pywrangler vendors
# from the Pyodide 314.0.7 index, whose package set is npm pyodide 314.0.7's lock.
DEPLOY_PYTHON = "3.14"
PYODIDE_INDEX = "314.0.7"
EMSCRIPTEN_WHEEL = "-cp314-cp314-pyemscripten_2026_0_wasm32.whl"
# workerd releases the offline Python bundles fit (later ones verify checksums or changed the
# layout): 3.13 (../shared/workerd-python, the start-up benchmark's 3.13 side, the RPC probe)
# and the 3.14 development bundle (../shared/workerd-python/dev-314, the real-workerd tier).
WORKERD_FOR_313 = "1.20260426.1"
WORKERD_FOR_314 = "1.20260822.1"
# The one compiled package the real-workerd tier cannot load (no wheel offline): a stub there.
STUBBED_IN_WORKERD = {"numpy"}


def locked_versions() -> dict[str, str]:
    return {canonical(p["name"]): p["version"] for p in UV_LOCK["package"]}


def pins() -> dict[str, str]:
    """`name==version` of [project].dependencies and [tool.uv].constraint-dependencies."""
    found = {}
    for requirement in [
        *PYPROJECT["project"]["dependencies"],
        *PYPROJECT["tool"]["uv"]["constraint-dependencies"],
    ]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.]*)", requirement)
        assert match, f"{requirement!r}: the Worker's packages are pinned with =="
        found[canonical(match.group(1))] = match.group(2)
    return found


def pyodide_314_lock() -> dict[str, Any]:
    path = NODE_MODULES / "pyodide-314" / "pyodide-lock.json"
    if not path.exists():
        require_node_tools()
        pytest.skip("node_modules/pyodide-314 is missing: run `npm ci`")
    lock: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return lock


def npm_version(package: str) -> str:
    path = NODE_MODULES / package / "package.json"
    if not path.exists():
        require_node_tools()
        pytest.skip(f"node_modules/{package} is missing: run `npm ci`")
    version: str = json.loads(path.read_text(encoding="utf-8"))["version"]
    return version


def compiled(name: str) -> bool:
    """uv.lock holds platform wheels for it (not only `none-any`)."""
    package = next(p for p in UV_LOCK["package"] if canonical(p["name"]) == name)
    return any(not w["url"].endswith("-none-any.whl") for w in package.get("wheels", []))


def test_the_whole_closure_is_pinned_to_its_locked_version() -> None:
    """pywrangler resolves with uv from the project folder, so the constraints apply there
    too: every package the Worker carries is pinned, at the version uv.lock installs."""
    locked, pinned = locked_versions(), pins()
    closure = worker_closure()
    assert closure - set(pinned) == set(), "pin these in pyproject.toml"
    assert {name: pinned[name] for name in closure} == {name: locked[name] for name in closure}


def test_pywrangler_resolves_for_python_314_from_the_pyodide_314_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    utils = pytest.importorskip("pywrangler.utils")
    resolve = pytest.importorskip("pywrangler.resolve")
    monkeypatch.chdir(PROJECT_ROOT)  # it reads wrangler.toml from the project root
    utils.get_python_version.cache_clear()
    assert utils.get_python_version() == DEPLOY_PYTHON
    assert utils.get_pyodide_index().endswith(f"/{PYODIDE_INDEX}")
    python = pyodide_314_lock()["info"]["python"]
    assert utils.get_uv_pyodide_interp_name() == f"cpython-{python}-emscripten-wasm32-musl"
    assert npm_version("pyodide-314") == PYODIDE_INDEX
    # The resolution these tests assume: the index before PyPI, the best version of the two.
    source = inspect.getsource(resolve._compile_lockfile)
    assert '"--extra-index-url",\n            get_pyodide_index()' in source
    assert '"--index-strategy",\n            "unsafe-best-match"' in source


def test_compiled_packages_deploy_at_the_versions_the_tests_run() -> None:
    index = pyodide_314_lock()["packages"]
    locked = locked_versions()
    checked = {}
    for name in sorted(n for n in worker_closure() if compiled(n)):
        version = locked[name]
        if index.get(name, {}).get("version") == version:
            # The index's wheel is uploaded; CPython runs that version, workerd a stub.
            checked[name] = "pyodide index"
            assert name in STUBBED_IN_WORKERD, f"{name}: the tier must run the index's wheel"
            continue
        # Else PyPI's emscripten wheel: uv.lock lists the wheels PyPI has for the version.
        package = next(p for p in UV_LOCK["package"] if canonical(p["name"]) == name)
        wheels = [w["url"].rsplit("/", 1)[-1] for w in package["wheels"]]
        assert any(w.endswith(EMSCRIPTEN_WHEEL) for w in wheels), (
            f"{name} {version}: neither the Pyodide {PYODIDE_INDEX} index nor PyPI has a "
            "wheel for Python Workers: the deploy would fail"
        )
        checked[name] = "pypi"
    assert checked == {"numpy": "pyodide index", "pydantic-core": "pypi"}
    # ... and that wheel, at that version, is the one the real-workerd tier loads.
    tier = (pyodide314.PYDANTIC_CORE, pyodide314.PYDANTIC)
    assert tier == (f"pydantic-core=={locked['pydantic-core']}", f"pydantic=={locked['pydantic']}")
    assert pyodide314.EMSCRIPTEN_PLATFORM in EMSCRIPTEN_WHEEL


def test_npm_pyodide_314_is_the_python_our_compatibility_date_runs() -> None:
    assert PACKAGE_JSON["devDependencies"]["pyodide-314"] == f"npm:pyodide@{PYODIDE_INDEX}"
    assert pyodide_314_lock()["info"]["python"].startswith(f"{DEPLOY_PYTHON}.")
    # python_workers + a date from 2026-09-08 selects Python 3.14 (python_workers_314).
    assert WRANGLER_TOML["compatibility_date"] >= "2026-09-08"
    assert "python_workers" in WRANGLER_TOML["compatibility_flags"]


def test_pinned_wrangler_satisfies_pywrangler() -> None:
    """`pywrangler dev` refuses a wrangler below MIN_WRANGLER_VERSION (cli.py runs
    `check_wrangler_version()` for `dev` only; `deploy` syncs, then runs `npx wrangler deploy`
    whatever its version); `pywrangler sync` needs the internet, so read the constant."""
    utils = pytest.importorskip("pywrangler.utils")
    pinned = PACKAGE_JSON["devDependencies"]["wrangler"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"wrangler is pinned exactly, not {pinned!r}"
    installed = npm_version("wrangler")
    assert installed == pinned
    assert tuple(int(x) for x in installed.split(".")) >= utils.MIN_WRANGLER_VERSION
    # and wrangler runs: npx puts node_modules/.bin (with its Node 22) first on PATH.
    assert (NODE_MODULES / ".bin" / "node").exists() or sys.platform not in {"linux", "darwin"}


def test_workerd_stays_the_ones_the_offline_python_bundles_accept() -> None:
    dev = PACKAGE_JSON["devDependencies"]
    assert (dev["workerd"], dev["workerd-314"]) == (
        WORKERD_FOR_313,
        f"npm:workerd@{WORKERD_FOR_314}",
    )
    assert (npm_version("workerd"), npm_version("workerd-314")) == (
        WORKERD_FOR_313,
        WORKERD_FOR_314,
    )
    miniflare = json.loads((NODE_MODULES / "miniflare" / "package.json").read_text())
    assert miniflare["dependencies"]["workerd"] == WORKERD_FOR_313
