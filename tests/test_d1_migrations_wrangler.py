"""Every D1 migration applies with wrangler itself, and yields the local runtime's schema.

`wrangler d1 migrations apply <db> --local` runs in a temporary copy of wrangler.toml and
migrations/ (no network: local mode, banner/update check and metrics off), against a D1
database that Miniflare keeps on workerd's SQLite under a temporary `--persist-to` folder.
The resulting database file is then compared with the one the local runtime's migration
runner (`local_runtime.migrations.apply_migrations`) produces from the same files: same
tables, columns, STRICT flags, indexes, triggers, foreign keys and virtual tables, and the
same rows in wrangler's `d1_migrations` bookkeeping table.

Wrangler stores each statement without its `--` comments, so SQL text is compared with
comments removed and whitespace collapsed. Tables Cloudflare reserves (`_cf_*`) are left
out. Skips without Node outside CI; fails without it in CI.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT, require_node_tools, wrangler_command

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# wrangler run happens once, not once per worker.
pytestmark = pytest.mark.xdist_group("d1-migrations-wrangler")

# A guard against a hung wrangler, not a timing assertion.
WRANGLER_GUARD_SECONDS = 300

Schema = dict[str, Any]


def _database_name() -> str:
    """wrangler.toml's primary D1 database (every database is made from migrations/)."""
    config = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text(encoding="utf-8"))
    [database] = [d for d in config["d1_databases"] if d["binding"] == "DB"]
    return str(database["database_name"])


MIGRATIONS = PROJECT_ROOT / "migrations"


_COMMENT_OR_STRING = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)


def _normalise_sql(sql: str | None) -> str | None:
    """SQL text without comments (quoted text kept) and with whitespace collapsed."""
    if sql is None:
        return None
    without_comments = _COMMENT_OR_STRING.sub(
        lambda m: m.group(0) if m.group(0)[0] in "'\"" else " ", sql
    )
    return " ".join(without_comments.split())


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_schema(path: Path) -> Schema:
    """Everything that defines the database's shape, in comparable form."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        objects = {
            (kind, name): {"table": table, "sql": _normalise_sql(sql)}
            for kind, name, table, sql in conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
            if not name.startswith("_cf_")
        }
        tables: dict[str, Any] = {}
        for schema, name, kind, ncol, wr, strict in conn.execute("PRAGMA table_list"):
            if schema != "main" or name.startswith(("_cf_", "sqlite_")):
                continue
            quoted = _quoted(name)
            tables[name] = {
                "type": kind,
                "columns": ncol,
                "without_rowid": wr,
                "strict": strict,
                "xinfo": conn.execute(f"PRAGMA table_xinfo({quoted})").fetchall(),
                "foreign_keys": conn.execute(f"PRAGMA foreign_key_list({quoted})").fetchall(),
                "indexes": sorted(conn.execute(f"PRAGMA index_list({quoted})").fetchall()),
            }
        indexes = {
            name: conn.execute(f"PRAGMA index_xinfo({_quoted(name)})").fetchall()
            for (kind, name) in objects
            if kind == "index"
        }
        migrations = [row[0] for row in conn.execute("SELECT name FROM d1_migrations ORDER BY id")]
        return {"objects": objects, "tables": tables, "indexes": indexes, "migrations": migrations}
    finally:
        conn.close()


def _wrangler_d1(work: Path, *args: str) -> str:
    """Run `wrangler d1 <args> --local` on the D1 state under `work`; its output."""
    env = {
        **os.environ,
        "CI": "true",  # no interactive confirmation
        "WRANGLER_SEND_METRICS": "false",
        "WRANGLER_HIDE_BANNER": "true",  # the banner is what checks npm for an update
        "WRANGLER_LOG_PATH": str(work / "logs"),
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        wrangler_command("d1", *args, "--local", "--persist-to", str(work / "state")),
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=WRANGLER_GUARD_SECONDS,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"wrangler d1 {args[0]} failed:\n{output}"
    return output


@pytest.fixture(scope="module")
def wrangler_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with wrangler.toml and migrations/, every migration applied by wrangler."""
    require_node_tools()
    work = tmp_path_factory.mktemp("wrangler-d1")
    shutil.copy(PROJECT_ROOT / "wrangler.toml", work / "wrangler.toml")
    shutil.copytree(MIGRATIONS, work / MIGRATIONS.name)
    (work / "apply.log").write_text(_wrangler_d1(work, "migrations", "apply", _database_name()))
    return work


