"""The migrations runner: wrangler's `d1_migrations` bookkeeping, order, atomicity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bindings.ports.d1 import D1Database, D1Error
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.migrations import MigrationError, apply_migrations
from tests.conftest import PROJECT_ROOT


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteD1]:
    database = SqliteD1(tmp_path / "d1.sqlite")
    yield database
    database.close()


@pytest.fixture
def migrations(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    return folder


def write(folder: Path, name: str, sql: str) -> None:
    (folder / name).write_text(sql, encoding="utf-8")


async def tables(db: D1Database) -> set[str]:
    rows = await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()
    return {str(row["name"]) for row in rows.results}


async def recorded(db: D1Database) -> list[str]:
    rows = await db.prepare("SELECT name FROM d1_migrations ORDER BY id").all()
    return [str(row["name"]) for row in rows.results]


async def test_applies_files_in_name_order_and_records_them(db: SqliteD1, migrations: Path) -> None:
    write(migrations, "0010_third.sql", "ALTER TABLE a ADD COLUMN c TEXT;")
    write(migrations, "0001_first.sql", "CREATE TABLE a (id INTEGER PRIMARY KEY);")
    write(migrations, "0002_second.sql", "ALTER TABLE a ADD COLUMN b TEXT;")
    write(migrations, "README.md", "not a migration")

    applied = await apply_migrations(db, migrations)

    assert applied == ["0001_first.sql", "0002_second.sql", "0010_third.sql"]
    assert await recorded(db) == applied
    columns = await db.prepare("SELECT name FROM pragma_table_info('a') ORDER BY cid").all()
    assert [row["name"] for row in columns.results] == ["id", "b", "c"]


async def test_migrations_table_has_wranglers_columns(db: SqliteD1, migrations: Path) -> None:
    write(migrations, "0001_init.sql", "CREATE TABLE t (a INTEGER);")
    await apply_migrations(db, migrations)
    row = await db.prepare("SELECT id, name, applied_at FROM d1_migrations").first()
    assert row is not None
    assert row["id"] == 1
    assert row["name"] == "0001_init.sql"
    assert isinstance(row["applied_at"], str) and len(row["applied_at"]) == 19


async def test_second_run_applies_nothing(db: SqliteD1, migrations: Path) -> None:
    write(migrations, "0001_init.sql", "CREATE TABLE t (a INTEGER);")
    assert await apply_migrations(db, migrations) == ["0001_init.sql"]
    # CREATE TABLE would fail if the file ran again.
    assert await apply_migrations(db, migrations) == []
    assert await recorded(db) == ["0001_init.sql"]


async def test_only_new_files_are_applied_later(db: SqliteD1, migrations: Path) -> None:
    write(migrations, "0001_init.sql", "CREATE TABLE t (a INTEGER);")
    await apply_migrations(db, migrations)
    write(migrations, "0002_more.sql", "CREATE TABLE u (b INTEGER);")
    assert await apply_migrations(db, migrations) == ["0002_more.sql"]
    assert {"t", "u"} <= await tables(db)


async def test_failing_file_is_rolled_back_and_not_recorded(db: SqliteD1, migrations: Path) -> None:
    write(migrations, "0001_ok.sql", "CREATE TABLE good (a INTEGER);")
    write(
        migrations,
        "0002_bad.sql",
        "CREATE TABLE half (a INTEGER);\n"
        "INSERT INTO half VALUES (1);\n"
        "INSERT INTO nowhere VALUES (1);",
    )
    write(migrations, "0003_later.sql", "CREATE TABLE later (a INTEGER);")

    with pytest.raises(MigrationError, match=r"0002_bad\.sql") as failure:
        await apply_migrations(db, migrations)

    assert isinstance(failure.value.__cause__, D1Error)
    assert await recorded(db) == ["0001_ok.sql"]
    names = await tables(db)
    assert "good" in names
    assert "half" not in names
    assert "later" not in names

    # Fixing the file lets the next run continue where it stopped.
    write(migrations, "0002_bad.sql", "CREATE TABLE half (a INTEGER);")
    assert await apply_migrations(db, migrations) == ["0002_bad.sql", "0003_later.sql"]


async def test_triggers_comments_and_strings_with_semicolons(
    db: SqliteD1, migrations: Path
) -> None:
    write(
        migrations,
        "0001_trigger.sql",
        """
        -- a comment; with a semicolon
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE audit (msg TEXT NOT NULL);
        /* block comment; also with one */
        CREATE TRIGGER items_audit AFTER INSERT ON items BEGIN
            INSERT INTO audit (msg) VALUES ('added; ' || new.name);
        END;
        INSERT INTO items (name) VALUES ('semi;colon');
        """,
    )
    await apply_migrations(db, migrations)
    assert await db.prepare("SELECT msg FROM audit").first_value("msg") == "added; semi;colon"


async def test_transaction_statements_in_a_file_fail_like_on_d1(
    db: SqliteD1, migrations: Path
) -> None:
    write(migrations, "0001_txn.sql", "BEGIN TRANSACTION;\nCREATE TABLE t (a);\nCOMMIT;")
    with pytest.raises(MigrationError, match="To execute a transaction"):
        await apply_migrations(db, migrations)
    assert "t" not in await tables(db)


async def test_respects_a_table_wrangler_already_created(db: SqliteD1, migrations: Path) -> None:
    await db.batch(
        [
            db.prepare(
                "CREATE TABLE IF NOT EXISTS d1_migrations(id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)"
            ),
            db.prepare("INSERT INTO d1_migrations (name) VALUES ('0001_init.sql')"),
        ]
    )
    write(migrations, "0001_init.sql", "CREATE TABLE t (a INTEGER);")
    write(migrations, "0002_next.sql", "CREATE TABLE u (a INTEGER);")
    assert await apply_migrations(db, migrations) == ["0002_next.sql"]
    assert "t" not in await tables(db)


async def test_state_survives_reopening_the_database(tmp_path: Path, migrations: Path) -> None:
    write(migrations, "0001_init.sql", "CREATE TABLE t (a INTEGER);")
    first = SqliteD1(tmp_path / "persist.sqlite")
    await apply_migrations(first, migrations)
    first.close()
    second = SqliteD1(tmp_path / "persist.sqlite")
    try:
        assert await apply_migrations(second, migrations) == []
    finally:
        second.close()


async def test_the_projects_migrations_apply_under_d1_rules(db: SqliteD1) -> None:
    folder = PROJECT_ROOT / "migrations"
    expected = sorted(p.name for p in folder.glob("*.sql"))
    assert await apply_migrations(db, folder) == expected
    assert await apply_migrations(db, folder) == []
