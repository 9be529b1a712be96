"""wrangler.toml declares the whole system, and wrangler itself accepts it offline."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

from tests.conftest import PROJECT_ROOT, require_node_tools, wrangler_command
from worker.cron import DAILY_BRIEF, MOVE_STEPS, WEEKLY_PRUNE

CONFIG = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text())


def test_python_worker_on_python_313_with_src_as_base_dir() -> None:
    assert "python_workers" in CONFIG["compatibility_flags"]
    # Dates from 2025-09-29 select Python 3.13 (cheat sheet §8).
    assert CONFIG["compatibility_date"] >= "2025-09-29"
    assert CONFIG["main"] == "src/worker/entry.py"
    assert CONFIG["base_dir"] == "src"


def test_agent_runtime_is_a_sqlite_durable_object() -> None:
    [binding] = CONFIG["durable_objects"]["bindings"]
    assert binding == {"name": "AGENT_RUNTIME", "class_name": "AgentRuntime"}
    assert any("AgentRuntime" in m.get("new_sqlite_classes", []) for m in CONFIG["migrations"])


def test_every_shard_is_a_declared_database_and_index_with_the_migrations() -> None:
    from bindings.settings import Settings

    shards = Settings.from_vars(CONFIG["vars"]).shards
    databases = {db["binding"]: db for db in CONFIG["d1_databases"]}
    indexes = {index["binding"] for index in CONFIG["vectorize"]}
    assert [name for name, _, _ in shards] == ["primary", "s2"]
    assert {d1 for _, d1, _ in shards} == set(databases)
    assert {index for _, _, index in shards} == indexes
    # Every database is made from migrations/ (wrangler's default folder): one schema.
    assert all("migrations_dir" not in db for db in databases.values())
    assert len({db["database_name"] for db in databases.values()}) == len(databases)


def test_static_assets_hold_the_inspector_the_local_runtime_serves() -> None:
    from local_runtime.static_assets import ASSETS_DIR

    assets = PROJECT_ROOT / CONFIG["assets"]["directory"]
    assert assets.resolve() == ASSETS_DIR
    assert (assets / "admin" / "ui" / "index.html").is_file()
    # No asset may shadow a Worker route: only the inspector's folder is published, beside
    # `_headers` (configuration Cloudflare reads, never serves).
    assert sorted(p.name for p in assets.iterdir()) == ["_headers", "admin"]
    assert sorted(p.name for p in (assets / "admin").iterdir()) == ["ui"]


def test_crons_match_the_scheduled_handler() -> None:
    assert set(CONFIG["triggers"]["crons"]) == {WEEKLY_PRUNE, DAILY_BRIEF, MOVE_STEPS}


def test_the_change_feed_queue_is_consumed_with_its_dead_letter_queue() -> None:
    from agent_memory.governance.feed import DEAD_LETTER_QUEUE, FEED_QUEUE, MAX_RETRIES

    [producer] = CONFIG["queues"]["producers"]
    assert producer == {"binding": "FEED", "queue": FEED_QUEUE}
    consumers = {c["queue"]: c for c in CONFIG["queues"]["consumers"]}
    assert set(consumers) == {FEED_QUEUE, DEAD_LETTER_QUEUE}
    # A delivery is retried MAX_RETRIES times (the consumer's backoff), then dead-lettered.
    assert consumers[FEED_QUEUE]["max_retries"] == MAX_RETRIES
    assert consumers[FEED_QUEUE]["dead_letter_queue"] == DEAD_LETTER_QUEUE


def test_weekdays_are_written_by_name() -> None:
    # Cloudflare documents day-of-week as 1-7 or SUN-SAT, so a numeric `0` is ambiguous;
    # and `controller.cron` is the configured string verbatim, which is what the scheduled
    # handler matches on, so one unambiguous spelling is used everywhere.
    for cron in CONFIG["triggers"]["crons"]:
        weekday = cron.split()[4]
        assert weekday == "*" or weekday.isalpha(), f"{cron!r}: name the weekday (SUN..SAT)"
    assert WEEKLY_PRUNE == "0 3 * * SUN"


def test_every_var_is_a_setting() -> None:
    from bindings.settings import Settings

    assert set(CONFIG["vars"]) <= set(Settings.var_names())
    Settings.from_vars(CONFIG["vars"])  # and they validate


def test_dry_run_deploy_lists_every_binding(tmp_path: Path) -> None:
    require_node_tools()
    result = subprocess.run(
        wrangler_command("deploy", "--dry-run", "--outdir", str(tmp_path / "out")),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WRANGLER_SEND_METRICS": "false", "NO_COLOR": "1"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for expected in (
        "env.AGENT_RUNTIME (AgentRuntime)",
        "Durable Object",
        "env.KV",
        "KV Namespace",
        "env.DB (agent-memory)",
        "D1 Database",
        "env.VECTORIZE (agent-memory-semantic)",
        "env.DB_2 (agent-memory-2)",
        "env.VECTORIZE_2 (agent-memory-semantic-2)",
        "Vectorize Index",
        "env.COLD (agent-memory-cold)",
        "R2 Bucket",
        "env.FEED (agent-memory-feed)",
        "Queue",
        "env.AI",
        "env.EMBEDDING_PROVIDER",
        "--dry-run: exiting now.",
    ):
        assert expected in output, f"{expected!r} missing from:\n{output}"
    # The sibling packages under src/ ship with the entry, named relative to src/.
    shipped = {p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.py")}
    assert {"bindings/ports/kv.py", "worker/app.py", "agent_runtime_do/core.py"} <= shipped
    assert not any(p.startswith(("local_runtime/", "tests/")) for p in shipped)
