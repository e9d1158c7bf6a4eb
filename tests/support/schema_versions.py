"""Stores whose schema stops before a given migration, to test a migration on data of the schema before it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from threadloom import PostgresStore, SqliteStore
from threadloom.clock import utc_now
from threadloom.storage.migrations import apply_migrations, load_migrations
from threadloom.storage.postgres.schema import apply_postgres_migrations, postgres_migrations

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def store_before(version: int, backend: str, tmp_path: Path, *, auto_migrate: bool = True) -> Iterator[Any]:
    """Yield a store of ``backend`` migrated up to (not including) ``version``; closed and dropped after.

    ``auto_migrate=False`` (PostgreSQL): the store stays at that version until the test calls ``migrate()``.
    """
    if backend == "sqlite":
        sqlite_store = SqliteStore(str(tmp_path / f"v{version}.db"))
        older = [m for m in load_migrations(sqlite_store.migrations_package) if m.version < version]
        apply_migrations(
            sqlite_store.database,
            older,
            create_table_sql=sqlite_store.sql.create_migrations_table,
            applied_at=utc_now(),
        )
        yield sqlite_store
        sqlite_store.close()
        return
    from tests.support.postgres import create_database, drop_database, url_for

    name = f"threadloom_test_v{version}_{os.getpid()}"
    create_database(name)
    postgres_store = PostgresStore(url_for(name), auto_migrate=auto_migrate)
    apply_postgres_migrations(postgres_store.database, [m for m in postgres_migrations() if m.version < version])
    yield postgres_store
    postgres_store.close()
    drop_database(name)
