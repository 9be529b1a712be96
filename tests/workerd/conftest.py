"""The real-workerd tier: the whole Worker (`src/worker/entry.py` and everything behind it,
real pydantic) as a Python Worker in real workerd, once per session (docs/pyodide.md, "The
real-workerd tier").

`tests/workerd/test_in_workerd.py` has one pytest item per check of `checks.mjs`; the first
of them to run starts `node tests/workerd/harness.mjs` once for every selected check. workerd
runs Python 3.14 from the development bundle in `../shared/workerd-python/dev-314/` (only npm
workerd 1.20260822.1 accepts it; package.json pins it as `workerd-314`). Where that folder,
Node, `node_modules` or pydantic-core's emscripten wheel (PyPI) is missing the items skip, or
fail when CI=true.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any, NoReturn

import pytest

from gateway import admin_ops
from local_runtime.access_dev import DevAccessKeys, access_claims
from local_runtime.adapters.do_sql import split_sql_statements
from local_runtime.migrations import migration_files
from tests.conftest import IN_CI, PROJECT_ROOT, require_node_tools
from tests.pyodide import pyodide314
from tests.worker_dependencies import pure_python_modules

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "harness.mjs"
CHECKS = HERE / "checks.mjs"
# numpy, the one Python double (no Emscripten wheel can be had offline): any use fails.
NUMPY_STUB = PROJECT_ROOT / "tests" / "pyodide" / "py314" / "numpy_stub.py"
WORKERD_PYTHON = Path(
    os.environ.get("WORKERD_PYTHON_DIR", PROJECT_ROOT.parent / "shared" / "workerd-python")
)
DEV_BUNDLE = WORKERD_PYTHON / "dev-314" / "cache"
PACKAGE_CACHE = WORKERD_PYTHON / "pkgcache"
# The only workerd that accepts that (unverified) development bundle; package.json installs
# it as the alias `workerd-314`, beside the `workerd` that Miniflare and wrangler use.
PINNED_WORKERD = "1.20260822.1"
WORKERD_PACKAGE = "workerd-314"
# The newest compatibility date that workerd accepts. The deploy's date (wrangler.toml) is
# later: what the days between turn on is `python_workers_314`, which the development bundle
# stands in for (DEV_BUNDLE_FLAGS), nothing else (docs/pyodide.md "Compatibility flags").
NEWEST_TIER_DATE = "2026-08-29"
DEV_BUNDLE_FLAGS = ["python_workers_development", "no_python_workers_20250116"]
STANDS_IN_FOR = ("python_workers_314", "2026-09-08")
MAIN_MODULE = "worker/entry.py"
HARNESS_GUARD_SECONDS = 400.0
CHECK_LINE = re.compile(r'^check\("([a-z0-9_]+)"', re.MULTILINE)

# Who and what the checks act as (the vars below make them so).
TENANT = "acme"
OPERATOR = "ops@example.com"
TEAM_DOMAIN = "tier.cloudflareaccess.com"
ACCESS_AUD = "agent-memory-tier"
UPSTREAM = "https://tools.example.com/echo"
HOOKS = "https://hooks.example.com/memory"  # a webhook endpoint the outbound stand-in records
TEST_VARS = {
    "ENVIRONMENT": "test",
    "ACCESS_TEAM_DOMAIN": TEAM_DOMAIN,
    "ACCESS_AUD": ACCESS_AUD,
    "PLATFORM_ADMINS": f"email:{OPERATOR}",
    "MEMORY_TOKEN_KEYS": json.dumps({"k1": "workerd-tier-secret-" + "a" * 32}),
    # Seals the change feed's webhook secrets (a test key: 32 bytes of 0x2a).
    "MEMORY_PII_KEKS": "k1:KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=",
}


def check_ids() -> list[str]:
    """Every check id, read from checks.mjs (`check("<id>", ...)` at the start of a line)."""
    return CHECK_LINE.findall(CHECKS.read_text(encoding="utf-8"))


def _unavailable(reason: str) -> NoReturn:
    if IN_CI:
        pytest.fail(f"CI needs the real-workerd tier: {reason}")
    pytest.skip(reason)


def pinned_workerd_binary() -> Path:
    """The native binary of npm `workerd-314` (PINNED_WORKERD), nested beside that alias."""
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), "unsupported")
    arch = {"x86_64": "64", "AMD64": "64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine(), "unsupported"
    )
    folder = (
        PROJECT_ROOT / "node_modules" / WORKERD_PACKAGE / "node_modules" / "@cloudflare"
    ) / f"workerd-{system}-{arch}"
    manifest = folder / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != PINNED_WORKERD:
        _unavailable(f"npm {WORKERD_PACKAGE} ({PINNED_WORKERD}) is not installed: run `npm ci`")
    return folder / "bin" / "workerd"


def tier_date(deploy_date: str) -> str:
    return min(deploy_date, NEWEST_TIER_DATE)


def vendored_paths() -> dict[str, str]:
    """python_modules/ as `pywrangler deploy` fills it: the Worker's pure-Python dependencies
    (and the SDK's .pth) from this venv, pydantic + pydantic-core's `pyemscripten_2026_0`
    wheel unpacked, and numpy's stub."""
    try:
        site = pyodide314.ensure_wheels()
    except pyodide314.HarnessUnavailable as exc:
        _unavailable(str(exc))
    paths = pure_python_modules(exclude=["pydantic"])
    paths.update({entry.name: str(entry) for entry in site.iterdir() if entry.is_dir()})
    paths["numpy.py"] = str(NUMPY_STUB)
    return paths


def d1_statements(migrations_dir: str) -> list[str]:
    folder = PROJECT_ROOT / migrations_dir
    return [s for path in migration_files(folder) for s in split_sql_statements(path.read_text())]


def gateway_seed(now: float) -> tuple[list[tuple[str, str]], str]:
    """The KV writes `agent-memory` admin commands make (the same `plan_*`): a tenant with
    memory on, an `echo` tool at the upstream stand-in, an API key; and the key."""
    _, tenant = admin_ops.plan_create_tenant(TENANT, now=now, memory_enabled=True)
    tool = {
        "name": "echo",
        "description": "Echoes its input",
        "url": UPSTREAM,
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    issued, key = admin_ops.plan_issue_api_key(TENANT, now=now)
    writes = [*tenant, *admin_ops.plan_register_tool(TENANT, tool), *key]
    return [(w.key, w.value) for w in writes], issued.api_key


def worker_config(selected: list[str] | None, folder: Path) -> dict[str, Any]:
    """What the harness needs: the Worker as wrangler + pywrangler assemble it, its bindings
    from wrangler.toml, the seed and the credentials the checks use."""
    wrangler = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text(encoding="utf-8"))
    assert (wrangler["main"], wrangler["base_dir"]) == (f"src/{MAIN_MODULE}", "src"), (
        "the tier assembles the Worker as wrangler does for main = src/worker/entry.py"
    )
    now = time.time()
    keys = DevAccessKeys.load_or_create(folder / "access")
    access = keys.sign(access_claims(OPERATOR, now=now, team_domain=TEAM_DOMAIN, aud=ACCESS_AUD))
    kv_seed, api_key = gateway_seed(now)
    return {
        "src": str(PROJECT_ROOT / "src"),
        "main": MAIN_MODULE,
        "vendored": vendored_paths(),
        "models": str(PROJECT_ROOT / "tests" / "pyodide" / "models.mjs"),
        "deployDate": wrangler["compatibility_date"],
        "compatibilityDate": tier_date(wrangler["compatibility_date"]),
        "compatibilityFlags": [*wrangler["compatibility_flags"], *DEV_BUNDLE_FLAGS],
        "vars": {**{k: str(v) for k, v in wrangler["vars"].items()}, **TEST_VARS},
        "kv": [b["binding"] for b in wrangler["kv_namespaces"]],
        "d1": {
            b["binding"]: d1_statements(b.get("migrations_dir", "migrations"))
            for b in wrangler["d1_databases"]
        },
        "r2": [b["binding"] for b in wrangler["r2_buckets"]],
        "durableObjects": {
            b["name"]: b["class_name"] for b in wrangler["durable_objects"]["bindings"]
        },
        "vectorize": [b["binding"] for b in wrangler["vectorize"]],
        "dimensions": int(wrangler["vars"]["EMBEDDING_DIMENSIONS"]),
        "ai": wrangler["ai"]["binding"],
        "ratelimits": {b["name"]: b["simple"] for b in wrangler["ratelimits"]},
        "queues": wrangler["queues"],
        "hooks": HOOKS,
        "crons": wrangler["triggers"]["crons"],
        "kvSeed": kv_seed,
        "pydantic": pyodide314.PYDANTIC.split("==")[1],
        "tenant": TENANT,
        "apiKey": api_key,
        "access": access,
        "jwks": keys.jwks(),
        "teamDomain": TEAM_DOMAIN,
        "upstream": UPSTREAM,
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

    def run(self, binary: Path) -> None:
        environment = {
            **os.environ,
            "MINIFLARE_WORKERD_PATH": str(HERE / "workerd"),
            "WORKERD_BIN": str(binary),
            "PYODIDE_BUNDLE_DIR": str(DEV_BUNDLE),
            "PYODIDE_PACKAGE_DIR": str(PACKAGE_CACHE),
        }
        with tempfile.TemporaryDirectory(prefix="workerd-tier-") as name:
            folder = Path(name)
            config_path = folder / "config.json"
            config = worker_config(self.selected, folder)
            config_path.write_text(json.dumps(config), encoding="utf-8")
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
        self.stderr = done.stderr
        if not answer.get("ok"):
            self.failure = (
                f"the workerd harness failed (exit {done.returncode}): {answer.get('error')}\n"
                f"--- harness stderr ---\n{done.stderr[-8000:]}"
            )
            return
        self.answer = answer
        self.registered = answer["registered"]
        self.results = {item["id"]: item for item in answer["results"]}


def require_tier() -> Path:
    """The pinned workerd binary, or skip/fail (CI) without the tier's pieces."""
    require_node_tools()
    if not DEV_BUNDLE.is_dir():
        _unavailable(f"{DEV_BUNDLE} (workerd's Python 3.14 development bundle) is missing")
    return pinned_workerd_binary()


@pytest.fixture(scope="session")
def workerd_run(request: pytest.FixtureRequest) -> WorkerdRun:
    """The session's one harness run, over the checks this session selected."""
    binary = require_tier()
    selected = sorted(
        {
            item.callspec.params["check_id"]
            for item in request.session.items
            if hasattr(item, "callspec") and "check_id" in item.callspec.params
        }
    )
    run = WorkerdRun(selected)
    run.run(binary)
    return run
