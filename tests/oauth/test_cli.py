"""`agent-memory oauth clients|revoke`, and the dev server's port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_runtime.cli import build_parser, main
from local_runtime.server import DEFAULT_PORT
from tests.oauth.conftest import DCR_REDIRECT, TENANT, OAuthDriver


def test_the_dev_server_leaves_cursors_oauth_callback_port_free() -> None:
    args = build_parser().parse_args(["dev"])
    assert args.port == DEFAULT_PORT
    assert DEFAULT_PORT != 8787  # Cursor's desktop app listens there for its OAuth callback
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "8787" not in readme
    assert f"127.0.0.1:{DEFAULT_PORT}" in readme


async def test_cli_lists_and_revokes_connected_clients(
    oauth: OAuthDriver, capsys: pytest.CaptureFixture[str]
) -> None:
    client = await oauth.register(client_name="Codex")
    tokens = (await oauth.exchange(await oauth.authorize(client["client_id"], DCR_REDIRECT))).json()
    state = str(oauth.runtime.state.root)
    assert await _cli(["oauth", "clients", TENANT, "--state", state]) == 0
    listed = json.loads(capsys.readouterr().out)
    [connected] = listed["clients"]
    assert connected["client_name"] == "Codex"
    revoke = ["oauth", "revoke", TENANT, connected["grant_id"], "--state", state]
    assert await _cli(revoke) == 0
    assert json.loads(capsys.readouterr().out)["revoked"] is True
    assert await _cli(revoke) == 1
    capsys.readouterr()
    assert (await oauth.mcp(tokens["access_token"], "tools/list")).status == 401


async def _cli(argv: list[str]) -> int:
    import asyncio

    return await asyncio.to_thread(main, argv)
