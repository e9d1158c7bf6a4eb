"""The ``threadloom`` command: schema management for deployments (more subcommands may follow).

``threadloom migrate`` applies the PostgreSQL migrations to the database named by
``--database-url`` or, without it, by the same ``THREADLOOM_DB_*`` variables the Lambda
functions read, so a deploy step migrates exactly the database the functions will use.
``threadloom migrate --print-sql`` prints them as one plain SQL script instead, for
databases where the application role may not create tables.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from threadloom.errors import ThreadloomError

if TYPE_CHECKING:
    from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="threadloom", description="Threadloom command-line tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    migrate = commands.add_parser(
        "migrate",
        help="create or upgrade the PostgreSQL schema (idempotent, safe to run concurrently)",
        description="Apply pending PostgreSQL migrations, or print them as plain SQL.",
    )
    migrate.add_argument(
        "--database-url",
        metavar="URL",
        help="postgresql://user:password@host:port/db?sslmode=... (default: the THREADLOOM_DB_* variables)",
    )
    migrate.add_argument(
        "--print-sql",
        action="store_true",
        help="print the migrations as one SQL script for an administrator to run, and touch no database",
    )
    migrate.add_argument(
        "--after",
        type=int,
        default=0,
        metavar="VERSION",
        help="with --print-sql: only migrations newer than VERSION (to upgrade a database at VERSION)",
    )
    return parser


def migrate(database_url: str | None, *, print_sql: bool, after: int) -> int:
    from threadloom.storage.postgres.schema import postgres_migrations, render_plain_sql

    if print_sql:
        sys.stdout.write(render_plain_sql(after_version=after))
        return 0
    from threadloom.storage.postgres.store import PostgresStore

    store = PostgresStore(database_url) if database_url else PostgresStore.from_environment(auto_migrate=False)
    try:
        applied = store.migrate()
    finally:
        store.close()
    names = {migration.version: migration.name for migration in postgres_migrations()}
    for version in applied:
        print(f"applied {names[version]}")
    latest = max(names, default=0)
    print(f"schema is at version {latest}" if applied else f"schema already at version {latest}; nothing to do")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    try:
        if arguments.command == "migrate":
            return migrate(arguments.database_url, print_sql=arguments.print_sql, after=arguments.after)
    except ThreadloomError as error:
        print(f"threadloom: {error}", file=sys.stderr)
        return 1
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
