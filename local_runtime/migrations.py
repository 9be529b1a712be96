"""Apply D1 migrations the way `wrangler d1 migrations apply` does: the `*.sql` files of the
folder in name order, each recorded by its file name in wrangler's `d1_migrations` table
(workers-sdk `packages/wrangler/src/d1/migrations/helpers.ts`, `initMigrationsTable`;
`_CREATE_TABLE` below); a file already recorded is skipped. Each file and its record go in
one `batch`, so a failing file leaves neither its changes nor its record behind (files before
it stay applied). Only the D1 port is used, so this runs against any `D1Database` adapter.
"""

from __future__ import annotations

from pathlib import Path

from bindings.ports.d1 import D1Database, D1Error
from local_runtime.adapters.do_sql import split_sql_statements

MIGRATIONS_TABLE = "d1_migrations"

# The name quoted as wrangler quotes it (`escapeIdentifier`, wrangler >= 4.1xx), so the schema
# text sqlite_schema keeps is byte-identical (tests/test_d1_migrations_wrangler.py).
_CREATE_TABLE = f"""CREATE TABLE IF NOT EXISTS "{MIGRATIONS_TABLE}"(
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT UNIQUE,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)"""


class MigrationError(Exception):
    """A migration file failed; nothing of it was applied."""

    def __init__(self, name: str, cause: Exception) -> None:
        super().__init__(f"migration {name} failed: {cause}")
        self.name = name


def migration_files(migrations_dir: str | Path) -> list[Path]:
    """The `.sql` files of the folder in the order wrangler applies them (by name)."""
    folder = Path(migrations_dir)
    return sorted(
        (p for p in folder.iterdir() if p.is_file() and p.suffix == ".sql"),
        key=lambda p: p.name,
    )


async def apply_migrations(db: D1Database, migrations_dir: str | Path) -> list[str]:
    """Apply pending migrations in name order; return the file names newly applied.

    Raises `MigrationError` for the first file that fails; it is not recorded, and the
    files after it are not attempted.
    """
    await db.prepare(_CREATE_TABLE).run()
    result = await db.prepare(f"SELECT name FROM {MIGRATIONS_TABLE}").all()
    done = {str(row["name"]) for row in result.results}
    applied: list[str] = []
    record = db.prepare(f"INSERT INTO {MIGRATIONS_TABLE} (name) VALUES (?)")
    for path in migration_files(migrations_dir):
        name = path.name
        if name in done:
            continue
        statements = [db.prepare(sql) for sql in split_sql_statements(path.read_text("utf-8"))]
        try:
            await db.batch([*statements, record.bind(name)])
        except D1Error as exc:
            raise MigrationError(name, exc) from exc
        applied.append(name)
    return applied
