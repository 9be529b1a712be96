"""Shared fixtures: a local runtime in a temporary state folder, and node tooling checks."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from local_runtime.runtime import LocalRuntime

# Before numpy loads: the suite runs one test process per core (xdist), and OpenBLAS's
# default of a thread per core in each of them oversubscribes the machine; its spinning
# threads made an SVD of the vector-index projection 3-5x slower (27 s -> 8 s for
# tests/contracts/test_vectorize_projection.py under load). Set it yourself to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# With PYTHONDONTWRITEBYTECODE set (this machine sets it, and CI inherits it), every Python
# process of a run compiled the app's libraries from source again: each xdist worker, and
# each CLI, dev server and benchmark a test starts. The run keeps their bytecode in one
# folder outside the source tree instead (PYTHONPYCACHEPREFIX: no __pycache__ beside any
# source, and Python still checks each file against its source). This module loads before
# xdist starts its workers, so they inherit it.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(PROJECT_ROOT / ".pytest_cache" / "pycache"))

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


NODE_BIN = PROJECT_ROOT / "node_modules" / ".bin"


def wrangler_command(*args: str) -> list[str]:
    """The project's wrangler, run by the Node 22 that `npm ci` installs beside it.

    wrangler >= 4.127.1 (what pywrangler requires) refuses Node < 22, and the README promises
    that tests run on Node 20: `package.json` lists Node 22 itself as an optional dependency
    (`node-<platform>-<arch>`), linked as `node_modules/.bin/node`. `npx` puts that folder
    first on PATH, so `npx wrangler` (and pywrangler, which calls it) gets Node 22 too.
    """
    node = NODE_BIN / "node"
    wrangler = PROJECT_ROOT / "node_modules" / "wrangler" / "bin" / "wrangler.js"
    return [str(node) if node.exists() else "node", str(wrangler), *args]


def _set_node_id(item: pytest.Item, nodeid: str) -> None:
    """Give `item` the id `nodeid`, on the pytest 9.2 structured id (`Node._id`, a
    `NodeId` whose `parse` keeps the string as given) or the older `_nodeid` string."""
    current = getattr(item, "_id", None)
    if current is None or isinstance(current, str):
        item._nodeid = nodeid  # type: ignore[attr-defined]
    else:
        item._id = type(current).parse(nodeid)  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep test ids what pytest-xdist schedules by, on pytest 9.2 (whose `Node.nodeid`
    comes from a structured `_id`, no longer from the `_nodeid` string that plugins write).

    * schemathesis names each generated item `test[<METHOD> <path>]` but pytest 9.2 builds
      the id from the function's name alone, so the 54 operations of
      tests/hardening/test_openapi.py shared one id and xdist ran only the first of them:
      such an item gets back the id of its own name.
    * `--dist loadgroup` groups by an `@<group>` suffix that xdist 3.8 writes to
      `_nodeid` (pytest-dev/pytest-xdist#1386), so every `xdist_group` was ignored and
      each worker started its own Node harness (Pyodide, workerd): the suffix is written
      here when xdist's did not take. Runs last, after xdist's own hook and the markers
      the conftests add; a no-op once pytest or xdist does it again.
    """
    # Slow tests first (a stable sort): xdist hands out the tests outside a group in this
    # order, and the start-up benchmark's ~60 s smoke run, collected near the end, kept its
    # worker busy 17-34 s after the other had finished.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    counts: dict[str, int] = {}
    for item in items:
        counts[item.nodeid] = counts.get(item.nodeid, 0) + 1
    for item in items:
        if counts[item.nodeid] > 1 and item.parent is not None:
            own = f"{item.parent.nodeid}::{item.name}"
            if own != item.nodeid:
                _set_node_id(item, own)
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted(
            {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
        )
        suffix = f"@{'_'.join(names)}"
        if names and not item.nodeid.endswith(suffix):
            _set_node_id(item, item.nodeid + suffix)


@pytest.fixture(autouse=True)
def _fresh_isolate_directory() -> None:
    """Each test is a new deployment: no tenant home cached from another test's runtime."""
    from agent_memory.directory import forget_cached_homes

    forget_cached_homes()


class MigratedTemplate:
    """One D1 database with every migration applied, built once per test process by the
    local runtime's own runner, and copied into each new state folder as each shard's.

    A fresh local runtime applied every migration to each of its two shards' databases in
    every test that opened one (~0.1 s of DDL each time, ~1,400 times a suite); a copy of
    the file that the same runner produced is the same schema, in milliseconds. Only the D1
    files are copied: keys (Access, memory tokens, personal-data KEKs) stay generated per
    folder, as each folder is its own deployment. The runtime's own `migrate()` still runs
    in the tests and finds everything applied; the runner itself is tested on fresh
    databases in tests/test_migrations.py, against wrangler in
    tests/test_d1_migrations_wrangler.py, and by every `agent-memory` subprocess (dev
    server, CLI), which migrates its fresh folder for real.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.enabled = True
        self._file: Path | None = None

    def database(self) -> Path:
        if self._file is None:
            import asyncio

            from local_runtime.adapters.d1 import SqliteD1
            from local_runtime.migrations import apply_migrations
            from local_runtime.runtime import MIGRATIONS_DIR

            path = self.folder / "d1.sqlite"
            db = SqliteD1(path)
            try:
                asyncio.run(apply_migrations(db, MIGRATIONS_DIR))
                db.checkpoint()  # everything in the main file: no -wal to copy
            finally:
                db.close()
            self._file = path
        return self._file

    def seed(self, root: Path) -> None:
        """Copy the migrated database to each default shard's D1 file under `root`."""
        from bindings.settings import Settings
        from local_runtime.runtime import LOCAL_VARS
        from local_runtime.state import StateDir

        state = StateDir(root)
        for name, _, _ in Settings.from_vars(LOCAL_VARS).shards:
            shutil.copyfile(self.database(), state.d1_of(name))


@pytest.fixture(scope="session", autouse=True)
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MigratedTemplate]:
    """Every state folder a test creates (`StateDir.create` on a missing or empty folder)
    starts with migrated D1 files (`MigratedTemplate`). A test that needs a folder as a
    first start finds it uses the `real_migrations` fixture."""
    from local_runtime.state import StateDir

    template = MigratedTemplate(tmp_path_factory.mktemp("migrated-d1"))
    template.database()  # now, outside any test's event loop
    create = StateDir.create.__func__  # type: ignore[attr-defined]

    def create_seeded(cls: type[StateDir], root: Path | str) -> StateDir:
        path = Path(root).resolve()
        fresh = not path.exists() or not any(path.iterdir())
        state: StateDir = create(cls, root)
        if fresh and template.enabled:
            template.seed(state.root)
        return state

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StateDir, "create", classmethod(create_seeded))
        yield template