@pytest.fixture(scope="module")
def wrangler_database(wrangler_work: Path) -> tuple[Path, str]:
    """The D1 SQLite file wrangler migrated from migrations/, and wrangler's output."""
    work = wrangler_work
    state = work / "state"
    output = (work / "apply.log").read_text()
    # Miniflare keeps one SQLite file per D1 database (plus metadata.sqlite).
    [database] = [
        p
        for p in (state / "v3" / "d1" / "miniflare-D1DatabaseObject").glob("*.sqlite")
        if p.name != "metadata.sqlite"
    ]
    return database, output


@pytest.fixture(scope="module")
def local_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same migrations applied by the local runtime's runner to a SQLite file."""
    from local_runtime.adapters.d1 import SqliteD1
    from local_runtime.migrations import apply_migrations

    path = tmp_path_factory.mktemp("local-d1") / "d1.sqlite"
    db = SqliteD1(path)

    async def migrate() -> None:
        await apply_migrations(db, MIGRATIONS)

    try:
        # A module-scoped fixture has no test event loop; this one is short-lived.
        asyncio.run(migrate())
    finally:
        db.close()
    return path


def test_every_migration_applies_with_wrangler(wrangler_database: tuple[Path, str]) -> None:
    path, output = wrangler_database
    names = sorted(p.name for p in MIGRATIONS.glob("*.sql"))
    assert names, "no migrations found"
    assert read_schema(path)["migrations"] == names
    for name in names:
        assert name in output


def test_wrangler_and_the_local_runner_build_the_same_schema(
    wrangler_database: tuple[Path, str], local_database: Path
) -> None:
    on_workerd = read_schema(wrangler_database[0])
    local = read_schema(local_database)
    assert on_workerd["migrations"] == local["migrations"]
    assert sorted(on_workerd["objects"]) == sorted(local["objects"])
    for key, definition in on_workerd["objects"].items():
        assert local["objects"][key] == definition, key
    assert on_workerd["tables"] == local["tables"]
    assert on_workerd["indexes"] == local["indexes"]


def test_a_moves_change_log_runs_on_d1(wrangler_work: Path, tmp_path: Path) -> None:
    """The change log's triggers (`lifecycle.move`) and its replay's row-value lookup run on
    workerd's D1: each write of a tracked tenant logs its row's key (an update the old and
    the new), another tenant's nothing. On a copy of the migrated database (the schema tests
    read the original)."""
    from agent_memory.directory import TenantTable

    work = tmp_path / "work"
    shutil.copytree(wrangler_work, work, ignore=shutil.ignore_patterns("logs"))
    from agent_memory.lifecycle.move import _keys_clause, _logged_in_range, _tracking_trigger_sql

    table = TenantTable("scratch", ("tenant_id", "k", "j", "v"), ("tenant_id", "k", "j"), {})
    where, params = _keys_clause(table, [["a", 1], ["b", 2]])
    for value in params:  # `wrangler d1 execute --command` binds nothing: inline the values
        where = where.replace("?", repr(value), 1)
    script = [
        "CREATE TABLE scratch (tenant_id TEXT NOT NULL, k TEXT NOT NULL, j INTEGER NOT NULL, "
        "v TEXT, PRIMARY KEY (tenant_id, k, j))",
        *(_tracking_trigger_sql(table, event) for event in ("INSERT", "UPDATE", "DELETE")),
        "INSERT INTO tenant_move_tracking (tenant_id, since) VALUES ('acme', 1)",
        "INSERT INTO scratch VALUES ('acme', 'a', 1, 'x'), ('acme', 'b', 2, 'y'), "
        "('other', 'a', 1, 'z')",
        "UPDATE scratch SET v = 'w' WHERE k = 'a'",
        "DELETE FROM scratch WHERE k = 'b'",
    ]
    # A check's chunk reads the log entries of its key range only: after ("a", 1).
    in_range, range_params = _logged_in_range(table, ["a", 1], None)
    for value in ["acme", *range_params]:
        in_range = in_range.replace("?", repr(value), 1)
    reads = [
        "SELECT tenant_id || ' ' || tbl || ' ' || key AS logged FROM tenant_move_changes "
        "ORDER BY n",
        f"SELECT k, v FROM scratch WHERE tenant_id = 'acme'{where}",
        in_range,
    ]
    # One wrangler run (each starts workerd): the writes, then the reads, in one file.
    logged, found, chunk = _execute(work, [*script, *reads])[len(script) :]
    assert [r["logged"] for r in logged] == [
        'acme scratch ["a",1]',
        'acme scratch ["b",2]',
        'acme scratch ["a",1]',  # the update: its old key, then its new one
        'acme scratch ["a",1]',
        'acme scratch ["b",2]',
    ]
    assert found == [{"k": "a", "v": "w"}]
    assert [r["key"] for r in chunk] == ['["b",2]', '["b",2]']


