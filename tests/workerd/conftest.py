"""The real-workerd tier: `src/worker/entry.py` as a Python Worker in real workerd, once per
session (docs/pyodide.md, "The real-workerd tier").

`tests/workerd/test_in_workerd.py` has one pytest item per check of `checks.mjs`; the first
of them to run starts `node tests/workerd/harness.mjs` once for every selected check, and each
item then reports its own check. workerd gets its Python runtime offline from
`../shared/workerd-python/` (a bundle only workerd 1.20260426.1 accepts): where that folder,
Node or `node_modules` is missing, or the pinned workerd is not installed, the items skip, or
fail when CI=true.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.conftest import IN_CI, PROJECT_ROOT, require_node_tools
from tests.worker_dependencies import pure_python_modules

# The Python modules there import `js` and run only inside workerd: never collect them.
collect_ignore_glob = ["doubles/*"]

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "harness.mjs"
CHECKS = HERE / "checks.mjs"
DOUBLES = HERE / "doubles"
# The offline Python runtime bundle and its workerd wrapper (read-only, shared by worktrees).
WORKERD_PYTHON = Path(
    os.environ.get("WORKERD_PYTHON_DIR", PROJECT_ROOT.parent / "shared" / "workerd-python")
)
# The only workerd release that accepts that bundle (later ones verify its checksum against
# Cloudflare's): package.json pins the npm `workerd` package to it, whatever miniflare or
# wrangler bring along.
PINNED_WORKERD = "1.20260426.1"
MAIN_MODULE = "worker/entry.py"
# Not a timed assertion: a guard turning a hung harness into a failure with its log.
HARNESS_GUARD_SECONDS = 300.0
CHECK_LINE = re.compile(r'^check\("([a-z0-9_]+)"', re.MULTILINE)


def check_ids() -> list[str]:
    """Every check id, read from checks.mjs (`check("<id>", ...)` at the start of a line)."""
    return CHECK_LINE.findall(CHECKS.read_text(encoding="utf-8"))


def _unavailable(reason: str) -> NoReturn:
    if IN_CI:
        pytest.fail(f"CI needs the real-workerd tier: {reason}")
    pytest.skip(reason)


def pinned_workerd_binary() -> Path:
    """The native binary of the npm `workerd` package pinned in package.json.

    Looked up beside that package (npm nests it there when miniflare or wrangler hoist
    another release) before the hoisted one, and checked to be `PINNED_WORKERD`.
    """
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), "unsupported")
    arch = {"x86_64": "64", "AMD64": "64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine(), "unsupported"
    )
    package = f"workerd-{system}-{arch}"
    modules = PROJECT_ROOT / "node_modules"
    for folder in (
        modules / "workerd" / "node_modules" / "@cloudflare" / package,
        modules / "@cloudflare" / package,
    ):
        manifest = folder / "package.json"
        if not manifest.exists():
            continue
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
        if version == PINNED_WORKERD:
            return folder / "bin" / "workerd"
    _unavailable(f"npm @cloudflare/{package} {PINNED_WORKERD} is not installed: run `npm ci`")


def require_workerd_python() -> Path:
    """The wrapper script of ../shared/workerd-python, or skip/fail (CI) without it."""
    require_node_tools()
    wrapper = WORKERD_PYTHON / "workerd"
    if not wrapper.exists():
        _unavailable(f"{WORKERD_PYTHON} (workerd's offline Python runtime) is missing")
    return wrapper


def vendored_paths() -> dict[str, str]:
    """The pure-Python packages the deployed bundle carries in python_modules/ (pywrangler
    vendors `[project].dependencies`): the workers SDK, httpx & co., PyJWT... from this venv.
    Not pydantic: its core is compiled (doubles/pydantic stands in)."""
    return pure_python_modules(exclude=["pydantic"])


def worker_config(selected: list[str] | None) -> dict[str, Any]:
    """What the harness needs from wrangler.toml and this machine."""
    wrangler = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text(encoding="utf-8"))
    main = wrangler["main"]
    assert main == f"src/{MAIN_MODULE}" and wrangler["base_dir"] == "src", (
        "the tier assembles the Worker as wrangler does for main = src/worker/entry.py, "
        f"base_dir = src; wrangler.toml now says main = {main}"
    )
    return {
        "src": str(PROJECT_ROOT / "src"),
        "doubles": str(DOUBLES),
        "vendored": vendored_paths(),
        "main": MAIN_MODULE,
        "compatibilityDate": wrangler["compatibility_date"],
        "compatibilityFlags": wrangler["compatibility_flags"],
        "vars": {name: str(value) for name, value in wrangler["vars"].items()},
        "crons": wrangler["triggers"]["crons"],
        "select": selected,
    }


class WorkerdRun:
    """The results of the one harness run of this session, by check id."""

    def __init__(self, selected: list[str]) -> None:
        self.selected = selected
        self.results: dict[str, dict[str, Any]] = {}
        self.registered: list[str] = []
        self.failure: str | None = None
        self.answer: dict[str, Any] = {}
        self.stderr = ""

    def run(self, wrapper: Path, binary: Path) -> None:
        environment = {
            **os.environ,
            "MINIFLARE_WORKERD_PATH": str(wrapper),
            "WORKERD_BIN": str(binary),
        }
        with tempfile.TemporaryDirectory(prefix="workerd-tier-") as folder:
            config_path = Path(folder) / "config.json"
            config_path.write_text(json.dumps(worker_config(self.selected)), encoding="utf-8")
            try:
                done = subprocess.run(
                    ["node", str(HARNESS), str(config_path)],
                    cwd=PROJECT_ROOT,
                    env=environment,
                    capture_output=True,
                    text=True,
                    timeout=HARNESS_GUARD_SECONDS,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                self.failure = f"the workerd harness did not finish: {exc}"
                return
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        answer = json.loads(lines[-1]) if lines else {"ok": False, "error": "no answer"}
        if not answer.get("ok"):
            self.failure = (
                f"the workerd harness failed (exit {done.returncode}): {answer.get('error')}\n"
                f"--- harness stderr ---\n{done.stderr[-8000:]}"
            )
            return
        self.answer = answer
        self.registered = answer["registered"]
        self.results = {item["id"]: item for item in answer["results"]}
        self.stderr = done.stderr


@pytest.fixture(scope="session")
def workerd_run(request: pytest.FixtureRequest) -> WorkerdRun:
    """The session's one harness run, over the checks this session selected."""
    wrapper = require_workerd_python()
    binary = pinned_workerd_binary()
    selected = sorted(
        {
            item.callspec.params["check_id"]
            for item in request.session.items
            if hasattr(item, "callspec") and "check_id" in item.callspec.params
        }
    )
    run = WorkerdRun(selected)
    run.run(wrapper, binary)
    return run
