"""The official TypeScript MCP SDKs from npm against the local dev server (issue 42): one pytest
item per check of tests/mcp_sdk/typescript.mjs, all run by one Node process.

`@modelcontextprotocol/sdk` 1.32.2 (the 1.x line) and `@modelcontextprotocol/client` 2.4.0 (the
v2 client line), pinned in package.json: an API key, each SDK's own OAuth client with DCR and
with a client metadata document (served over HTTPS on loopback, listing port-less loopback
redirects, while the Node process listens on a port the OS picked), store and recall, a
refresh with rotation, per revision (2025-06-18 and 2026-07-28 need the v2 client); and the v2
client bundled into a page that Debian's Chromium runs on another origin (CORS preflights).
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import subprocess
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway import admin_ops
from local_runtime.access_dev import DevAccessTransport, mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server, serving_in_thread
from tests.conftest import PROJECT_ROOT, require_node_tools
from tests.fakes.embedder import HashingEmbedder
from tests.inspector.browser import chromium_driver, wait_for
from tests.oauth.test_sdk_oauth import serving_document

SCRIPT = PROJECT_ROOT / "tests" / "mcp_sdk" / "typescript.mjs"
CHECKS = [
    "sdk-1.x api key 2025-11-25",
    "sdk-1.x oauth dcr 2025-11-25, refresh rotates",
    "sdk-1.x oauth client metadata document 2025-11-25",
    "client-2.x api key 2025-06-18",
    "client-2.x api key 2025-11-25",
    "client-2.x api key 2026-07-28",
    "client-2.x oauth dcr 2026-07-28, refresh rotates",
    "client-2.x oauth client metadata document 2025-06-18",
]


async def _seed(runtime: LocalRuntime) -> str:
    await runtime.migrate()
    await admin_ops.create_tenant(runtime.kv, runtime.clock, "acme", memory_enabled=True)
    return (await admin_ops.issue_api_key(runtime.kv, runtime.clock, "acme")).api_key


@pytest.fixture(scope="module")
def typescript_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    require_node_tools()
    folder = tmp_path_factory.mktemp("typescript-sdks")
    runtime = LocalRuntime.open(folder / "state", embedder=HashingEmbedder())
    api_key = asyncio.run(_seed(runtime))
    access = mint_token(runtime.state.access, "ops@example.com", now=time.time())
    with serving_document(Path(folder), "TypeScript SDK (CIMD)") as (document, cert):
        trusted = ssl.create_default_context(cafile=str(cert))
        runtime.http_transport = DevAccessTransport(
            runtime.state.access, fallback=httpx.AsyncHTTPTransport(verify=trusted)
        )
        with running_server(runtime) as base:
            config = {"base": base, "apiKey": api_key, "access": access, "document": document}
            done = subprocess.run(
                ["node", str(SCRIPT), json.dumps(config)],
                capture_output=True,
                text=True,
                timeout=240,
                cwd=PROJECT_ROOT,
                check=False,
            )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    return {r["id"]: r for r in results}


@pytest.mark.xdist_group("typescript-sdks")
@pytest.mark.parametrize("check", CHECKS)
def test_typescript_sdk(check: str, typescript_results: dict[str, dict[str, Any]]) -> None:
    assert set(typescript_results) == set(CHECKS)
    result = typescript_results[check]
    assert result["outcome"] == "passed", result["message"]


async def _static(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    """The browser client's page and bundle (`PAGE_FILES`), from another origin than /mcp."""
    if scope["type"] != "http":
        return
    body, kind = PAGE_FILES.get(scope["path"], (b"", "text/plain"))
    headers = [(b"content-type", kind.encode())]
    await send({"type": "http.response.start", "status": 200 if body else 404, "headers": headers})
    await send({"type": "http.response.body", "body": body})


PAGE_FILES: dict[str, tuple[bytes, str]] = {}


@pytest.mark.xdist_group("chromium")
def test_the_v2_client_in_a_browser_passes_the_preflight_from_an_allowed_origin_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 42.2: the official client bundled into a page on another origin; its requests
    carry Authorization, so Chromium preflights each. The same page reached by another host
    name (another origin, not configured) is refused by the browser."""
    require_node_tools()
    driver = chromium_driver(800, 600)
    bundle = tmp_path / "client.js"
    entry = PROJECT_ROOT / "tests" / "mcp_sdk" / "browser.mjs"
    esbuild = PROJECT_ROOT / "node_modules" / ".bin" / "esbuild"
    subprocess.run(
        [str(esbuild), str(entry), "--bundle", "--format=esm", f"--outfile={bundle}"],
        check=True,
        capture_output=True,
        cwd=PROJECT_ROOT,
    )
    PAGE_FILES["/client.js"] = (bundle.read_bytes(), "text/javascript")
    PAGE_FILES["/"] = (b"<!doctype html><script type=module src=/client.js></script>", "text/html")
    try:
        with serving_in_thread(_static, lifespan="off") as page:
            runtime = LocalRuntime.open(
                tmp_path / "state", embedder=HashingEmbedder(), vars={"MCP_ALLOWED_ORIGINS": page}
            )
            api_key = asyncio.run(_seed(runtime))
            with running_server(runtime) as base, caplog.at_level(logging.INFO):
                use = "window.useMemory(arguments[0], arguments[1]).then(arguments[2], "
                use += "(e) => arguments[2]({error: String(e)}))"
                driver.get(page + "/")
                wait_for(driver, lambda d: d.execute_script("return !!window.useMemory"))
                seen = driver.execute_async_script(use, base, api_key)
                assert seen == {
                    "version": "2026-07-28",
                    "tools": ["recall_memory", "store_memory"],
                    "recalled": True,
                }, seen
                # Chromium preflights once per set of headers, then caches it (max-age).
                assert any(r.startswith("OPTIONS /mcp 204") for r in caplog.messages)
                driver.get(page.replace("127.0.0.1", "localhost") + "/")
                wait_for(driver, lambda d: d.execute_script("return !!window.useMemory"))
                refused = driver.execute_async_script(use, base, api_key)
                assert "fetch" in refused["error"].lower(), refused
                assert any(r.startswith("OPTIONS /mcp 403") for r in caplog.messages)
    finally:
        driver.quit()