def _execute(work: Path, statements: list[str]) -> list[list[dict[str, Any]]]:
    """Run `statements` in order with one `wrangler d1 execute --file --json` on workerd's
    D1; the rows each statement returned (wrangler answers one result per statement)."""
    (work / "batch.sql").write_text(";\n".join(statements) + ";\n")
    output = _wrangler_d1(work, "execute", _database_name(), "--json", "--file", "batch.sql")
    results = json.loads(output[output.index("[") :])
    assert len(results) == len(statements), output
    return [list(result["results"]) for result in results]


def test_the_keyword_index_triggers_run_on_d1(wrangler_work: Path, tmp_path: Path) -> None:
    """The keyword index's triggers (postings by term number, lengths once a fact, the term
    statistics upserted inside a trigger) run on workerd's D1: what `semantic_terms` shows
    follows inserts, updates and deletes."""
    work = tmp_path / "work"
    shutil.copytree(wrangler_work, work, ignore=shutil.ignore_patterns("logs"))
    columns = (
        "tenant_id, fact_id, agent_type, subject, predicate, object, content, confidence, "
        "source, embedding_provider, embedding_model, embedding_dimensions, content_hash, "
        "status, valid_from, created_at, updated_at, index_terms, index_length, context_length"
    )

    def fact(n: int, content: str, terms: str, length: int) -> str:
        digest = f"'{n:x}" + "0" * 23 + "'"
        return (
            f"('acme', '01J00000000000000000000{n:03d}', 'a', 's{n}', 'p', '', '{content}', "
            f"0.8, 'mcp', 'x', 'y', 3, {digest}, 'active', 1, 1, 1, '{terms}', {length}, 1)"
        )

    script = [
        f"INSERT INTO semantic_facts ({columns}) VALUES "
        + fact(1, "Ada asks about the lease", '["ada ask",["leas",2,0],["novemb",0,1]]', 4)
        + ", "
        + fact(2, "Bo signs the lease", '["bo sign",["leas",1,0],["novemb",0,1]]', 3),
        "DELETE FROM semantic_facts WHERE fact_id = '01J00000000000000000000001'",
        "UPDATE semantic_facts SET index_terms = '[\"bo sign contract\"]', index_length = 3, "
        "context_length = 0 WHERE fact_id = '01J00000000000000000000002'",
    ]
    read = (
        "SELECT t.term, t.tf, t.context_tf, t.length, t.context_length, s.df, "
        "length(f.content_hash) AS chars FROM semantic_terms AS t "
        "JOIN semantic_facts AS f ON f.fts_rowid = t.fts_rowid "
        "JOIN semantic_term_stats AS s ON s.tenant_id = t.tenant_id AND s.term = t.term "
        "ORDER BY f.fact_id, t.term"
    )
    left = (
        "SELECT (SELECT COUNT(*) FROM keyword_lengths) AS lengths, "
        "(SELECT SUM(df) FROM semantic_term_stats) AS df"
    )
    # One wrangler run (each starts workerd): each write followed by the read of what
    # `semantic_terms` shows after it, then what is left, in one file.
    results = _execute(work, [*(sql for write in script for sql in (write, read)), left])
    seen = results[1::2]
    both = [
        ("ada", 1, 0, 4, 1, 1),
        ("ask", 1, 0, 4, 1, 1),
        ("leas", 2, 0, 4, 1, 2),
        ("novemb", 0, 1, 4, 1, 2),
        ("bo", 1, 0, 3, 1, 1),
        ("leas", 1, 0, 3, 1, 2),
        ("novemb", 0, 1, 3, 1, 2),
        ("sign", 1, 0, 3, 1, 1),
    ]
    keys = ("term", "tf", "context_tf", "length", "context_length", "df")
    assert [tuple(r[k] for k in keys) for r in seen[0]] == both
    assert {r["chars"] for r in seen[0]} == {24}
    assert [tuple(r[k] for k in keys) for r in seen[1]] == [
        ("bo", 1, 0, 3, 1, 1),
        ("leas", 1, 0, 3, 1, 1),
        ("novemb", 0, 1, 3, 1, 1),
        ("sign", 1, 0, 3, 1, 1),
    ]
    assert [tuple(r[k] for k in keys) for r in seen[2]] == [
        ("bo", 1, 0, 3, 0, 1),
        ("contract", 1, 0, 3, 0, 1),
        ("sign", 1, 0, 3, 0, 1),
    ]
    assert results[-1] == [{"lengths": 1, "df": 3}]
