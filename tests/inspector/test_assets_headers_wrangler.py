"""Issue 26, finding 2, on Workers Static Assets itself: `wrangler dev` (real workerd, the
asset server Cloudflare runs) serves `public/` with the project's `[assets]` settings and
applies `public/_headers` to the inspector's files, and does not serve `_headers`.

The Worker is a stub (a Python Worker is not needed to prove what the asset server does):
this pins the `_headers` syntax Cloudflare parses, not our local imitation of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local_runtime.server import free_port
from local_runtime.static_assets import ASSETS_DIR
from tests.conftest import PROJECT_ROOT, require_node_tools, wrangler_command
from tests.inspector.test_security_headers import assert_not_frameable

pytestmark = pytest.mark.xdist_group("wrangler_assets")

CONFIG_TOML = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text())

START_SECONDS = 90


@pytest.fixture(scope="module")
def wrangler_assets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_node_tools()
    assets = CONFIG_TOML["assets"]
    folder = tmp_path_factory.mktemp("assets")
    (folder / "worker.js").write_text(
        'export default { fetch() { return new Response("the worker", { status: 404 }); } };\n'
    )
    (folder / "wrangler.toml").write_text(
        'name = "assets-headers"\nmain = "worker.js"\ncompatibility_date = "2026-04-21"\n'
        f'[assets]\ndirectory = "{ASSETS_DIR}"\nhtml_handling = "{assets["html_handling"]}"\n'
    )
    port = free_port()
    log = (folder / "wrangler.log").open("wb")
    env = {**os.environ, "WRANGLER_SEND_METRICS": "false", "CI": "1"}
    process = subprocess.Popen(
        wrangler_command(
            "dev",
            "-c",
            str(folder / "wrangler.toml"),
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            # Its own devtools port: the default (9229) is taken by any other wrangler dev or
            # workerd the suite runs at the same time, and then this one exits at start.
            "--inspector-port",
            str(free_port()),
            "--persist-to",  # not the project's .wrangler/, which other wrangler tests use
            str(folder / "state"),
        ),
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:  # wrangler offers no readiness signal but its port
            try:
                httpx.get(base + "/", timeout=1.0)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (folder / "wrangler.log").read_text(errors="replace")[-2000:]
                    pytest.fail(f"wrangler dev did not start:\n{tail}")
                time.sleep(0.2)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


@pytest.mark.parametrize("path", ["/admin/ui/", "/admin/ui/app.js", "/admin/ui/style.css"])
def test_workers_static_assets_apply_the_headers_file(wrangler_assets: str, path: str) -> None:
    response = httpx.get(wrangler_assets + path)
    assert response.status_code == 200, path
    assert_not_frameable(response.headers, path)
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_workers_static_assets_do_not_serve_the_headers_file(wrangler_assets: str) -> None:
    response = httpx.get(wrangler_assets + "/_headers")
    assert response.text == "the worker"  # not an asset: the Worker answered


def test_the_stub_config_uses_the_projects_assets_folder() -> None:
    assert (PROJECT_ROOT / CONFIG_TOML["assets"]["directory"]).resolve() == Path(ASSETS_DIR)
