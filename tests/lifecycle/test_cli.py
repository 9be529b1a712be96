"""`agent-memory prune --dry-run | prune | brief | reconcile | reindex | erase-subject |
retention` on a state folder: progress on stderr, JSON on stdout, the same effects as the
crons and routes."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_memory.memory import Memory
from agent_memory.tiers.semantic.memory import SemanticMemory
from bindings.ports.clock import FixedClock
from local_runtime.cli import main
from local_runtime.commands import lifecycle
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.lifecycle.conftest import DAY_MS, NOW, NOW_MS, seed_episodes


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"

    def open_runtime(args: argparse.Namespace) -> LocalRuntime:
        runtime = LocalRuntime.open(args.state, embedder=HashingEmbedder(), clock=FixedClock(NOW))
        asyncio.run(runtime.migrate())
        return runtime

    monkeypatch.setattr(lifecycle, "_open", open_runtime)

    async def seed() -> None:
        runtime = LocalRuntime.open(root, embedder=HashingEmbedder(), clock=FixedClock(NOW))
        await runtime.migrate()
        await seed_episodes(
            runtime.db, "acme", [NOW_MS - 100 * DAY_MS, NOW_MS], subject="contact:ada"
        )
        await seed_episodes(runtime.db, "globex", [NOW_MS - 200 * DAY_MS, NOW_MS - 150 * DAY_MS])
        memory = SemanticMemory(
            "acme",
            db=runtime.db,
            vectors=runtime.vectors,
            embedder=runtime.embedder,
            clock=runtime.clock,
        )
        await memory.learn({"content": "Acme pays quarterly", "confidence": 0.5})
        await memory.learn({"content": "Acme pays quarterly", "subject": "acme"})
        await runtime.close()

    asyncio.run(seed())
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    try:
        data = json.loads(out)
    except ValueError:
        data = out
    return code, data, err


def test_prune_dry_run_then_prune_with_progress(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, err = run(capsys, "prune", "--dry-run", "--state", str(state))
    assert code == 0 and data["dry_run"] and data["episodes_due"] == 3
    assert "acme: 1 episode(s)" in err and "globex: 2 episode(s)" in err
    code, data, err = run(capsys, "prune", "--state", str(state), "--job", "manual-1")
    assert code == 0 and data["complete"] and data["episodes_deleted"] == 3
    assert "[1] acme: archived+deleted 1 episode(s)" in err
    assert "[2] globex: archived+deleted 2 episode(s)" in err
    assert list((state / "cold" / "archive").iterdir())  # the archives are on disk
    code, data, _ = run(capsys, "prune", "--dry-run", "--state", str(state))
    assert data["episodes_due"] == 0


def test_a_budgeted_prune_is_resumed_with_its_job_id(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, data, err = run(
        capsys,
        "prune",
        "--state",
        str(state),
        "--job",
        "j",
        "--batch-rows",
        "1",
        "--max-operations",
        "12",
    )
    assert data["stopped_by"] == "operations" and "run again with --job j" in err
    _, data, _ = run(capsys, "prune", "--state", str(state), "--job", "j")
    assert data["complete"] and data["episodes_deleted"] == 3


def test_brief_retention_reconcile_and_erase(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, table, _ = run(capsys, "brief", "--state", str(state))
    assert code == 0 and "acme" in table and "globex" in table
    code, data, _ = run(
        capsys, "retention", "acme", "--days", "30", "--limit", "1", "--state", str(state)
    )
    assert (data["episode_retention_days"], data["episode_limit"]) == (30, 1)
    code, data, err = run(capsys, "brief", "--json", "--tenant", "acme", "--state", str(state))
    [acme] = data["tenants"]
    assert acme["level"] == "at_limit" and "AT its episode limit" in err
    code, data, err = run(capsys, "reconcile", "--tenant", "acme", "--state", str(state))
    assert code == 0 and data[0]["merged_exact"] == 1 and "[1/1] acme: merged 1+0" in err
    code, data, err = run(capsys, "erase-subject", "acme", "contact:ada", "--state", str(state))
    assert code == 0 and data["episodes"] == 2 and data["complete"]
    assert "erasing 'contact:ada' from tenant acme" in err
    code, _, err = run(capsys, "erase-subject", "acme", "ab", "--state", str(state))
    assert code == 2 and "3-256 characters" in err


def test_reindex_maps_every_tenants_indexed_terms_through_the_vocabulary(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed() -> None:
        runtime = LocalRuntime.open(state, embedder=HashingEmbedder(), clock=FixedClock(NOW))
        memory = (await Memory.open(runtime.bindings(), "acme")).semantic()
        await memory.learn({"content": "lantern note", "subject": "notes", "source": "test"})
        await runtime.background.drain()
        await runtime.close()

    asyncio.run(seed())
    code, data, _ = run(capsys, "reindex", "--state", str(state))
    assert code == 0 and data == {"renormalised": {"acme": 0}}  # written in today's terms


def test_an_operator_moves_a_tenant_from_the_command_line(
    state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_memory.lifecycle import move

    code, shards, _ = run(capsys, "shards", "--state", str(state))
    assert code == 0 and [s["shard"] for s in shards] == ["primary", "s2"]
    # Started and carried as far as it goes now: switched, the source kept for the grace period.
    code, status, err = run(capsys, "move", "acme", "--to", "s2", "--state", str(state))
    assert code == 0 and status["phase"] == "switched", err
    assert "waiting" in err
    code, status, _ = run(capsys, "move", "acme", "--status", "--state", str(state))
    assert status["phase"] == "switched" and status["target"] == "s2"
    monkeypatch.setattr(move, "GRACE_SECONDS", 0.0)  # the grace period has passed
    code, status, _ = run(capsys, "move", "acme", "--state", str(state))
    assert code == 0 and status["phase"] == "done"
    code, shards, _ = run(capsys, "shards", "--state", str(state))
    assert {s["shard"]: s["tenants"] for s in shards}["s2"] == ["acme"]
    code, brief, _ = run(capsys, "brief", "--tenant", "acme", "--json", "--state", str(state))
    assert brief["tenants"][0]["facts_active"] >= 1  # read where the tenant now lives
    with pytest.raises(SystemExit) as refused:  # too late to cancel: it lives on s2 now
        run(capsys, "move", "acme", "--cancel", "--state", str(state))
    assert str(refused.value).startswith("move_switched: ")
