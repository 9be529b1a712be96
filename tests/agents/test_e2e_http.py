"""The README walk-through, over real HTTP against the local server.

Start the local runtime, mint a token with the CLI, run an agent twice (the second turn
receives the first turn's episode), list the runs, look at one. Bad tokens, bad bodies and
unknown agent types get clear JSON errors and leave nothing behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_runtime.cli import main as cli_main
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from worker.identity import ACCESS_HEADER


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert cli_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_readme_walk_through_over_http(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())
    with running_server(runtime) as base:
        conn = ["--url", base, "--state", str(state)]

        # 1. A token from the CLI (its last line), accepted by the server.
        assert cli_main(["token", "--email", "ada@example.com", "--state", str(state)]) == 0
        token = capsys.readouterr().out.strip().splitlines()[-1]
        # Ada operates tenant acme (tenant-scoped operators, authorization.operator_grants).
        grant = ["operators", "grant", "ada@example.com", "--tenant", "acme"]
        assert cli_main([*grant, "--state", str(state)]) == 0
        capsys.readouterr()
        headers = {ACCESS_HEADER: token}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            # 2. Bad input first: each gets a clear JSON error and nothing is written.
            bad = [
                ("POST", "/v1/agents/acme/assistant/run", {"input": "hi"}, {ACCESS_HEADER: ""}),
                (
                    "POST",
                    "/v1/agents/acme/assistant/run",
                    {"input": "hi"},
                    {ACCESS_HEADER: token[:-6] + "AAAAAA"},
                ),
                ("POST", "/v1/agents/acme/assistant/run", {"text": "hi"}, headers),
                ("POST", "/v1/agents/acme/assistant/run", {"input": ""}, headers),
                ("POST", "/v1/agents/acme/wizard/run", {"input": "hi"}, headers),
                ("GET", "/admin/agents/acme/runs", None, {ACCESS_HEADER: "nope"}),
            ]
            expected = [
                (401, "access_token_missing"),
                (403, "access_token_invalid"),
                (422, "validation_error"),
                (422, "validation_error"),
                (404, "unknown_agent_type"),
                (403, "access_token_invalid"),
            ]
            got = []
            for method, path, body, extra in bad:
                response = client.request(method, path, json=body, headers=extra)
                assert response.headers["content-type"] == "application/json"
                got.append((response.status_code, response.json()["error"]["code"]))
            assert got == expected
            invalid_json = client.post(
                "/v1/agents/acme/assistant/run",
                content=b"{oops",
                headers={"content-type": "application/json"},
            )
            assert invalid_json.status_code == 400
            assert client.get("/admin/agents/acme/runs").json() == {"runs": [], "next_cursor": None}
            assert list((state / "durable_objects").iterdir()) == []

        # 3. Run an agent twice through the CLI.
        first = cli_json(
            capsys, "agents", "run", "acme", "assistant", "Our launch date is 12 March", *conn
        )
        second = cli_json(capsys, "agents", "run", "acme", "assistant", "When do we launch?", *conn)
        assert first["status"] == second["status"] == "completed"
        assert first["context_episode_ids"] == []
        assert second["context_episode_ids"] == [first["episode_id"]]
        assert "Our launch date is 12 March" in second["output"]

        # Reading a run asks its Durable Object, which first finishes the instance's
        # pending episodic writes; after that the listing is complete.
        shown = cli_json(capsys, "agents", "show", "acme", first["run_id"], *conn)
        assert [e["episode_id"] for e in shown["episodes"]] == [first["episode_id"]]
        assert shown["run"]["input"]["requested_by"] == "operator@localhost"
        assert {row["kind"] for row in shown["run_log"]} >= {
            "turn_start",
            "memory_read",
            "llm_call",
            "tool_call",
            "memory_write",
            "turn_end",
        }

        # 4. List the runs.
        listed = cli_json(capsys, "agents", "runs", "acme", "--all", *conn)
        assert [(r["run_id"], r["status"]) for r in listed["runs"]] == [
            (second["run_id"], "completed"),
            (first["run_id"], "completed"),
        ]
        assert listed["runs"][0]["input"]["context_episode_ids"] == [first["episode_id"]]

        # 5. An API error from the CLI goes to stderr with a non-zero exit status.
        assert cli_main(["agents", "run", "acme", "wizard", "hi", *conn]) == 1
        assert "unknown_agent_type" in capsys.readouterr().err
