"""The operator's path end to end: create a tenant, issue a key, store a credential and
register a tool with the CLI, then call the tool through the running local gateway."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from tests.gateway.loopback import running_upstream

CLI = [sys.executable, "-m", "local_runtime.cli"]


def cli(state: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "gateway", *args, "--state", str(state)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def upstream() -> Iterator[str]:
    with running_upstream() as base:
        yield base


def test_operator_sets_up_a_tenant_and_its_key_calls_a_tool(tmp_path: Path, upstream: str) -> None:
    state = tmp_path / "state"
    assert cli(state, "tenant", "create", "acme").returncode == 0
    issued = cli(state, "key", "issue", "acme", "--label", "laptop")
    assert issued.returncode == 0, issued.stderr
    api_key = issued.stdout.strip().splitlines()[-1]
    stored = cli(state, "credential", "set", "acme", "echo", stdin="s3cret\n")
    assert stored.returncode == 0 and "s3cret" not in stored.stdout
    # Sealed at rest with the folder's key-encryption key (issue 26): not in the KV file.
    kv_files = list(state.glob("kv.sqlite*"))
    assert kv_files and all(b"s3cret" not in f.read_bytes() for f in kv_files)
    tool = tmp_path / "tool.json"
    tool.write_text(
        json.dumps(
            {
                "name": "echo",
                "description": "echo",
                "provider": "echo",
                "url": f"{upstream}/echo",
                "method": "GET",
                "auth": {"type": "header", "name": "Authorization", "prefix": "Bearer "},
                "input_schema": {
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                },
            }
        )
    )
    assert cli(state, "tool", "register", "acme", str(tool)).returncode == 0
    listed = json.loads(cli(state, "key", "list", "acme").stdout)
    assert [k["label"] for k in listed] == ["laptop"]
    assert api_key not in json.dumps(listed)  # keys are stored hashed, never shown again

    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())
    with running_server(runtime) as base:
        ok = httpx.post(
            f"{base}/api/v1/tools/echo",
            json={"q": "hi"},
            headers={"Authorization": f"Bearer {api_key}"},
        )
        bad = httpx.post(
            f"{base}/api/v1/tools/echo",
            json={"q": 1},
            headers={"Authorization": f"Bearer {api_key}"},
        )
    assert ok.status_code == 200, ok.text
    assert ok.json()["authorization"] == "Bearer s3cret"
    assert ok.json()["query"] == "q=hi"
    assert bad.status_code >= 400 and "x-gateway-error" in bad.headers

    key_id = listed[0]["key_id"]
    assert cli(state, "key", "revoke", "acme", key_id).returncode == 0
    # A warm isolate may serve the key for up to CACHE_TTL_SECONDS (documented bound); a new
    # isolate (an empty cache) refuses it at once.
    from gateway.credentials import ISOLATE_CACHE

    ISOLATE_CACHE.clear()
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())
    with running_server(runtime) as base:
        revoked = httpx.post(
            f"{base}/api/v1/tools/echo",
            json={"q": "hi"},
            headers={"Authorization": f"Bearer {api_key}"},
        )
    assert revoked.status_code in (401, 403)


def test_wrangler_mode_prints_commands_and_touches_no_local_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out = cli(state, "tenant", "create", "acme", "--wrangler")
    assert out.returncode == 0
    assert out.stdout.startswith("npx wrangler kv key put --binding=KV --remote gw:tenant:acme")
    assert json.loads(cli(state, "tenant", "list").stdout) == []


def test_bad_tool_config_is_refused_with_the_reason(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cli(state, "tenant", "create", "acme")
    tool = tmp_path / "tool.json"
    tool.write_text(
        json.dumps(
            {
                "name": "x",
                "description": "x",
                "provider": "p",
                "url": "https://example.com",
                "method": "GET",
                "input_schema": {"type": "object", "anyOf": []},
            }
        )
    )
    out = cli(state, "tool", "register", "acme", str(tool))
    assert out.returncode == 2 and "anyOf" in out.stderr
    assert json.loads(cli(state, "tool", "list", "acme").stdout) == []
