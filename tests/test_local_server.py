"""The local runtime as a user meets it: a real HTTP server on loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder


def test_healthz_answers_over_http_with_every_local_binding(tmp_path: Path) -> None:
    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    with running_server(runtime) as base:
        body = httpx.get(f"{base}/healthz").json()
        missing = httpx.get(f"{base}/nope")
    assert body["status"] == "ok"
    assert body["environment"] == "development"
    assert all(body["bindings"][name] for name in ("kv", "d1", "vectorize", "agent_runtime"))
    assert body["embedding"]["dimensions"] == 384
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_state_folder_is_created_and_migrations_recorded_once(
    tmp_path: Path, real_migrations: None
) -> None:
    state = tmp_path / "fresh"
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())
    with running_server(runtime) as base:
        assert httpx.get(f"{base}/healthz").status_code == 200
    assert (state / "d1.sqlite").exists() and (state / "durable_objects").is_dir()
    # A second start applies nothing new: wrangler-style bookkeeping in d1_migrations.
    import asyncio

    again = LocalRuntime.open(state, embedder=HashingEmbedder())
    assert asyncio.run(again.migrate()) == []


def test_scheduled_handler_runs_like_wrangler_dev(tmp_path: Path) -> None:
    from local_runtime.access_dev import mint_token
    from worker.identity import ACCESS_HEADER

    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    # The dev operator's token: the endpoints run every tenant's jobs (platform admins only).
    token = mint_token(runtime.state.access, "operator@localhost", now=runtime.clock.now())
    dev = {ACCESS_HEADER: token}
    with running_server(runtime) as base:
        ok = httpx.get(
            f"{base}/cdn-cgi/handler/scheduled", params={"cron": "0 3 * * SUN"}, headers=dev
        )
        newer = httpx.get(
            f"{base}/cdn-cgi/local/scheduled", params={"cron": "0 6 * * *"}, headers=dev
        )
        bad = httpx.get(f"{base}/cdn-cgi/handler/scheduled", headers=dev)
        anonymous = httpx.get(f"{base}/cdn-cgi/local/scheduled", params={"cron": "0 6 * * *"})
    assert ok.status_code == 200 and ok.json()["cron"] == "0 3 * * SUN"
    assert newer.status_code == 200 and newer.json()["cron"] == "0 6 * * *"
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "access_token_missing"


def test_oversized_body_is_refused_with_413(tmp_path: Path) -> None:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), vars={"MAX_BODY_BYTES": "2048"}
    )
    with running_server(runtime) as base:
        response = httpx.post(f"{base}/healthz", content=b"x" * 100_000)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_cli_help_and_migrate(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "local_runtime.cli"]
    help_text = subprocess.run([*cli, "--help"], capture_output=True, text=True, check=True)
    assert "dev" in help_text.stdout and "migrate" in help_text.stdout
    first = subprocess.run(
        [*cli, "migrate", "--state", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "0001_baseline.sql" in first.stdout
    second = subprocess.run(
        [*cli, "migrate", "--state", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "no migrations to apply" in second.stdout


def test_the_dev_server_fires_durable_object_alarms_as_they_fall_due(tmp_path: Path) -> None:
    import time

    from bindings.ports.clock import FixedClock
    from local_runtime.access_dev import mint_token
    from worker.identity import ACCESS_HEADER

    clock = FixedClock(1_750_000_000.0)
    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder(), clock=clock)
    with running_server(runtime) as base:
        token = mint_token(runtime.state.access, "ops@example.com", now=clock.now())
        run = httpx.post(
            f"{base}/v1/agents/acme/assistant/run",
            json={"input": "remember the blue door"},
            headers={ACCESS_HEADER: token},
        )
        assert run.status_code == 200, run.text
        name = "acme:assistant:default"
        assert runtime.agents.alarms.get(name) == clock.now() + 86_400
        clock.advance(86_400)  # a day without a turn
        passes = runtime.alarm_passes
        deadline = time.monotonic() + 10
        # The loop runs a pass every second: wait for one that started after the advance.
        while runtime.alarm_passes < passes + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        log = httpx.get(
            f"{base}/admin/agents/acme/runs/{run.json()['run_id']}",
            headers={
                ACCESS_HEADER: mint_token(runtime.state.access, "ops@example.com", now=clock.now())
            },
        )
        assert runtime.agents.alarms.get(name) is None  # fired; nothing left to arm for
    assert log.status_code == 200 and log.json()["run_log"] == []  # cleared after the day
    assert log.json()["run"]["status"] == "completed"  # the run itself stays in D1
