"""Run the in-Pyodide tests (tests/pyodide/py/test_*.py) once per session under Node.

`tests/pyodide/test_in_pyodide.py` has one pytest item per in-Pyodide test; the first of
them to run starts `node tests/pyodide/harness.mjs` once for every selected item, and each
item then reports its own result (a failure names the in-Pyodide test and carries its
traceback). Without Node or `node_modules` the items skip, or fail when CI=true
(`tests.conftest.require_node_tools`).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, PROJECT_ROOT, require_node_tools
from tests.pyodide import pyodide314
from tests.worker_dependencies import pure_python_modules

# The in-Pyodide modules import `js`, `pyodide` and the harness: never collect them here.
collect_ignore_glob = ["py/*", "py314/*"]

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "harness.mjs"
PY_TESTS = HERE / "py"
# Always run: their results are compared with the fake's (test_fake_matches_pyodide.py).
FAKE_PIN_ID = "test_fake_pin.py::test_scenario_transcript_on_workerd"
WAIT_UNTIL_PIN_ID = "test_background.py::test_wait_until_outcomes_by_context_and_scheduling"
# Not a timed assertion: a guard turning a hung harness into a failure with its log.
HARNESS_GUARD_SECONDS = 600.0


def dependency_paths() -> dict[str, str]:
    """The Worker's pure-Python dependencies (httpx & co., the workers SDK, PyJWT,
    fastjsonschema...), taken from this venv as the deploy vendors them (Pyodide's own copies
    come from its CDN, which the tests never reach). Not pydantic: its core is compiled."""
    return pure_python_modules(exclude=["pydantic"])


def compatibility_date() -> str:
    from tests.miniflare.session import compatibility_date as from_wrangler

    return from_wrangler()


class PyodideRun:
    """The results of the one harness run of this session, by in-Pyodide test id."""

    def __init__(self, selected: list[str]) -> None:
        self.selected = selected
        self.results: dict[str, dict[str, Any]] | None = None
        self.failure: str | None = None
        self.versions: dict[str, str] = {}

    def run(self) -> None:
        config = {
            "src": str(PROJECT_ROOT / "src"),
            "tests": str(PY_TESTS),
            "deps": dependency_paths(),
            "compatibilityDate": compatibility_date(),
            "select": self.selected,
        }
        with tempfile.TemporaryDirectory(prefix="pyodide-harness-") as folder:
            config_path = Path(folder) / "config.json"
            config_path.write_text(json.dumps(config), encoding="utf-8")
            try:
                done = subprocess.run(
                    [pyodide314.node(), str(HARNESS), str(config_path)],
                    cwd=PROJECT_ROOT,
                    capture_output=True,
                    text=True,
                    timeout=HARNESS_GUARD_SECONDS,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                self.failure = f"the Pyodide harness did not finish: {exc}"
                return
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        answer = json.loads(lines[-1]) if lines else {"ok": False, "error": "no answer"}
        if not answer.get("ok"):
            self.failure = (
                f"the Pyodide harness failed (exit {done.returncode}): {answer.get('error')}\n"
                f"--- harness stderr ---\n{done.stderr[-8000:]}"
            )
            return
        self.versions = {"python": answer["python"], "pyodide": answer["pyodide"]}
        self.results = {item["id"]: item for item in answer["results"]}


def in_pyodide_ids() -> list[str]:
    """Every in-Pyodide test id, found statically (the runner's own discovery)."""
    spec = importlib.util.spec_from_file_location("pyodide_runner", PY_TESTS / "runner.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [f"{filename}::{name}" for filename, names in module.discover() for name in names]


def require_pyodide() -> None:
    require_node_tools()
    if not pyodide314.PYODIDE_314.exists():
        reason = "node_modules/pyodide-314 is missing: run `npm ci`"
        if IN_CI:
            pytest.fail(f"CI needs the Node tools: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def pyodide_run(request: pytest.FixtureRequest) -> PyodideRun:
    """The session's one harness run, over the in-Pyodide tests this session selected."""
    require_pyodide()
    selected = sorted(
        {
            item.callspec.params["test_id"]
            for item in request.session.items
            if hasattr(item, "callspec") and "test_id" in item.callspec.params
        }
    )
    run = PyodideRun(sorted({*selected, FAKE_PIN_ID, WAIT_UNTIL_PIN_ID}))
    run.run()
    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here shares the session's one harness run: keep them on one xdist worker
    (pytest runs with `--dist loadgroup`), or each worker would start its own Node."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("pyodide"))
