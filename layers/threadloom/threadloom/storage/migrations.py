"""Versioned schema migrations: numbered ``NNNN_name.sql`` files applied once each, in order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from threadloom.storage.database import Database

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step; ``statements`` are run in a single transaction."""

    version: int
    name: str
    sql: str

    @property
    def statements(self) -> list[str]:
        return split_statements(self.sql)


def split_statements(sql: str) -> list[str]:
    """Split a migration file on semicolons that end a line (our files never put one inside a literal)."""
    without_comments = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in re.split(r";\s*(?:\n|$)", without_comments) if part.strip()]


def load_migrations(package: str) -> list[Migration]:
    """The migrations shipped in ``<package>/migrations``, sorted by version."""
    folder = resources.files(package).joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda migration: migration.version)


def apply_migrations(
    database: Database, migrations: list[Migration], *, create_table_sql: str, applied_at: str
) -> list[int]:
    """Apply every migration newer than the recorded version; returns the versions applied now."""
    with database.write() as tx:
        tx.execute(create_table_sql)
    applied: list[int] = []
    for migration in migrations:
        with database.write() as tx:
            done = tx.query(
                "SELECT 1 FROM threadloom_schema_migrations WHERE version = :version", {"version": migration.version}
            )
            if done:
                continue
            for statement in migration.statements:
                tx.execute(statement)
            tx.execute(
                "INSERT INTO threadloom_schema_migrations (version, name, applied_at) VALUES (:version, :name, :at)",
                {"version": migration.version, "name": migration.name, "at": applied_at},
            )
            applied.append(migration.version)
    return applied