@pytest.fixture
def real_migrations(migrated_template: MigratedTemplate) -> Iterator[None]:
    """State folders created in this test start empty: the runtime migrates them itself."""
    migrated_template.enabled = False
    try:
        yield
    finally:
        migrated_template.enabled = True


@pytest.fixture(scope="session", autouse=True)
def dev_access_keys_parsed_once() -> Iterator[None]:
    """The dev Access key of a state folder is parsed once per test process, and without
    re-checking its RSA arithmetic, not at every token minted or JWKS served.

    `local_runtime.access_dev` reads its PEM file at each `mint_token` and each JWKS request
    (so a key created by another process is picked up) and `cryptography` validates an
    RSA-2048 private key on every load: ~50 ms each, over half the time of the tests that
    call the API as an operator. The same bytes give the same key, so the load is memoised
    by the file's bytes: a new folder's key (or a changed file) is a new entry. And that
    check (`unsafe_skip_rsa_key_validation`) is skipped: the file is one `cryptography`
    generated for the folder, never input under test; a malformed PEM or another key type
    is still refused as before. Key generation stays per folder.
    """
    import functools
    import types

    from local_runtime import access_dev

    real = access_dev.serialization

    @functools.lru_cache(maxsize=256)
    def load_pem_private_key(data: bytes, password: bytes | None = None) -> object:
        return real.load_pem_private_key(data, password, unsafe_skip_rsa_key_validation=True)

    parsing = types.ModuleType(real.__name__)
    parsing.__dict__.update(vars(real))
    parsing.load_pem_private_key = load_pem_private_key
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(access_dev, "serialization", parsing)
        yield


def require_node_tools() -> None:
    """Skip (outside CI) or fail (in CI) when Node or the npm dev tools are missing."""
    missing = []
    if shutil.which("node") is None:
        missing.append("node is not on PATH")
    if not (NODE_BIN / "wrangler").exists():
        missing.append("node_modules is missing: run `npm ci`")
    if missing:
        reason = "; ".join(missing)
        if IN_CI:
            pytest.fail(f"CI needs the Node tools: {reason}")
        pytest.skip(reason)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[LocalRuntime]:
    """A migrated local runtime with a fast deterministic embedder (no model load)."""
    from local_runtime.runtime import LocalRuntime
    from tests.fakes.embedder import HashingEmbedder

    rt = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    await rt.migrate()
    yield rt
    await rt.close()
