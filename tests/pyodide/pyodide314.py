"""Pyodide 314 (npm `pyodide-314`, Python 3.14, what the Worker runs) with pydantic-core's
`pyemscripten_2026_0_wasm32` wheel from PyPI: the wheels both the real-workerd tier
(tests/workerd) and the start-up benchmark (benchmarks/startup.py, in Pyodide under Node)
load, at the versions uv.lock pins and the deploy uploads (pyproject.toml).

`ensure_wheels()` downloads them by name from PyPI (`pip download`) into the gitignored
`.cache/pyodide-314/` when missing and unpacks them; `run_harness(config)` runs
`tests/pyodide/real_app.mjs` once and returns its JSON answer. numpy is the one stub
(`py314/numpy_stub.py`): Pyodide's numpy wheel is on its CDN only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from tests.worker_dependencies import pure_python_modules

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
HARNESS = HERE / "real_app.mjs"
IN_PYODIDE = HERE / "py314"
CACHE = ROOT / ".cache" / "pyodide-314"
PYODIDE_314 = ROOT / "node_modules" / "pyodide-314" / "pyodide.asm.wasm"
NODE_22 = ROOT / "node_modules" / ".bin" / "node"


def locked(name: str) -> str:
    """`name==<version uv.lock installs>`: the version the deploy uploads too (pyproject.toml)."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    return f"{name}=={next(p['version'] for p in lock['package'] if p['name'] == name)}"


# pydantic-core's emscripten wheel for Pyodide 314 (PyPI) and pydantic, at the locked versions.
PYDANTIC_CORE = locked("pydantic-core")
PYDANTIC = locked("pydantic")
EMSCRIPTEN_PLATFORM = "pyemscripten_2026_0_wasm32"
# Not a timed assertion: turns a hung harness into a failure with its log.
GUARD_SECONDS = 300.0


class HarnessUnavailable(Exception):
    """Node, Pyodide 314 or the wheels are missing here (skip, or fail in CI)."""


def dependency_paths() -> dict[str, str]:
    """Where each pure-Python dependency lives on this machine (package dir or module file):
    the Worker's, as the deploy vendors them, but pydantic (downloaded for Pyodide 314)."""
    return pure_python_modules(exclude=["pydantic"])


def _pip() -> list[str]:
    """A pip to download with: this interpreter's, else the one of the Python its venv was
    made from (uv's venvs have no pip), else pip run by `uv tool run`."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    for python in (sys.executable, str(base)):
        probe = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [python, "-m", "pip"]
    uv = shutil.which("uv")
    if uv is not None:
        return [uv, "tool", "run", "pip"]
    raise HarnessUnavailable("no pip to download pydantic-core's emscripten wheel with")


def _download(requirement: str, folder: Path, *platform: str) -> Path:
    name = requirement.split("==")[0].replace("-", "_")
    version = requirement.split("==")[1]
    found = sorted(folder.glob(f"{name}-{version}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    options = ["--quiet", "--no-deps", "--only-binary=:all:", "-d", str(folder), *platform]
    done = subprocess.run(
        [*_pip(), "download", *options, requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    found = sorted(folder.glob(f"{name}-{version}-*.whl"))
    if done.returncode != 0 or not found:
        raise HarnessUnavailable(f"could not download {requirement}: {done.stderr[-2000:]}")
    return found[0]


def ensure_wheels() -> Path:
    """The folder holding pydantic and pydantic-core unpacked for Pyodide 314 (site-packages)."""
    site = CACHE / "site"
    marker = site / f"{PYDANTIC}+{PYDANTIC_CORE}.unpacked"
    if marker.exists():
        return site
    wheels = CACHE / "wheels"
    core = _download(
        PYDANTIC_CORE,
        wheels,
        "--platform",
        EMSCRIPTEN_PLATFORM,
        "--python-version",
        "3.14",
        "--implementation",
        "cp",
    )
    pure = _download(PYDANTIC, wheels)
    # Unpacked beside and renamed into place, so a concurrent run never sees half a tree.
    staging = Path(tempfile.mkdtemp(prefix="site-", dir=CACHE))
    for wheel in (core, pure):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(staging)
    (staging / marker.name).write_text("")
    if site.exists() and not marker.exists():
        shutil.rmtree(site)  # an older pin's tree
    try:
        staging.rename(site)
    except OSError:  # another run put it there first
        shutil.rmtree(staging)
    return site


def node() -> str:
    """Node 22 from node_modules (Pyodide 314 wants it), else the `node` on PATH."""
    if NODE_22.exists():
        return str(NODE_22)
    found = shutil.which("node")
    if found is None:
        raise HarnessUnavailable("node is not on PATH")
    return found


def base_config() -> dict[str, Any]:
    """What every harness run mounts: src/, the in-Pyodide code, the wheels, the venv deps."""
    if not PYODIDE_314.exists():
        raise HarnessUnavailable("node_modules/pyodide-314 is missing: run `npm ci`")
    return {
        "src": str(ROOT / "src"),
        "inPyodide": str(IN_PYODIDE),
        "site": str(ensure_wheels()),
        "deps": dependency_paths(),
    }


def run_harness(config: dict[str, Any]) -> dict[str, Any]:
    """Run `real_app.mjs` once with `config` (plus `base_config()`); its JSON answer.

    Raises RuntimeError (with the harness's stderr) when it did not answer `ok`.
    """
    full = {**base_config(), **config}
    with tempfile.TemporaryDirectory(prefix="pyodide-314-") as folder:
        path = Path(folder) / "config.json"
        path.write_text(json.dumps(full), encoding="utf-8")
        try:
            done = subprocess.run(
                [node(), str(HARNESS), str(path)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=GUARD_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"the Pyodide 314 harness did not finish: {exc}") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    answer: dict[str, Any] = json.loads(lines[-1]) if lines else {"ok": False}
    if not answer.get("ok"):
        raise RuntimeError(
            f"the Pyodide 314 harness failed (exit {done.returncode}): {answer.get('error')}\n"
            f"--- harness stderr ---\n{done.stderr[-8000:]}"
        )
    return answer
